"""Fan-out ops whose backward sums in a fixed order, for ``GraphQLayer(deterministic=True)``.

A parameter shared by many gates (QAOA's ``gamma_l`` by every edge of every sample) gets the sum of their
gradients. Torch reduces an ``expand`` / indexing backward with a vectorised sum (or atomics on CUDA) whose
blocking depends on the tensor's size, so a sample's contribution can round differently alone and inside a
bigger batch. Here each sum is a left fold of elementwise adds in a fixed order: over a sample's gates first
(gate order), then over samples (batch order). Elementwise adds round the same on every device and at every
size, so a sample's contribution is bitwise the same wherever it sits, and the total is the fold of the
per-sample contributions in batch order.

Without ``deterministic`` the plain torch ops are used (one vectorised reduction, faster).
"""

from __future__ import annotations

import torch


def _fold(parts) -> torch.Tensor:
    it = iter(parts)
    acc = next(it)
    for p in it:
        acc = acc + p
    return acc


class _RowShare(torch.autograd.Function):
    """``x`` (any shape) repeated as ``n`` rows; backward folds the rows in row order."""

    @staticmethod
    def forward(x: torch.Tensor, n: int) -> torch.Tensor:
        return x.unsqueeze(0).expand(n, *x.shape).clone()

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        return _fold(g.unbind(0)), None


class _ColumnShare(torch.autograd.Function):
    """A ``(B,)`` vector repeated as ``n`` columns ``(B, n)``; backward folds the columns in column order
    (one elementwise add per column over the batch, so each row's sum is independent of ``B``)."""

    @staticmethod
    def forward(x: torch.Tensor, n: int) -> torch.Tensor:
        return x.unsqueeze(1).expand(x.shape[0], n).clone()

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        return _fold(g.unbind(1)), None


class _Take(torch.autograd.Function):
    """``x[:, index]`` for ``x`` ``(B, G)``; backward sums each source's occurrences in index order.

    ``occurrences`` is ``(G, D)``: for source ``s`` the positions ``k`` with ``index[k] == s``, in increasing
    order, padded with ``len(index)`` (a zero column)."""

    @staticmethod
    def forward(x: torch.Tensor, index: torch.Tensor, occurrences: torch.Tensor) -> torch.Tensor:
        return x.index_select(1, index)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.occurrences = inputs[2]

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        padded = torch.cat([g, g.new_zeros(g.shape[0], 1)], 1)
        occ = ctx.occurrences.to(g.device)
        return _fold(padded.index_select(1, occ[:, d]) for d in range(occ.shape[1])), None, None


def occurrences(index: torch.Tensor, n_sources: int) -> torch.Tensor:
    """The ``(n_sources, D)`` table :class:`_Take` folds with.

    >>> occurrences(torch.tensor([1, 0, 1]), 3).tolist()
    [[1, 3], [0, 2], [3, 3]]
    """
    where: list[list[int]] = [[] for _ in range(n_sources)]
    for k, s in enumerate(index.tolist()):
        where[s].append(k)
    depth = max(1, max(len(w) for w in where) if where else 1)
    pad = len(index)
    return torch.tensor([w + [pad] * (depth - len(w)) for w in where], dtype=torch.long).reshape(n_sources, depth)


def share_rows(x: torch.Tensor, n: int, deterministic: bool) -> torch.Tensor:
    """``x`` repeated as ``n`` leading rows (one per sample)."""
    if deterministic and x.requires_grad:
        return _RowShare.apply(x, n)
    return x.unsqueeze(0).expand(n, *x.shape)


def share_columns(x: torch.Tensor, n: int, deterministic: bool) -> torch.Tensor:
    """A per-sample ``(B,)`` value repeated for ``n`` gates: ``(B, n)``."""
    if deterministic and x.requires_grad:
        return _ColumnShare.apply(x, n)
    return x.unsqueeze(1).expand(x.shape[0], n)


def take(x: torch.Tensor, index: torch.Tensor, occ: torch.Tensor | None, deterministic: bool) -> torch.Tensor:
    """``x[:, index]``; with ``deterministic`` (and ``occ`` from :func:`occurrences`) a fixed-order backward."""
    index = index.to(x.device)
    if deterministic and x.requires_grad:
        return _Take.apply(x, index, occ)
    return x.index_select(1, index)


def ordered_sum(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(-1)`` as a left fold over the last axis (the same rounding alone and in a batch)."""
    if x.shape[-1] == 0:
        return x.sum(-1)
    return _fold(x.unbind(-1))


__all__ = ["share_rows", "share_columns", "take", "occurrences", "ordered_sum"]

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


def ordered_sum(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(-1)`` as a left fold over the last axis (the same rounding alone and in a batch)."""
    if x.shape[-1] == 0:
        return x.sum(-1)
    return _fold(x.unbind(-1))


__all__ = ["share_rows", "share_columns", "ordered_sum"]

"""Run a class once per distinct parameter row, with exact gradients for every row.

Members of a cone class often read equal parameters (a QAOA layer's one angle on every edge): they give
equal values, so only the distinct rows need to run. The members' parameters are still separate inputs
(each gate of the full circuit has its own), and each must get its own gradient: with ``f`` the class's
value as a function of one row, ``d out_m / d row_m = grad f(row_m)``, the same vector for equal rows. So
the forward runs the distinct rows with autograd recording (the state-vector program's adjoint node), the
backward takes their gradients with a cotangent of ones and hands each member its row's gradient times
its own cotangent.
A second derivative (``create_graph``) recomputes every row with autograd: exact Hessians, no sharing.

Which rows are equal is known from the plan where the rows are gathered from a few inputs' elements
(``member_groups``: a ``static_structure`` qnode or a layer feeding ``gamma[l]`` to every edge), so such a
step never looks at values to find out (rows that read different elements are taken as distinct). Elsewhere (a plain qnode's ``2 * gamma[l]`` is a new tensor per
gate) the values decide with a data-dependent ``unique``, which waits for the device; while a CUDA graph
is being captured, where nothing may wait, every row runs (exact, without the sharing).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ...._constants import on_device

Run = Callable[[torch.Tensor], torch.Tensor]
"""``[K, P]`` parameter rows in, ``[K]`` values out (differentiable)."""

_GROUPS: WeakIdKeyDictionary = WeakIdKeyDictionary()  # sources -> {table -> (first, inverse) on the host}


def member_groups(sources: torch.Tensor, table: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(the first member of each group, each member's group) of the members whose rows ``table`` (``[M, P]``
    positions in the parameter row) read the same inputs: ``sources`` (``[row]``) is where each parameter
    is gathered from, so equal source rows are equal values whatever the values. None where no two members
    read the same inputs. Worked out once per plan, on the host; the indexes are kept per device.

    >>> first, inverse = member_groups(torch.tensor([7, 7, 9]), torch.tensor([[0, 2], [1, 2], [2, 0]]), "cpu")
    >>> first.tolist(), inverse.tolist()
    ([0, 2], [0, 0, 1])
    """
    per = _GROUPS.get(sources)
    if per is None:
        per = _GROUPS[sources] = WeakIdKeyDictionary()
    hit = per.get(table, False)
    if hit is False:
        if table.shape[1]:
            _, inverse = torch.unique(sources[table.cpu()], dim=0, return_inverse=True)
        else:  # a class of no parameter (an X past commuting RXs: its cone keeps a Hadamard): one row, empty
            inverse = torch.zeros(table.shape[0], dtype=torch.long)
        first = _first_of(inverse, int(inverse.max()) + 1 if inverse.numel() else 0)
        order = torch.argsort(first)  # groups in the order of their first member
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel())
        hit = per[table] = (first[order], rank[inverse]) if first.numel() < inverse.numel() else None
    return None if hit is None else (on_device(hit[0], device), on_device(hit[1], device))


def capturing(t: torch.Tensor) -> bool:
    """Whether a CUDA graph is being captured on ``t``'s device (nothing may read values back to the host)."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


BY_VALUES = "values"
"""``run_distinct``'s ``groups`` where only the values show which rows are equal."""


def run_distinct(run: Run, rows: torch.Tensor, groups=BY_VALUES) -> torch.Tensor:
    """``run(rows)``, running only the distinct rows of ``rows`` (``[K, P]``, no broadcast axis). ``groups``:
    (first row, inverse) of the rows known equal from the plan (``member_groups``), None where the plan
    knows of none, or ``BY_VALUES``."""
    if rows.shape[1] and (groups is None or groups is BY_VALUES and capturing(rows)):
        return run(rows)  # none known equal, or a CUDA graph being captured (it cannot wait for values)
    with torch.no_grad():
        if rows.shape[1] == 0:  # a class without parameters: every member is the same circuit
            unique, inverse = rows[:1], torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
        elif groups is not BY_VALUES:
            unique, inverse = rows.detach().index_select(0, groups[0]), groups[1]
        else:
            unique, inverse = torch.unique(rows.detach(), dim=0, return_inverse=True)
    if unique.shape[0] == rows.shape[0]:
        return run(rows)  # nothing shared: the plain (adjoint) program
    if not (torch.is_grad_enabled() and rows.requires_grad):
        with torch.no_grad():
            return run(unique)[inverse]
    return _Shared.apply(run, rows, unique, inverse)


class _Shared(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, rows, unique, inverse):
        ctx.run, ctx.k = run, unique.shape[0]
        ctx.save_for_backward(rows, inverse)
        # the distinct rows run on a leaf of their own with autograd recording (the state-vector program's
        # adjoint node): the backward pass then reads their gradients without running them again
        with torch.enable_grad():
            ctx.leaf = unique.detach().requires_grad_(True)
            ctx.out = run(ctx.leaf)
        return ctx.out.detach()[inverse]

    @staticmethod
    def backward(ctx, dy):
        rows, inverse = ctx.saved_tensors
        leaf, out = ctx.leaf, ctx.out
        ctx.leaf = ctx.out = None
        if torch.is_grad_enabled():  # a higher derivative: every row through autograd
            with torch.enable_grad():
                full = ctx.run(rows)
                # (a class with no gate left, its cones' diagonal gates before Z words, reads no row)
                grads = torch.autograd.grad(full, rows, dy, create_graph=True, allow_unused=True) if full.requires_grad else (None,)
            return None, torch.zeros_like(rows) if grads[0] is None else grads[0], None, None
        if out is None:  # a second backward through the same graph: run the distinct rows again
            with torch.enable_grad():
                leaf = rows.detach()[_first_of(inverse, ctx.k)].requires_grad_(True)
                out = ctx.run(leaf)
        with torch.enable_grad():  # a cotangent of ones as a sum: a tensor cotangent makes torch import sympy
            total = out.real.sum()
        # (a class whose value does not depend on its rows, a CRX controlled by |0>, or that has none, gives them
        # no gradient)
        (g_unique,) = torch.autograd.grad(total, leaf, allow_unused=True) if total.requires_grad else (None,)
        if g_unique is None:
            return None, torch.zeros_like(rows), None, None
        return None, dy.unsqueeze(-1) * g_unique[inverse], None, None


def _first_of(inverse: torch.Tensor, k: int) -> torch.Tensor:
    """For each of the ``k`` distinct rows, the index of its first occurrence."""
    first = torch.full((k,), inverse.numel(), dtype=torch.long, device=inverse.device)
    return first.scatter_reduce(0, inverse, torch.arange(inverse.numel(), device=inverse.device), "amin")


__all__ = ["BY_VALUES", "capturing", "member_groups", "run_distinct"]

"""Run a class once per distinct parameter row, with exact gradients for every row.

Members of a cone class often read equal parameters (a QAOA layer's one angle on every edge): they give
equal values, so only the distinct rows need to run. The members' parameters are still separate inputs
(each gate of the full circuit has its own), and each must get its own gradient: with ``f`` the class's
value as a function of one row, ``d out_m / d row_m = grad f(row_m)``, the same vector for equal rows. So
the forward runs the distinct rows with autograd recording (the state-vector program's adjoint node), the
backward takes their gradients with a cotangent of ones and hands each member its row's gradient times
its own cotangent.
A second derivative (``create_graph``) recomputes every row with autograd: exact Hessians, no sharing.
"""

from __future__ import annotations

from typing import Callable

import torch

Run = Callable[[torch.Tensor], torch.Tensor]
"""``[K, P]`` parameter rows in, ``[K]`` values out (differentiable)."""


def run_distinct(run: Run, rows: torch.Tensor) -> torch.Tensor:
    """``run(rows)``, running only the distinct rows of ``rows`` (``[K, P]``, no broadcast axis)."""
    with torch.no_grad():
        if rows.shape[1] == 0:  # a class without parameters: every member is the same circuit
            unique, inverse = rows[:1], torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
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
        ctx.run = run
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
                (grad,) = torch.autograd.grad(full, rows, dy, create_graph=True)
            return None, grad, None, None
        if out is None:  # a second backward through the same graph: run the distinct rows again
            with torch.enable_grad():
                leaf = rows.detach()[_first_of(inverse)].requires_grad_(True)
                out = ctx.run(leaf)
        with torch.enable_grad():  # a cotangent of ones as a sum: a tensor cotangent makes torch import sympy
            total = out.real.sum()
        (g_unique,) = torch.autograd.grad(total, leaf)
        return None, dy.unsqueeze(-1) * g_unique[inverse], None, None


def _first_of(inverse: torch.Tensor) -> torch.Tensor:
    """For each distinct row, the index of its first occurrence."""
    k = int(inverse.max()) + 1
    first = torch.full((k,), inverse.numel(), dtype=torch.long, device=inverse.device)
    return first.scatter_reduce(0, inverse, torch.arange(inverse.numel(), device=inverse.device), "amin")


__all__ = ["run_distinct"]

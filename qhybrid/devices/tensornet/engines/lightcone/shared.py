"""Run a class once per distinct parameter row, with exact gradients for every row.

Members of a cone class often read equal parameters (a QAOA layer's one angle on every edge): they give
equal values, so only the distinct rows need to run. The members' parameters are still separate inputs
(each gate of the full circuit has its own), and each must get its own gradient: with ``f`` the class's
value as a function of one row, ``d out_m / d row_m = grad f(row_m)``, the same vector for equal rows. So
the backward runs the distinct rows once more with autograd (the state-vector program's adjoint node),
with a cotangent of ones, and hands each member its row's gradient times its own cotangent.
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
        ctx.save_for_backward(rows, unique, inverse)
        with torch.no_grad():
            return run(unique)[inverse]

    @staticmethod
    def backward(ctx, dy):
        rows, unique, inverse = ctx.saved_tensors
        if torch.is_grad_enabled():  # a higher derivative: every row through autograd
            with torch.enable_grad():
                out = ctx.run(rows)
                (grad,) = torch.autograd.grad(out, rows, dy, create_graph=True)
            return None, grad, None, None
        with torch.enable_grad():
            leaf = unique.detach().requires_grad_(True)
            out = ctx.run(leaf)
            (g_unique,) = torch.autograd.grad(out, leaf, torch.ones_like(out))
        return None, dy.unsqueeze(-1) * g_unique[inverse], None, None


__all__ = ["run_distinct"]

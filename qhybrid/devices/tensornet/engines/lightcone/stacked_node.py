"""The stacked cone classes' run (``stacked_plan``) as ONE autograd node from the cone program's parameter row
to every member's value.

Forward: gather every gate kind's angles from the row (one index a kind), build their matrices and, for the
backward, their derivatives in one call a kind (``gate_grads``), every Kronecker block of one size in one gather
and product (``kron_tables``), then walk the ``[S, 2**N]`` state through the plan's steps (one ``bmm`` a
diagonal run or block; a run whose gates read one angle a row takes its phases from its few values'
``exp(i theta c)``, ``phase_factors.PHASE_TABLE_MAX_VALUES``) keeping the state before each step (the stack is
small: ``STACK_MAX_AMPLITUDES``). Measure ``v_s = sum_x signs[s, x] |psi[s, x]|^2`` and hand member m the value
of its row.

Backward: the adjoint walk with a cotangent of one on every row (so that each row's gradient is that of its own
value, ``J_s``), carrying ``h = conj(g)``: a block's factor cotangent ``conj(g_K) = sum h psi_before^T`` and
``h <- K^T h``; a diagonal run's angle cotangents ``-T Im(h psi_after)`` (a shared-angle run's one a row: ``-C``
for ``T``) and ``h <- P h``. Then the blocks to their factors, the factors to their angles, and every angle's
cotangent times the cotangent of every member of its row into the parameter that member reads (one
``index_add``): member m's gradient is ``dy_m J_row(m)``, exact for members with equal parameters. Higher
derivatives recompute through ``fallback`` (the per-class path, differentiable by torch).
"""

from __future__ import annotations

import torch

from ..statevector import gate_grads
from ..statevector.kron_tables import kron_gather, kron_gather_vjp


def _apply(psi, K, q: int, k: int):
    """``K`` ``[S, D, D]`` on wires q..q+k-1 of every row of ``psi`` ``[S, 2**N]``."""
    S, D = K.shape[0], 1 << k
    if q == 0:
        return torch.bmm(K, psi.view(S, D, -1)).view(psi.shape)
    A = 1 << q
    Kx = K.unsqueeze(1).expand(S, A, D, D).reshape(S * A, D, D)
    return torch.bmm(Kx, psi.view(S * A, D, -1)).view(psi.shape)


def _phases(theta, run):
    """``L = sum_g theta[s, g] table[s, g]`` for a dense run ``(T, -T)`` (``T [S, G, 2**N]``) or a factored one
    ``(U^T, V, U, W)`` (``statevector.phase_factors``): ``U^T (theta V)``, one small product per row."""
    if len(run) == 2:
        return torch.bmm(theta.unsqueeze(1), run[0])  # [S, 1, G] x [S, G, 2**N]: rows stream
    Ut, V = run[0], run[1]
    return torch.bmm(Ut, V * theta.unsqueeze(-1))  # [S, 2**h, G] x [S, G, 2**l]


def _phase_cotangents(run, w):
    """``-sum_x table[s, g, x] Im(w[s, x])`` ``[S, G]`` from ``w`` ``[S, 2**N, 2]`` (a complex product's real view)."""
    if len(run) == 2:
        return torch.bmm(run[1], w)[..., 1]
    U, W = run[2], run[3]
    uw = torch.bmm(U, w.view(w.shape[0], U.shape[2], -1))  # [S, G, 2 * 2**l]: U^T applied to the high wires
    return (uw * W).sum(-1)


def _cotangent(h, before, q: int, k: int, S: int):
    """``conj(g_K)`` ``[S, D, D]`` from ``h`` (conj cotangent after the block) and the state before it (conjugated
    once for all blocks of a size: a stack of conjugate views would copy each)."""
    D = 1 << k
    A = 1 << q
    prod = torch.bmm(h.view(S * A, D, -1), before.view(S * A, D, -1).transpose(1, 2))
    if A > 1:
        prod = prod.view(S, A, D, D).sum(1)
    return prod


def forward(plan, params: torch.Tensor, dtype, device, derivatives: bool):
    """(member values ``[M]``, what the backward needs)."""
    t = plan.on(dtype, device)
    flat = params.reshape(-1)
    mats, derivs = [], []
    for name, index in zip(plan.kinds, t["kind_index"]):
        m, dm = gate_grads.build_stacked(name, flat[index], dtype, device, with_derivatives=derivatives)
        mats.append(m)
        derivs.append(dm)
    pieces = mats + ([t["consts"]] if t["consts"] is not None else [])
    every = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
    S = plan.S
    factors, blocks = {}, {}
    for k, table in t["blocks"].items():
        factors[k] = every.index_select(0, table).view(-1, k, 2, 2)
        blocks[k] = kron_gather(factors[k]).view(-1, S, 1 << k, 1 << k).unbind(0)  # one unbind, not a select a block
    psi = t["psi0"]
    kept, phases = [], []
    for kind, data in plan.steps:
        if kind == "diagonal":
            kept.append(psi)
            shared = t["shared"][data]
            if shared is not None:  # one angle a row: its few phases, gathered (``phase_factors``)
                position, values, codes, _ = shared
                A = flat[position] * values  # [S * D]
                P = torch.take(torch.complex(torch.cos(A), torch.sin(A)), codes)  # [S, 2**N]
            else:
                run, L0 = t["tables"][data]
                theta = flat[t["run_index"][data]]  # [S, G]
                L = _phases(theta, run).view(psi.shape)
                if L0 is not None:
                    L = L + L0
                P = torch.complex(torch.cos(L), torch.sin(L))
            phases.append(P)
            psi = psi * P
        else:
            kept.append([])
            for q, k, b in data:
                kept[-1].append(psi)
                psi = _apply(psi, blocks[k][b], q, k)
    # sum_x signs |psi|^2 as one batched dot over the interleaved real view: a sum over its pairs first
    # (an inner size of 2) took 1.5 ms of a 4 ms forward at 3 x 2**14 amplitudes
    real = torch.view_as_real(psi).reshape(S, 1, -1)
    values = torch.bmm(real * t["signs_pairs"], real.transpose(1, 2)).view(S)
    out = values.index_select(0, t["member_row"])
    return out, (psi, kept, phases, derivs, factors, blocks, len(flat), every.shape[0])


def backward(plan, record, dy: torch.Tensor) -> torch.Tensor:
    """The cotangent of the parameter row (flat) from ``dy`` ``[M]``, that of the member values."""
    psi, kept, phases, derivs, factors, blocks, total, rows = record
    t = plan.on(psi.dtype, psi.device)
    S = plan.S
    h = psi.conj() * t["signs2"]  # conj of the cotangent of sum_x signs |psi|^2 (a cotangent of one a row)
    g_blocks: dict = {k: [None] * len(b) for k, b in blocks.items()}
    g_runs: list = [None] * len(phases)
    after = psi
    for i in range(len(plan.steps) - 1, -1, -1):
        kind, data = plan.steps[i]
        if kind == "diagonal":
            run, _ = t["tables"][data]
            shared = t["shared"][data]
            # Im(h psi_after) read from the product's real view: the imaginary part alone is a strided copy
            if shared is not None:  # one angle a row: the run's cotangent [S], one dot a row
                g_runs[data] = torch.bmm(torch.view_as_real(h * after).view(S, 1, -1), shared[3]).view(S)
            else:
                g_runs[data] = _phase_cotangents(run, torch.view_as_real(h * after))  # [S, G]
            h = h * phases[data]
            after = kept[i]
            continue
        for (q, k, b), before in zip(reversed(data), reversed(kept[i])):
            g_blocks[k][b] = _cotangent(h, before, q, k, S)
            h = _apply(h, blocks[k][b].transpose(1, 2), q, k)
        after = kept[i][0]
    g_every = None
    for k, gs in g_blocks.items():
        G = torch.stack(gs).view(-1, 1 << k, 1 << k).conj()
        g_f = kron_gather_vjp(factors[k], G).reshape(-1, 2, 2)
        if g_every is None:
            g_every = torch.zeros(rows, 2, 2, dtype=psi.dtype, device=psi.device)
        g_every.index_add_(0, t["blocks"][k], g_f)
    parts, at = [], 0
    for dm in derivs:
        n = dm.shape[1]
        if g_every is None:  # pragma: no cover - a gate kind is only planned inside a block
            raise AssertionError("stacked gates without blocks")
        parts.append(gate_grads.angle_cotangents_stacked(dm, g_every[at : at + n]).reshape(-1))
        at += n
    parts.extend(g.reshape(-1) for g in g_runs)
    ga = torch.cat(parts) if len(parts) > 1 else parts[0]
    contrib = dy.index_select(0, t["member"]) * ga.index_select(0, t["angle"])
    return torch.zeros(total, dtype=contrib.dtype, device=contrib.device).index_add_(0, t["target"], contrib)


class StackedNode(torch.autograd.Function):
    """``plan`` run on ``params`` (the cone program's ``[1, P]`` parameter row): every member's value ``[M]``."""

    @staticmethod
    def forward(ctx, plan, fallback, dtype, device, params):
        out, record = forward(plan, params.detach(), dtype, device, ctx.needs_input_grad[4])
        ctx.plan, ctx.fallback, ctx.record = plan, fallback, record
        ctx.save_for_backward(params)
        return out

    @staticmethod
    def backward(ctx, dy):
        (params,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # a higher derivative: torch reverse mode over the per-class path
            with torch.enable_grad():
                alias = params.view_as(params)
                out = ctx.fallback(alias)
            (g,) = torch.autograd.grad(out, alias, dy, create_graph=True)
            return None, None, None, None, g
        grad = backward(ctx.plan, ctx.record, dy.to(params.dtype))
        return None, None, None, None, grad.view(params.shape)


__all__ = ["StackedNode", "forward", "backward"]

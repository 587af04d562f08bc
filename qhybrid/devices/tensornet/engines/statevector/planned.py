"""A bound program's run and adjoint walk on small states with one op per block: every state of the run in one
workspace, read through views made once a step per shape.

``kernels.run`` and ``kernels.adjoint`` take each block's state as ``[2**n, S, B]``: a block reshapes it to its
``[A, D, R]`` view, multiplies and reshapes back (4 ops a block forward, 10-12 back with its cotangent). On a
small state (W1: 8 wires at batch 128, 0.5 MiB) those views, not the arithmetic, are the step. Here the run
writes the state after each action into slot ``i`` of one ``[L, 2**n B]`` workspace, and every slot is read
in the layout its consumer wants through ``workspace.view(L, *shape).unbind(0)``: two ops per distinct shape
(W1: three shapes), then one ``mm`` / ``bmm`` / ``index_select`` with ``out=`` per action. The walk back keeps
the cotangent in two more slots of the workspace (ping-pong, through the same views), and every kept state is
read where it lies.

For programs of a product state then ``plain`` blocks and ``monomial`` steps only (``eligible``); everything
else takes the general kernels.
"""

from __future__ import annotations

import torch
from torch.utils.weak import WeakIdKeyDictionary

from . import kernels
from .product import product_state, product_vjp
from .product_stacked import stacked_state, stacked_vjp

PLANNED_MAX_BYTES = 32 << 20
"""The workspace (every state of the run) is used up to this size; larger runs take ``kernels.run``."""


def eligible(actions, n: int, B: int, itemsize: int, keep_bytes: int) -> bool:
    """Whether ``run`` / ``adjoint`` take this program: a product, then plain blocks and monomials, on a state
    below ``kernels.REAL_GEMM_MIN_AMPLITUDES`` (where ``kernels`` multiplies real blocks on the real view
    instead), every state within ``keep_bytes`` (the forward pass's budget for kept states) too."""
    amplitudes = (1 << n) * B
    if amplitudes >= kernels.REAL_GEMM_MIN_AMPLITUDES or len(actions) < 2 or actions[0].kind != "product":
        return False
    if (len(actions) + 2) * amplitudes * itemsize > min(PLANNED_MAX_BYTES, keep_bytes):
        return False
    return all(a.kind in ("plain", "monomial") for a in actions[1:])


def _shape(a, N: int, B: int) -> tuple:
    """(how, layout): how action ``a`` multiplies, and the layout it reads and writes its state in."""
    if a.kind == "monomial":
        return "gather", (N, B)
    q, k = a.info
    A, D = 1 << q, 1 << k
    R = N * B // (A * D)
    if A == 1:  # the first wires: m @ psi
        return "first", (D, R)
    if R == 1:  # the last wires, no batch: psi @ m^T
        return "last", (A, D)
    return "middle", (A, D, R)


class _Views:
    """``workspace.view(slots, *shape).unbind(0)`` per shape (and the same transposed), made on first use."""

    __slots__ = ("ws", "slots", "made", "stacked")

    def __init__(self, ws, slots):
        self.ws, self.slots, self.made, self.stacked = ws, slots, {}, {}

    def __call__(self, shape, transposed: bool = False):
        hit = self.made.get((shape, transposed))
        if hit is None:
            whole = self.stacked.get(shape)
            if whole is None:
                whole = self.stacked[shape] = self.ws.view(self.slots, *shape)
            hit = self.made[(shape, transposed)] = (whole.transpose(-1, -2) if transposed else whole).unbind(0)
        return hit


_COLUMNS: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _column(phase: torch.Tensor, dtype) -> torch.Tensor:
    """``phase[:, None]`` in ``dtype``, made once per phase tensor (a plan-time constant; dropped with it)."""
    per = _COLUMNS.get(phase)
    if per is None:
        per = _COLUMNS[phase] = {}
    hit = per.get(dtype)
    if hit is None:
        hit = per[dtype] = phase.to(dtype)[:, None]
    return hit


def run(actions, tensors, n: int, B: int, dtype, device):
    """(final state in the last action's layout, record for ``adjoint``)."""
    N = 1 << n
    first = actions[0]
    vectors = tensors[first.start : first.stop]
    halves: list = []
    if len(vectors) == 1 and vectors[0].ndim == 4:
        psi0 = stacked_state(vectors[0], 1, B, halves)
    else:
        psi0 = product_state(vectors, 1, B, dtype, device)
    rest = actions[1:]
    L = len(rest)
    # slots 0 .. L-1: the state after each action; L, L + 1: the walk's cotangents (their views made here, once)
    views = _Views(torch.empty(L + 2, N * B, dtype=dtype, device=device), L + 2)
    hows = [_shape(a, N, B) for a in rest]
    shapes = [shape for _, shape in hows]
    mats: list = [None] * L  # the matrix each block multiplied by (expanded where batched): the walk's transposes
    x = psi0.view(shapes[0])
    for i, a in enumerate(rest):
        shape = shapes[i]
        if i:
            x = views(shape)[i - 1]
        out = views(shape)[i]
        if a.kind == "plain":
            m, how = tensors[a.start], hows[i][0]
            if how == "middle":
                m = m.expand(shape[0], m.shape[0], m.shape[1])
                torch.bmm(m, x, out=out)
            elif how == "first":
                torch.mm(m, x, out=out)
            else:
                m = m.T
                torch.mm(x, m, out=out)
            mats[i] = m
        else:
            perm, phase = a.info
            if perm is not None:
                torch.index_select(x, 0, perm[0], out=out)
                if phase is not None:
                    out.mul_(_column(phase, dtype))
            else:
                torch.mul(x, _column(phase, dtype), out=out)
    return out, (psi0, halves, views, hows, mats)


def adjoint(actions, tensors, record, h, needs, conj_blocks) -> list:
    """Cotangents of the program's tensors from ``h``, the conjugated cotangent of the final state (any layout).
    A block whose ``conj_blocks`` entry is set gets ``conj`` of its cotangent (one op less; ``bound_vjp`` takes
    Kronecker blocks so)."""
    psi0, halves, views, hows, mats = record
    shapes = [shape for _, shape in hows]
    rest = actions[1:]
    L = len(rest)
    N = psi0.shape[0]
    B = psi0.numel() // N
    grads: list = [None] * len(tensors)
    hx = h.view(shapes[-1])
    for i in range(L - 1, -1, -1):
        a, shape = rest[i], shapes[i]
        if i < L - 1:
            hx = views(shape)[L + (i + 1) % 2]
        out = views(shape)[L + i % 2]
        if a.kind == "plain":
            m, how = mats[i], hows[i][0]
            if needs[a.start]:
                if how == "last":  # conj(g_m) = h^T psi
                    gc = torch.mm(hx.T, views(shape)[i - 1] if i else psi0.view(shape))
                else:  # the state before, transposed: one view family for every block of this layout
                    xt = views(shape, True)[i - 1] if i else psi0.view(shape).transpose(-1, -2)
                    # middle: conj(g_m) = sum over a, r of h[a, :, r] psi[a, :, r]^T
                    gc = torch.bmm(hx, xt).sum(0) if how == "middle" else torch.mm(hx, xt)
                grads[a.start] = gc if conj_blocks[a.start] else gc.conj()
            if how == "middle":  # h before = m^T h
                torch.bmm(m.mT, hx, out=out)
            elif how == "first":
                torch.mm(m.T, hx, out=out)
            else:  # m is the block transposed: h before = h m
                torch.mm(hx, m.T, out=out)
        else:
            perm, phase = a.info
            if perm is not None:
                src = hx if phase is None else hx * _column(phase, hx.dtype)
                torch.index_select(src, 0, perm[1], out=out)
            else:
                torch.mul(hx, _column(phase, hx.dtype), out=out)
        hx = out
    first = actions[0]
    if any(needs[first.start : first.stop]):
        vectors = tensors[first.start : first.stop]
        h0 = hx.view(N, 1, B)
        if len(vectors) == 1 and vectors[0].ndim == 4:
            grads[first.start] = stacked_vjp(vectors[0], h0, halves)
        else:
            grads[first.start : first.stop] = product_vjp(vectors, h0, needs[first.start : first.stop])
    return grads

"""The adjoint method for state-vector programs: a whole program as one autograd node."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.weak import WeakIdKeyDictionary

from ...._threads import threads_for
from ...._constants import on_device
from . import kernels, planned
from .buffers import fresh
from .zwords import z_cotangent, z_expvals, z_values

KEEP_STATES_MAX_BYTES = 64 << 20
"""The forward pass keeps the states before its gate actions up to this many bytes, so that the backward
walk only carries the cotangent back through them; every other state is recomputed by un-applying the
actions (O(1) states). Small circuits keep all of theirs (W1: 5 MiB); on large states keeping them saved
no time (W5, 64 MiB states: 2.75 s keeping none, 2.81 s keeping four) but costs their memory."""

KEEP_STATE_MAX_BYTES = 16 << 20
"""States larger than this are never kept (W5's 64 MiB state, kept once, raised its peak by a state and bought
one matmul of the walk)."""

UNITARY_ATOL = {torch.complex128: 1e-10, torch.complex64: 1e-5}


def np_unitary(m: np.ndarray) -> bool:
    return bool(np.allclose(m @ m.conj().T, np.eye(len(m)), atol=1e-12, rtol=0))


_CHECKED: WeakIdKeyDictionary = WeakIdKeyDictionary()
"""Matrices found unitary or not, with the version they had (a constant matrix is made once per value: read once)."""


def is_unitary(m: torch.Tensor) -> bool:
    seen = _CHECKED.get(m)
    if seen is not None and seen[0] == m._version:
        return seen[1]
    d = m.detach()
    eye = torch.eye(d.shape[-1], dtype=d.dtype, device=d.device)
    found = float((torch.matmul(d, d.mH) - eye).abs().max()) <= UNITARY_ATOL.get(d.dtype, 1e-5)
    if not m.requires_grad:  # (a trainable one is new every step)
        _CHECKED[m] = (m._version, found)
    return found


class AdjointProgram(torch.autograd.Function):
    """A whole state-vector program as one autograd node whose backward is the adjoint method.

    Forward runs the actions and keeps only the final state. Backward walks the actions in reverse,
    un-applying each (unitary) action to the state and to its cotangent and reading each action's
    matrix cotangent as ``g psi^H`` on the way: O(1) states of memory, however deep the circuit.
    Only tensors that require a gradient get one.

    Higher derivatives (``create_graph=True``) fall back to torch reverse mode over a recomputation of
    the program from the saved tensors, so Hessians stay exact.
    """

    @staticmethod
    def forward(ctx, actions, n, S, B, signs, *tensors):
        with threads_for((1 << n) * S * B, tensors[0].device):
            return AdjointProgram._forward(ctx, actions, n, S, B, signs, tensors)

    @staticmethod
    def _forward(ctx, actions, n, S, B, signs, tensors):
        psi, keep = run_keeping(actions, tensors, n, S, B)
        if any(psi is t for t in tensors):
            psi = psi.clone()  # saved below: must not be an input
        ctx.actions, ctx.n, ctx.S, ctx.B, ctx.states, ctx.signs = actions, n, S, B, keep, signs
        ctx.save_for_backward(*tensors, psi)
        return psi if signs is None else z_expvals(signs, psi)

    @staticmethod
    def backward(ctx, g):
        with threads_for((1 << ctx.n) * ctx.S * ctx.B, g.device):
            return AdjointProgram._backward(ctx, g)

    @staticmethod
    def _backward(ctx, g):
        *tensors, psi = ctx.saved_tensors
        needs = list(ctx.needs_input_grad[5:])
        signs = ctx.signs
        if torch.is_grad_enabled():  # a higher derivative: torch reverse mode over a recomputation
            with torch.enable_grad():
                out = kernels.run(ctx.actions, tensors, ctx.n, ctx.S, ctx.B, psi.dtype, psi.device, differentiable=True)
                if signs is not None:
                    out = z_expvals(signs, out)
            wrt = [t for t, nd in zip(tensors, needs) if nd]
            got = iter(torch.autograd.grad(out, wrt, g, create_graph=True, allow_unused=True))
            grads = [next(got) if nd else None for nd in needs]
        else:
            h = state_cotangent(g, psi, signs)
            grads = kernels.adjoint(ctx.actions, tensors, psi, h, needs, ctx.n, ctx.states, own_h=fresh(h, (g, psi)))
        return (None, None, None, None, None, *grads)


def run_keeping(actions, tensors, n: int, S: int, B: int):
    """(final state, states kept before gate actions within KEEP_STATES_MAX_BYTES, or None)."""
    t0 = tensors[0]
    state_bytes = (1 << n) * S * B * t0.element_size()
    budget = KEEP_STATES_MAX_BYTES // state_bytes if state_bytes <= KEEP_STATE_MAX_BYTES else 0
    keep = [] if budget > 0 else None
    psi = kernels.run(actions, tensors, n, S, B, t0.dtype, t0.device, keep=keep, keep_count=budget)
    return psi, keep


def state_cotangent(g: torch.Tensor, psi: torch.Tensor, signs) -> torch.Tensor:
    """``h``, the conjugated cotangent of the final state, from ``g`` (that of the state, or of the Z-word
    expectation values when ``signs`` is given)."""
    if signs is None:
        return g.conj().resolve_conj()
    # E_m = sum_x s_mx |psi_x|^2: the cotangent of psi is 2 psi (s^T dy)
    s = signs.to(device=g.device, dtype=g.dtype)
    w = torch.matmul(s.T, g.reshape(g.shape[0], -1)).reshape(psi.shape)
    h = torch.view_as_real(psi) * w[..., None]
    h.mul_(_two(w.dtype, w.device))  # 2 conj(psi) on the real view, in place: one state-sized temporary less
    return torch.view_as_complex(h)


class BoundNode(torch.autograd.Function):
    """A circuit bound to its inputs (``bound.BoundProgram``) as ONE autograd node from the raw inputs
    (the tensors the gate angles are gathered from) to the results: its forward builds the gate matrices
    and runs the program, its backward is the adjoint walk chained to the inputs by hand.

    Outputs: one ``[B]`` (or scalar) tensor per measurement when the program measures Z words, else the state
    ``[2**n, 1, B']``. Higher derivatives recompute through ``fallback(inputs)``, a differentiable run."""

    @staticmethod
    def forward(ctx, bound, fallback, dtype, device, *inputs):
        with threads_for(bound.amplitudes, torch.device(device)):
            return BoundNode._forward(ctx, bound, fallback, dtype, device, inputs)

    @staticmethod
    def _forward(ctx, bound, fallback, dtype, device, inputs):
        actions, tensors, record = bound.tensors(inputs, dtype, device, derivatives=any(ctx.needs_input_grad[4:]))
        B = bound.structure.batch_size or 1
        # small, Z words read: one op a block (planned; a state returned as it is would be a view of its workspace)
        itemsize = tensors[0].element_size()
        if bound.signs is not None and planned.eligible(actions, bound.n, B, itemsize, KEEP_STATES_MAX_BYTES):
            psi, keep = planned.run(actions, tensors, bound.n, B, dtype, device)
            keep = ("planned", keep)
        else:
            psi, keep = run_keeping(actions, tensors, bound.n, 1, B)
        signs = bound.signs
        if signs is not None:
            signs = on_device(signs, psi.device, psi.dtype.to_real())
        ctx.bound, ctx.fallback, ctx.signs = bound, fallback, signs
        ctx.run = (actions, tensors, record, psi, keep)
        ctx.save_for_backward(*inputs)
        if signs is None:
            return psi
        values = z_values(signs, psi)  # [measurements, B]
        if bound.structure.batch_size is None:
            values = values.view(values.shape[0])
        return values.unbind(0)  # one unbind, not a view each

    @staticmethod
    def backward(ctx, *gs):
        with threads_for(ctx.bound.amplitudes, ctx.run[3].device):
            return BoundNode._backward(ctx, gs)

    @staticmethod
    def _backward(ctx, gs):
        inputs = ctx.saved_tensors
        needs = list(ctx.needs_input_grad[4:])
        if torch.is_grad_enabled():  # a higher derivative: torch reverse mode over a differentiable rerun
            with torch.enable_grad():
                # aliases: an input that is a view of another (w and w[0]) must not be counted twice
                aliases = [x.view_as(x) for x in inputs]
                outs = ctx.fallback(aliases)
            pairs = [(o, g.reshape(o.shape)) for o, g in zip(outs, gs) if g is not None and o.requires_grad]
            wrt = [x for x, nd in zip(aliases, needs) if nd]
            got = iter(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], create_graph=True, allow_unused=True))
            return (None, None, None, None, *(next(got) if nd else None for nd in needs))
        actions, tensors, record, psi, keep = ctx.run
        if ctx.signs is None:
            g = gs[0]
        else:
            lead = (psi.numel() >> ctx.bound.n,) if ctx.bound.structure.batch_size is not None else ()
            zero = torch.zeros(lead, dtype=psi.dtype.to_real(), device=psi.device) if any(x is None for x in gs) else None
            g = torch.stack([zero if x is None else x for x in gs])
            if not lead:
                g = g.view(len(gs), 1)
        if ctx.signs is not None:
            h = z_cotangent(_twice_t(ctx.bound, ctx.signs), g, psi)
        else:
            h = state_cotangent(g, psi, None)
        origins = record[3]
        needed = [o is not None for o in origins]
        if isinstance(keep, tuple) and keep[0] == "planned":  # Kronecker blocks' cotangents come conjugated
            conj = [o is not None and o[0] == "kron" for o in origins]
            grads = planned.adjoint(actions, tensors, keep[1], h, needed, conj)
        else:
            conj = None
            grads = kernels.adjoint(actions, tensors, psi, h, needed, ctx.bound.n, keep, own_h=fresh(h, (g, psi)))
        return (None, None, None, None, *ctx.bound.input_cotangents(record, grads, inputs, needs, conj is not None))


def _twice_t(bound, signs: torch.Tensor) -> torch.Tensor:
    """``2 signs^T``, contiguous, made once per bound program, dtype and device (``zwords.z_cotangent``)."""
    key = ("twice_t", signs.dtype, signs.device)
    hit = bound._consts.get(key)
    if hit is None:
        hit = bound._consts[key] = (2 * signs).T.contiguous()
    return hit


_TWOS: dict = {}


def _two(dtype, device) -> torch.Tensor:
    """``[2, -2]``, made once per dtype and device (a host copy per backward would stop CUDA-graph capture)."""
    key = (dtype, device)
    if key not in _TWOS:
        _TWOS[key] = torch.tensor([2.0, -2.0], dtype=dtype, device=device)
    return _TWOS[key]

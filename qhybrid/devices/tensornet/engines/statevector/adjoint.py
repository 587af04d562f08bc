"""The adjoint method for state-vector programs: a whole program as one autograd node."""

from __future__ import annotations

import numpy as np
import torch

from . import kernels
from .zwords import z_expvals

KEEP_STATES_MAX_BYTES = 64 << 20
"""The forward pass keeps the states before its gate actions up to this many bytes, so that the backward
walk only carries the cotangent back through them; every other state is recomputed by un-applying the
actions (O(1) states). Small circuits keep all of theirs (W1: 5 MiB); on large states keeping them saved
no time (W5, 64 MiB states: 2.75 s keeping none, 2.81 s keeping four) but costs their memory."""

UNITARY_ATOL = {torch.complex128: 1e-10, torch.complex64: 1e-5}


def np_unitary(m: np.ndarray) -> bool:
    return bool(np.allclose(m @ m.conj().T, np.eye(len(m)), atol=1e-12, rtol=0))


def is_unitary(m: torch.Tensor) -> bool:
    m = m.detach()
    eye = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
    return float((torch.matmul(m, m.mH) - eye).abs().max()) <= UNITARY_ATOL.get(m.dtype, 1e-5)


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
        t0 = tensors[0]
        state_bytes = (1 << n) * S * B * t0.element_size()
        budget = KEEP_STATES_MAX_BYTES // state_bytes
        keep = [] if budget > 0 else None
        psi = kernels.run(actions, tensors, n, S, B, t0.dtype, t0.device, keep=keep, keep_count=budget)
        if any(psi is t for t in tensors):
            psi = psi.clone()  # saved below: must not be an input
        ctx.actions, ctx.n, ctx.S, ctx.B, ctx.states, ctx.signs = actions, n, S, B, keep, signs
        ctx.save_for_backward(*tensors, psi)
        return psi if signs is None else z_expvals(signs, psi)

    @staticmethod
    def backward(ctx, g):
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
            if signs is None:
                h = g.conj().resolve_conj()
            else:  # E_m = sum_x s_mx |psi_x|^2: the cotangent of psi is 2 psi (s^T dy)
                s = signs.to(device=g.device, dtype=g.dtype)
                w = torch.matmul(s.T, g.reshape(g.shape[0], -1)).reshape(psi.shape)
                two = _two(w.dtype, w.device)  # 2 conj(psi) on the real view
                h = torch.view_as_complex(torch.view_as_real(psi) * (w[..., None] * two))
            grads = kernels.adjoint(ctx.actions, tensors, psi, h, needs, ctx.n, ctx.states)
        return (None, None, None, None, None, *grads)


_TWOS: dict = {}


def _two(dtype, device) -> torch.Tensor:
    """``[2, -2]``, made once per dtype and device (a host copy per backward would stop CUDA-graph capture)."""
    key = (dtype, device)
    if key not in _TWOS:
        _TWOS[key] = torch.tensor([2.0, -2.0], dtype=dtype, device=device)
    return _TWOS[key]

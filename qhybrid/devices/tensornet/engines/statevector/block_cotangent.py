"""The cotangent of a gate block's matrix in the state-vector adjoint: ``conj(g_m) = sum h psi^T`` over every axis
but the block's, computed without a state-sized temporary (one GEMM where few wires follow the block, else
``2**q`` products summed in chunks)."""

from __future__ import annotations

import torch

from .product import sum_to


COTANGENT_CHUNK_ELEMENTS = 1 << 20
"""A gate block's cotangent sums ``2**q`` products ``h_a psi_a^T`` of ``D x D``: computed this many elements of
products at a time (16 MiB in complex128), not as one ``[2**q, D, D]`` temporary, which is a whole state or
more when few wires follow the block (a 4-wire block on wires 16-19 of 24: 2.8 s one-shot, 1.2 s in chunks of
4096 on the loaded 2-core CPU; on wires 18-21, 6.4 s against 1.2 s)."""

COTANGENT_TRACE_MAX_REST = 4
"""With at most this many amplitudes after the block's wires, its cotangent is one GEMM over the block and those
wires (``rest`` times the arithmetic, one efficient call) and their trace (a 4-wire block with 2 after it: 1.1 s
against 2.0 s in chunks; with 4 after it: 0.8 s against 1.2 s)."""


def block_cotangent(h, before, m, q, k, lead: bool):
    """Cotangent of a gate block on wires q..q+k-1 from conj cotangent ``h`` after it and state ``before``:
    conj(g_m) = sum over the other axes of h psi^T (per stack row / sample where ``m`` has a lead)."""
    D = 1 << k
    if lead:
        S, B = h.shape[1], h.shape[2]
        hv, pv = h.reshape(1 << q, D, -1, S, B), before.reshape(1 << q, D, -1, S, B)
        return sum_to(torch.einsum("aidsb,ajdsb->sbij", hv, pv), m.shape).conj()
    if not q:  # the first wires: one GEMM over the rest, straight from the states' 2-D views
        hv, pv = h.reshape(D, -1), before.reshape(D, -1)
        return torch.mm(hv, pv.T).conj()
    hv, pv = h.reshape(1 << q, D, -1), before.reshape(1 << q, D, -1)
    rest = hv.shape[2]
    if rest == 1:  # the last wires, no lead: one GEMM, not 2**q outer products and their sum
        return torch.mm(hv.reshape(1 << q, D).T, pv.reshape(1 << q, D)).conj()
    if rest <= COTANGENT_TRACE_MAX_REST:  # one GEMM over the wires after the block too, then their trace
        full = torch.mm(hv.reshape(1 << q, D * rest).T, pv.reshape(1 << q, D * rest)).view(D, rest, D, rest)
        return torch.diagonal(full, dim1=1, dim2=3).sum(-1).conj()
    chunk = min(max(COTANGENT_CHUNK_ELEMENTS // (D * D), 1), 1 << q)  # powers of two: the chunks tile 2**q
    if chunk == 1 << q:  # one batched product and its sum (a few ops: most states)
        return torch.bmm(hv, pv.transpose(1, 2)).sum(0).conj()
    total, part = None, None
    for a in range(0, 1 << q, chunk):  # [chunk, D, D] products summed chunk by chunk: no state-sized temporary
        part = torch.matmul(hv[a : a + chunk], pv[a : a + chunk].mT, out=part)
        total = part.sum(0) if total is None else total.add_(part.sum(0))
    return total.conj()


__all__ = ["block_cotangent", "COTANGENT_CHUNK_ELEMENTS", "COTANGENT_TRACE_MAX_REST"]

"""The product state a program starts from (one column vector per wire) and its VJP."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

PRODUCT_VJP_SPLIT_BYTES = 16 << 20
"""The product-state VJP reduces over one wire value at a time above this cotangent size (memory), in one
product below it (fewer ops)."""


def product_state(vectors: Sequence[torch.Tensor], S: int, B: int, dtype, device) -> torch.Tensor:
    """The Kronecker product of the wire vectors (first wire most significant), ``[2**n, S, B]``: the two
    halves' products first, then one outer product, so that building it holds one state and two
    ``2**(n/2)`` vectors at most (wire by wire, the last product would hold 1.5 states)."""
    if not vectors:
        return torch.ones(1, 1, 1, dtype=dtype, device=device).expand(1, S, B).contiguous()
    psi = _product(list(vectors))
    if psi.is_conj():  # one wire's vector, a column of an adjoint's matrix (``adjoint(RZ)`` alone): what reads the
        psi = psi.resolve_conj()  # state as real numbers (``zwords``) cannot take a lazy conjugate
    return psi.expand(psi.shape[0], S, B).contiguous() if psi.shape[1:] != (S, B) else psi


def _product(vectors: list) -> torch.Tensor:
    if len(vectors) == 1:
        return vectors[0]
    half = len(vectors) // 2
    left, right = _product(vectors[:half]), _product(vectors[half:])
    lead = (max(left.shape[1], right.shape[1]), max(left.shape[2], right.shape[2]))
    return (left[:, None] * right[None]).reshape(-1, *lead)


def product_vjp(vectors: Sequence[torch.Tensor], h: torch.Tensor, needs) -> list:
    """Cotangents of the product state's wire vectors from ``h``, the conjugated cotangent of the state.

    For psi = v_0 (x) ... (x) v_{n-1}: g_{v_w} = conj(sum over the other wires of h * prod_{u != w} v_u),
    from left-contracted cotangents (wires < w) and right products of the vectors (wires > w): O(n) ops
    and O(2**n) work in all."""
    n = len(vectors)
    if n == 0 or not any(needs):
        return [None] * n
    S, B = h.shape[1], h.shape[2]
    last = max(w for w in range(n) if needs[w])
    right = [None] * n
    r = torch.ones(1, S, B, dtype=h.dtype, device=h.device)
    for w in range(n - 1, -1, -1):
        right[w] = r
        if w and any(needs[:w]):
            v = vectors[w]
            r = (v[:, None] * r[None]).reshape(-1, max(v.shape[1], r.shape[1]), max(v.shape[2], r.shape[2]))
    out = []
    left = h
    for w in range(n):
        a = left.reshape(2, -1, S, B)
        small = a.numel() * a.element_size() <= PRODUCT_VJP_SPLIT_BYTES  # fewest ops; else least memory
        g = None
        if needs[w]:  # on large states one wire value at a time: a temporary half the size of ``left``
            g = (a * right[w]).sum(1) if small else torch.stack([(a[i] * right[w]).sum(0) for i in range(2)])
        out.append(None if g is None else sum_to(g, vectors[w].shape).conj())
        if w == last:
            out.extend([None] * (n - w - 1))
            break
        v = vectors[w]
        if small:
            left = (a * v.unsqueeze(1)).sum(0)
        else:
            left = (a[0] * v[0]).addcmul_(a[1], v[1])  # sum over the wire's two values, no state-sized temporary
    return out


def sum_to(t: torch.Tensor, shape) -> torch.Tensor:
    """``t`` summed over the axes where ``shape`` (same rank) broadcasts."""
    dims = [i for i, (a, b) in enumerate(zip(t.shape, shape)) if b == 1 and a != 1]
    return t.sum(dims, keepdim=True) if dims else t


_KETS: dict = {}


def zero_ket(dtype, device) -> torch.Tensor:
    """|0> as a ``[2, 1, 1]`` column in ``dtype`` on ``device`` (one cached constant per pair)."""
    return basis_ket(0, dtype, device)


def basis_ket(bit: int, dtype, device) -> torch.Tensor:
    """|bit> as a ``[2, 1, 1]`` column in ``dtype`` on ``device`` (one cached constant per triple)."""
    key = (bit, dtype, str(device))
    t = _KETS.get(key)
    if t is None:
        t = _KETS[key] = torch.tensor([1.0 - bit, float(bit)], dtype=dtype, device=device)[:, None, None]
    return t


def basis_bits(values, slots, structure) -> dict:
    """Wire position -> bit of the program's BasisState preparations (``slots``; neither stacked nor
    broadcast, which ``basis_program`` checks). Their data are constants in a chemistry ansatz (the
    Hartree-Fock state): read as numbers, never structure, so a new state on the same wires is honoured."""
    out = {}
    for si in slots:
        slot = structure.slots[si]
        data = values.group[0].params[slot.params[0]]
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu()
        bits = np.asarray(data).reshape(-1)
        for w, b in zip(slot.wires, bits):
            out[w] = int(b)
    return out


def basis_program(structure, stacked, tape) -> bool:
    """Whether every state preparation of ``structure`` is a BasisState the state-vector program starts
    from (one bit per wire, the same for the whole stack and batch); else the state contraction runs."""
    for si, slot in enumerate(structure.slots):
        if slot.kind != "prep":
            continue
        if slot.name != "BasisState" or slot.batched or si in stacked:
            return False
        op = tape.operations[slot.op_index]
        if len(op.data) != 1 or np.size(op.data[0]) != len(slot.wires):
            return False
    return True

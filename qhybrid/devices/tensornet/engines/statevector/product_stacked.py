"""The product state of one stacked tensor of wire vectors, and its VJP, in a few ops.

``product.product_state`` multiplies the wires' vectors in pairs (4 ops a wire) and its VJP walks them left and
right (~12 ops a wire): W1's embedding, 8 batched wires, took 111 ops a step. When a bound program's product
comes from one fused chain covering every wire, its vectors are already one tensor ``V [n, 2, S|1, B|1]``
(wire 0 most significant): each half of the wires is then one gather of ``V``'s entries and one product
(``2**(n/2) x n/2`` entries, small), the state one outer product of the halves, and the VJP the halves'
cotangents (two reductions) spread to their wires by one gather, one product and one batched matmul with a 0/1
table a half. Used below ``STACKED_MAX_BYTES`` of state (its temporaries are state-sized).

>>> import torch
>>> from qhybrid.devices.tensornet.engines.statevector.product import product_state
>>> V = torch.randn(5, 2, 1, 3, dtype=torch.complex128)
>>> bool(torch.allclose(stacked_state(V, 1, 3), product_state(list(V.unbind(0)), 1, 3, V.dtype, "cpu")))
True
"""

from __future__ import annotations

import itertools

import torch

from ...._constants import on_device
from .product import sum_to

STACKED_MAX_BYTES = 16 << 20
"""The stacked product (and its VJP's state-sized temporaries) is used for states up to this size."""

_TABLES: dict = {}


def _tables(a: int):
    """For ``a`` wires: (entries ``[2**a, a]``: wire u's flat entry ``2 u + bit`` in basis state l; others
    ``[2**a, a, a - 1]``: the same without wire w; sums ``[a, 2**a, 2]``: 1 where l has bit c on wire w)."""
    hit = _TABLES.get(a)
    if hit is None:
        L = 1 << a
        entries = torch.empty(L, a, dtype=torch.long)
        sums = torch.zeros(a, L, 2)
        for l, u in itertools.product(range(L), range(a)):
            bit = (l >> (a - 1 - u)) & 1
            entries[l, u] = 2 * u + bit
            sums[u, l, bit] = 1.0
        others = torch.stack([entries[:, [u for u in range(a) if u != w]] for w in range(a)], 1)
        hit = _TABLES[a] = (entries, others, sums)
    return hit


def _pair_tables(a: int):
    """Both halves of ``2a`` wires at once, into ``V`` viewed ``[4a, S|1, B|1]``: (entries ``[2, 2**a, a]``; others
    ``[2, a, 2**a, a - 1]``, wire-major so that the VJP's products are contiguous per wire; sums ``[2a, 2, 2**a]``:
    per wire of either half, 1 where l has bit c on it)."""
    key = ("pair", a)
    hit = _TABLES.get(key)
    if hit is None:
        entries, others, sums = _tables(a)
        others = others.permute(1, 0, 2).contiguous()
        hit = _TABLES[key] = (
            torch.stack([entries, entries + 2 * a]),
            torch.stack([others, others + 2 * a]),
            sums.transpose(1, 2).repeat(2, 1, 1).contiguous(),
        )
    return hit


def _halves(V: torch.Tensor):
    n = V.shape[0]
    a = n // 2
    return V[:a], V[a:]


def _half_state(Vh: torch.Tensor) -> torch.Tensor:
    """``[2**a, S|1, B|1]``: the product of the ``a`` wire vectors ``Vh`` ``[a, 2, S|1, B|1]``."""
    a = Vh.shape[0]
    entries = on_device(_tables(a)[0], Vh.device)
    return Vh.reshape(2 * a, *Vh.shape[2:])[entries].prod(1)


def stacked_state(V: torch.Tensor, S: int, B: int, halves: list | None = None) -> torch.Tensor:
    """``[2**n, S, B]``: the Kronecker product of ``V``'s ``n`` (at least 2) wire vectors (``halves``: a list that
    receives the two halves' products, which ``stacked_vjp`` then need not recompute). With ``n`` even both halves
    are one gather and one product (7 ops in all, 12 as two)."""
    if V.shape[0] % 2 == 0 and V.is_contiguous():
        entries = on_device(_pair_tables(V.shape[0] // 2)[0], V.device)
        H = V.view(2 * V.shape[0], *V.shape[2:])[entries].prod(2)  # [2, 2**a, S|1, B|1]: both halves' products
        left, right = H.unbind(0)
        column = left.unsqueeze(1)
        if halves is not None:
            halves.extend((left, right, column))
        psi = (column * right).view(-1, *broadcast_lead(left, right))
    else:
        left, right = (_half_state(h) for h in _halves(V))
        if halves is not None:
            halves.extend((left, right))
        psi = (left[:, None] * right[None]).reshape(-1, *broadcast_lead(left, right))
    return psi.expand(psi.shape[0], S, B).contiguous() if psi.shape[1:] != (S, B) else psi


def broadcast_lead(left: torch.Tensor, right: torch.Tensor) -> tuple:
    return (max(left.shape[1], right.shape[1]), max(left.shape[2], right.shape[2]))


def _half_vjp(Vh: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The cotangents ``[a, 2, S|1, B|1]`` (unconjugated as ``g``) of the half's wire vectors from ``g``
    ``[2**a, S', B']``, that of the half's product: ``sum over l with bit c on wire w of g[l] * prod_{u != w}``."""
    a = Vh.shape[0]
    _, others, sums = _tables(a)
    others = on_device(others, Vh.device)
    rest = Vh.reshape(2 * a, *Vh.shape[2:])[others].prod(2)  # [2**a, a, S|1, B|1]
    w = g[:, None] * rest  # [2**a, a, S', B']
    lead = w.shape[2:]
    w = w.reshape(1 << a, a, -1).permute(1, 2, 0)  # [a, S'B', 2**a]
    out = torch.bmm(w, on_device(sums, g.device, g.dtype))  # [a, S'B', 2]
    return sum_to(out.permute(0, 2, 1).reshape(a, 2, *lead), Vh.shape)


def stacked_vjp(V: torch.Tensor, h: torch.Tensor, halves: list | None = None) -> torch.Tensor:
    """The cotangent of ``V`` from ``h``, the conjugated cotangent of ``stacked_state(V, S, B)`` (as
    ``product.product_vjp``: ``conj(sum over the other wires of h * their vectors)``)."""
    if V.shape[0] % 2 == 0 and V.is_contiguous():
        return _pair_vjp(V, h, halves)
    Vl, Vr = _halves(V)
    left, right = halves[:2] if halves else (_half_state(Vl), _half_state(Vr))
    hv = h.reshape(left.shape[0], right.shape[0], *h.shape[1:])
    g_left = (hv * right[None]).sum(1)  # [2**a, S, B]
    g_right = (hv * left[:, None]).sum(0)
    return torch.cat([_half_vjp(Vl, g_left), _half_vjp(Vr, g_right)]).conj()


def _pair_vjp(V: torch.Tensor, h: torch.Tensor, halves: list | None) -> torch.Tensor:
    """``stacked_vjp`` for even ``n``: both halves' cotangents in one gather, one product and one batched
    matmul (15 ops, 31 as two halves)."""
    n = V.shape[0]
    a = n // 2
    flat = V.view(2 * n, *V.shape[2:])
    _, others, sums = _pair_tables(a)
    if halves:
        left, right, column = halves
    else:
        left, right = flat[on_device(_pair_tables(a)[0], V.device)].prod(2).unbind(0)
        column = left.unsqueeze(1)
    hv = h.view(left.shape[0], right.shape[0], *h.shape[1:])
    G = torch.stack([(hv * right).sum(1), (hv * column).sum(0)])  # [2, 2**a, S, B]: the halves' cotangents
    rest = flat[on_device(others, V.device)].prod(3)  # [2, a, 2**a, S|1, B|1]: the other wires' products
    w = (G.unsqueeze(1) * rest).view(n, 1 << a, -1)  # [n, 2**a, S B]
    out = torch.bmm(on_device(sums, h.device, h.dtype), w)  # [n, 2, S B]
    return sum_to(out.view(n, 2, *h.shape[1:]), V.shape).conj()


def first_columns(F: torch.Tensor, cache: dict) -> torch.Tensor:
    """``F[..., :, 0]`` of fused matrices ``F`` ``[entries, Bx, 2, 2]`` as the contiguous ``[entries, 2, 1, Bx]`` wire
    vectors of a stacked product: one ``take`` with a table made once per shape and device (``cache``), not four
    ops (select, transpose, unsqueeze, copy)."""
    if not F.is_contiguous():
        return F[..., :, 0].transpose(1, 2).unsqueeze(2).contiguous()
    key = ("first_columns", tuple(F.shape), F.device)
    hit = cache.get(key)
    if hit is None:
        E, Bx = F.shape[:2]
        e, i, b = torch.meshgrid(torch.arange(E), torch.arange(2), torch.arange(Bx), indexing="ij")
        hit = cache[key] = (e * (Bx * 4) + b * 4 + i * 2).unsqueeze(2).to(F.device)
    return torch.take(F, hit)

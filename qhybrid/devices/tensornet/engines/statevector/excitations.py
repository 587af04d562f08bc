"""Two-level gates (fermionic excitations) on the few amplitudes they mix, and their adjoint walk back.

A ``DoubleExcitation`` on 4 of 12 wires is a 16x16 matrix, but it mixes only the amplitudes whose gate wires
read ``0011`` with those reading ``1100`` (2 x 256 of 4,096) and leaves the rest alone (``Plus`` / ``Minus``
and ``FermionicSWAP`` multiply the rest by a phase). As a dense einsum on the scattered wires it cost 0.3 ms
forward and 1.8 ms back (torch autograd over the einsum); here it is two index_selects, a 2x2 combination and
two index_copies, and its walk back is the same kernel with ``m^H`` / ``m^T`` plus four reductions for the
matrix cotangent.

``OrbitalRotation`` (two Givens rotations at once, on 4 wires) mixes more than two local states: its
amplitudes are gathered by local state into ``[16, 2**(n-4)]`` rows of one small matrix product (one
index_select there and one back), walked back the same way, its matrix cotangent one ``[16, 16]`` product.

Cotangents follow ``kernels``: for ``out = U psi``, ``g_U = g_out psi^H``; the walk carries ``h = conj(g)``.
Only the entries of ``U`` that can depend on the angle get a cotangent: the 2x2 block, and the diagonal
outside it for the phased kinds (every other entry is a structural zero).
"""

from __future__ import annotations

import numpy as np
import torch

from ..._excitation_gates import TWO_LEVEL


class TwoLevel:
    """Plan-time tables of one two-level gate on ``wires`` (positions; first is the matrix's most significant
    bit) of an ``n``-wire state: the amplitudes of its two mixed local states, and (phased kinds) every
    amplitude's local state."""

    __slots__ = ("i0", "i1", "dim", "phased", "dense", "_tables", "_memo")

    def __init__(self, name: str, wires, n: int):
        self.dim, self.i0, self.i1 = TWO_LEVEL[name]
        self.phased = not (name in ("SingleExcitation", "DoubleExcitation"))
        self.dense = self.i0 < 0
        k = len(wires)
        x = np.arange(1 << n, dtype=np.int64)
        local = np.zeros_like(x)
        for j, w in enumerate(wires):
            local |= ((x >> (n - 1 - w)) & 1) << (k - 1 - j)
        self._memo: dict = {}
        if self.dense:  # every amplitude, ordered by its local state: [D, 2**(n-k)] rows of one matmul
            order = np.argsort(local, kind="stable")
            self._tables = {"order": torch.as_tensor(order), "inverse": torch.as_tensor(np.argsort(order))}
            return
        self._tables = {
            "a": torch.as_tensor(np.flatnonzero(local == self.i0)),
            "b": torch.as_tensor(np.flatnonzero(local == self.i1)),
            "local": torch.as_tensor(local) if self.phased else None,
            "rows": torch.tensor([self.i0, self.i0, self.i1, self.i1]),
            "cols": torch.tensor([self.i0, self.i1, self.i0, self.i1]),
        }

    def table(self, what: str, device) -> torch.Tensor:
        key = (what, str(device))
        t = self._memo.get(key)
        if t is None:
            t = self._memo[key] = self._tables[what].to(device)
        return t


def two_level(cache: dict, si: int, slot, n: int) -> TwoLevel:
    """The tables of slot ``si`` (an excitation on ``slot.wires``), made once into ``cache``."""
    info = cache.get(si)
    if info is None:
        info = cache[si] = TwoLevel(slot.name, slot.wires, n)
    return info


def _gathered(psi: torch.Tensor, info: TwoLevel) -> torch.Tensor:
    """``psi`` (``[2**n, S, B]``) as ``[D, rest]``: row ``i`` the amplitudes whose gate wires read ``i``."""
    return psi.index_select(0, info.table("order", psi.device)).reshape(info.dim, -1)


def _scattered(local: torch.Tensor, like: torch.Tensor, info: TwoLevel) -> torch.Tensor:
    return local.reshape(like.shape).index_select(0, info.table("inverse", like.device))


def apply(psi: torch.Tensor, m: torch.Tensor, info: TwoLevel) -> torch.Tensor:
    """``m`` (``[D, D]``, two-level, or any where ``info.dense``) on the ``[2**n, S, B]`` state ``psi``."""
    if info.dense:  # OrbitalRotation: one gather, one [D, D] @ [D, rest] product, one gather back
        return _scattered(m.to(psi.dtype) @ _gathered(psi, info), psi, info)
    a_idx, b_idx = info.table("a", psi.device), info.table("b", psi.device)
    a, b = psi.index_select(0, a_idx), psi.index_select(0, b_idx)
    i0, i1 = info.i0, info.i1
    if info.phased:
        out = psi * m.diagonal()[info.table("local", psi.device)][:, None, None]
    else:
        out = psi.clone()
    new_a = m[i0, i0] * a + m[i0, i1] * b
    new_b = m[i1, i0] * a + m[i1, i1] * b
    if torch.is_grad_enabled() and (psi.requires_grad or m.requires_grad):  # recorded by autograd (higher derivatives): out of place
        return out.index_copy(0, a_idx, new_a).index_copy(0, b_idx, new_b)
    out.index_copy_(0, a_idx, new_a)
    out.index_copy_(0, b_idx, new_b)
    return out


def unapply(psi, h, m: torch.Tensor, info: TwoLevel, needs, keep_state: bool):
    """Walk the gate back: (state before, conj cotangent before, [cotangent of ``m``])."""
    before = apply(psi, m.mH.resolve_conj(), info) if keep_state else psi
    h_new = apply(h, m.mT.contiguous(), info)
    g_m = None
    if needs[0] and info.dense:  # g_m[i, j] = conj(sum h[i] before[j]) over the gathered rows
        g_m = (_gathered(h, info) @ _gathered(before, info).t()).conj()
    elif needs[0]:
        dev = psi.device
        a_idx, b_idx = info.table("a", dev), info.table("b", dev)
        ga, gb = h.index_select(0, a_idx), h.index_select(0, b_idx)  # conj of the cotangent after
        pa, pb = before.index_select(0, a_idx), before.index_select(0, b_idx)
        # g_m[i, j] = sum g_out[i] conj(before[j]) = conj(sum h[i] before[j])
        block = torch.stack([(ga * pa).sum(), (ga * pb).sum(), (gb * pa).sum(), (gb * pb).sum()]).conj()
        if info.phased:
            per = (h * before).sum((1, 2)).conj()
            diag = torch.zeros(info.dim, dtype=per.dtype, device=dev).index_add(0, info.table("local", dev), per)
            g_m = torch.diag_embed(diag)
        else:
            g_m = torch.zeros(info.dim, info.dim, dtype=psi.dtype, device=dev)
        g_m = g_m.index_put((info.table("rows", dev), info.table("cols", dev)), block)
    return before, h_new, [g_m]

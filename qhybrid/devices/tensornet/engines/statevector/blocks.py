"""Gate blocks of the state-vector program: parameter-free monomial gates as basis permutations (found at
plan time) and the Kronecker products of pending single-qubit gates (built together, per block size)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def _monomial(matrix: np.ndarray):
    """(column of the non-zero in each row, its value) if ``matrix`` is monomial, else None."""
    nz = matrix != 0
    if not np.all(nz.sum(1) == 1) or not np.all(nz.sum(0) == 1):
        return None
    cols = nz.argmax(1)
    return cols, matrix[np.arange(len(cols)), cols]


def _full_monomial(n: int, wires: Sequence[int], cols: np.ndarray, vals: np.ndarray):
    """The gate on ``wires`` as a basis permutation of all 2**n states (wire 0 most significant)."""
    x = np.arange(1 << n, dtype=np.int64)
    shifts = [n - 1 - w for w in wires]
    local = np.zeros_like(x)
    for s in shifts:
        local = (local << 1) | ((x >> s) & 1)
    src_local = cols[local]
    cleared = x.copy()
    for s in shifts:
        cleared &= ~(1 << s)
    src = cleared
    k = len(wires)
    for j, s in enumerate(shifts):
        src = src | (((src_local >> (k - 1 - j)) & 1) << s)
    return src, vals[local]


class _Kron:
    """A Kronecker block waiting to be built together with the other blocks of its size."""

    __slots__ = ("members",)

    def __init__(self, members):
        self.members = members


def _build_krons(tensors: list) -> None:
    """Replace every ``_Kron`` in ``tensors`` by its product: blocks of one size and dtype are built by
    k - 1 broadcast products over all of them at once (a handful of autograd nodes, not ~4 per kron)."""
    groups: dict[tuple, list[int]] = {}
    for i, t in enumerate(tensors):
        if isinstance(t, _Kron):
            m = t.members[0]
            groups.setdefault((len(t.members), m.dtype, m.device), []).append(i)
    for (k, _, _), where in groups.items():
        stacked = torch.stack([m for i in where for m in tensors[i].members]).reshape(len(where), k, 2, 2)
        for i, block in zip(where, kron(stacked).unbind(0)):
            tensors[i] = block


def kron(members: torch.Tensor) -> torch.Tensor:
    """``[blocks, k, 2, 2]`` -> ``[blocks, 2**k, 2**k]`` Kronecker products (member 0 most significant)."""
    nb, k = members.shape[:2]
    K = members[:, 0]
    for j in range(1, k):
        d = 1 << j
        K = (K[:, :, None, :, None] * members[:, j, None, :, None, :]).reshape(nb, 2 * d, 2 * d)
    return K


def kron_vjp(members: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Cotangents ``[blocks, k, 2, 2]`` of the factors from ``g``, that of ``kron(members)``:
    ``g_A_j = sum over the other factors' indices of g * conj(kron of the other factors)``.

    Halving, not one contraction per factor: ``g`` contracted with the conjugated Kronecker product of the
    second half of the factors is the first half's ``g`` (and the other way round), recursively, so a block
    of 4 takes 6 two-operand contractions and 2 small products instead of 4 Kronecker products of 3 factors
    and 4 contractions (W1: 12 ops where there were 48)."""
    nb, k = members.shape[:2]
    conj = members.conj().resolve_conj()
    return torch.stack(_halves(g, conj), 1)


def _halves(g: torch.Tensor, conj: torch.Tensor) -> list:
    """The factor cotangents ``[blocks, 2, 2]`` of ``g`` ``[blocks, 2**k, 2**k]`` against the conjugated
    factors ``conj`` ``[blocks, k, 2, 2]`` (see ``kron_vjp``)."""
    nb, k = conj.shape[:2]
    if k == 1:
        return [g]
    h = k // 2
    left, right = 1 << h, 1 << (k - h)
    gk = g.reshape(nb, left, right, left, right)
    g_left = torch.einsum("zlrms,zrs->zlm", gk, kron(conj[:, h:]))
    g_right = torch.einsum("zlrms,zlm->zrs", gk, kron(conj[:, :h]))
    return _halves(g_left, conj[:, :h]) + _halves(g_right, conj[:, h:])

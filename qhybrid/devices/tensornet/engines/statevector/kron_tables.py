"""Kronecker blocks of 2 x 2 factors and their factor cotangents in a few ops, from index tables made once per
block size: a ``k``-factor block is one gather of its factors' entries and one product (``blocks.kron``
takes ``k - 1`` broadcast products of 7 ops each), and its VJP one gather, one product, one batched matmul
with a 0/1 table (``blocks.kron_vjp``'s halving takes ~30 ops a block size). For the bound program, whose
blocks are built and walked back outside autograd; the tables are a few KiB (``4**k x k`` entries, k <= 4).

>>> import torch
>>> from qhybrid.devices.tensornet.engines.statevector.blocks import kron
>>> m = torch.randn(3, 3, 2, 2, dtype=torch.complex128)
>>> bool(torch.allclose(kron_gather(m), kron(m)))
True
"""

from __future__ import annotations

import itertools

import torch

from ...._constants import on_device

_TABLES: dict = {}


def _tables(k: int):
    """(entries ``[4**k, k]``: factor i's flat entry for each (row, column) of the block; others
    ``[4**k, k, k-1]``: the same without factor j; sums ``[k, 4**k, 4]``: 1 where the block entry has factor
    j at that entry), on the host."""
    hit = _TABLES.get(k)
    if hit is None:
        D = 1 << k
        entries = torch.empty(D * D, k, dtype=torch.long)
        sums = torch.zeros(k, D * D, 4)
        for x, y in itertools.product(range(D), range(D)):
            for i in range(k):
                e = ((x >> (k - 1 - i)) & 1) * 2 + ((y >> (k - 1 - i)) & 1)
                entries[x * D + y, i] = 4 * i + e
                sums[i, x * D + y, e] = 1.0
        others = torch.stack([entries[:, [i for i in range(k) if i != j]] for j in range(k)], 1)
        hit = _TABLES[k] = (entries, others, sums)
    return hit


def kron_gather(members: torch.Tensor) -> torch.Tensor:
    """``[blocks, k, 2, 2]`` -> ``[blocks, 2**k, 2**k]`` (member 0 most significant), as ``blocks.kron``."""
    nb, k = members.shape[:2]
    entries = on_device(_tables(k)[0], members.device)
    return members.reshape(nb, 4 * k)[:, entries].prod(-1).view(nb, 1 << k, 1 << k)


def kron_gather_vjp(members: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Cotangents ``[blocks, k, 2, 2]`` of the factors from ``g`` ``[blocks, 2**k, 2**k]``, that of the block:
    ``g_j[a, b] = sum over the block entries with factor j at (a, b) of g * conj(the other factors)``."""
    nb, k = members.shape[:2]
    if k == 1:
        return g.reshape(nb, 1, 2, 2)
    _, others, sums = _tables(k)
    others = on_device(others, members.device)
    sums = on_device(sums, g.device, g.dtype)
    rest = members.reshape(nb, 4 * k)[:, others].prod(-1)  # [blocks, 4**k, k]: the other factors' product
    w = (g.reshape(nb, -1, 1) * rest.conj()).permute(2, 0, 1)  # [k, blocks, 4**k]
    return torch.bmm(w, sums).permute(1, 0, 2).reshape(nb, k, 2, 2)



def mm2(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for broadcasting stacks of 2 x 2 matrices in one product and one sum (``torch.matmul``'s
    broadcasting expands, copies and reshapes: ~8 ops).

    >>> a, b = torch.randn(3, 1, 2, 2), torch.randn(3, 4, 2, 2)
    >>> bool(torch.allclose(mm2(a, b), a @ b))
    True
    """
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)  # [..., i, j, k] summed over j


_BLOCK_SUMS: dict = {}


def _block_sums(k: int):
    """(others ``[k, 4**k, k-1]``: ``_tables``' others, factor-major; sums ``[k 4**k, 4 k]``: ``_tables``' sums
    as one block-diagonal matrix, so that every factor's sum is one GEMM)."""
    hit = _BLOCK_SUMS.get(k)
    if hit is None:
        _, others, sums = _tables(k)
        hit = _BLOCK_SUMS[k] = (others.permute(1, 0, 2).contiguous(), torch.block_diag(*sums.unbind(0)))
    return hit


def kron_gather_vjp_conj(members: torch.Tensor, gc: torch.Tensor) -> torch.Tensor:
    """``kron_gather_vjp(members, conj(gc))`` ``[blocks, k, 2, 2]`` (contiguous) from ``gc``, the blocks'
    cotangents conjugated: ``conj(g_j) = sum gc * (the other factors)``, one GEMM with a block-diagonal 0/1
    table for every factor, one conj (10 ops; 11 and a copy from ``g``)."""
    nb, k = members.shape[:2]
    if k == 1:
        return gc.reshape(nb, 1, 2, 2).conj()
    others, sums = _block_sums(k)
    rest = members.reshape(nb, 4 * k)[:, on_device(others, members.device)].prod(-1)  # [blocks, k, 4**k]
    w = (gc.view(nb, 1, -1) * rest).view(nb, -1)  # [blocks, k 4**k]
    return torch.mm(w, on_device(sums, gc.device, gc.dtype)).view(nb, k, 2, 2).conj()

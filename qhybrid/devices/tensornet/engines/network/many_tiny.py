"""A wave's tiniest step groups as elementwise products summed into their results (``many_waves.py``).

Batched by waves, a wave's steps still make one ``bmm`` per distinct ``(m, k, n)`` shape, and on a deep
QAOA most shapes hold a few matrices: Q100 p=3's 31 waves hold 1340 shapes, 795 of them with at most 1024
multiply-adds in all, each a ``bmm`` call and its views (~5-10 us) forward and two backward for
nanoseconds of arithmetic. Here the groups of at most ``TINY_PRODUCTS`` products are written out as their
products, one pair of positions each: ``C[o] = sum_l A[pa(o, l)] B[pb(o, l)]``, each product's result
``o`` in a table (``seg``). A wave runs ALL its tiny groups, whatever their shapes and summed extents, as
one gather per side, one product and one ``scatter_add`` into the results; the backward (conjugated
cotangents ``h``, as in ``many.py``) is ``h_A[pa] += h_C[o] B[pb]``: one gather of ``h_C`` by ``seg``, a
product a side, one ``scatter_add`` (Q100 p=3: ~1,100 ops a step were tiny parts, one per summed extent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

TINY_PRODUCTS = 2048
"""A wave's group of one shape whose multiply-adds (matrices x m x k x n) are at most this many runs as
elementwise products instead of a ``bmm`` (about 1-3 ns a product here against ~5-10 us a call with its
views, one thread). Q100 p=3 steps (medians of 7, load 2): 0.15 / 0.23 s all ``bmm``, 0.14-0.20 s at 1024,
0.14 s at 2048, 0.24-0.26 s at 4096; Q100 p=4 the same within noise."""


@dataclass(frozen=True)
class Tiny:
    """The tiny groups of one wave: ``index_a``/``index_b`` the buffer positions of each product's factors,
    ``seg`` its result's (relative to ``out[0]``; results at ``out`` in the buffer)."""

    out: tuple[int, int]
    index_a: torch.Tensor
    index_b: torch.Tensor
    seg: torch.Tensor
    a_need: tuple[int, int]  # the spans of products whose left / right factor needs a cotangent
    b_need: tuple[int, int]


def products(pos_a: np.ndarray, pos_b: np.ndarray, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The factor positions of ``[rows, m, k] x [rows, k, n]``'s products, ordered ``[rows, m, n, k]``."""
    rows = pos_a.size // (m * k)
    a = np.broadcast_to(pos_a.reshape(rows, m, 1, k), (rows, m, n, k))
    b = np.broadcast_to(pos_b.reshape(rows, k, n).transpose(0, 2, 1).reshape(rows, 1, n, k), (rows, m, n, k))
    return a.reshape(-1), b.reshape(-1)


def tiny_forward(part: Tiny, ta: torch.Tensor, tb: torch.Tensor, seg: torch.Tensor, buffer: torch.Tensor) -> None:
    a = buffer.index_select(0, ta)
    a.mul_(buffer.index_select(0, tb))
    out = buffer[part.out[0] : part.out[1]]
    out.zero_()
    out.scatter_add_(0, seg, a)


def tiny_backward(part: Tiny, ta: torch.Tensor, tb: torch.Tensor, seg: torch.Tensor, buffer: torch.Tensor, cot: torch.Tensor) -> None:
    """Conjugated cotangents of the part's factors added into ``cot``: ``h_A[pa] += h_C[o] B[pb]``."""
    hc = cot[part.out[0] : part.out[1]]
    (a0, a1), (b0, b1) = part.a_need, part.b_need
    if a1 > a0:
        cot.scatter_add_(0, ta[a0:a1], hc.index_select(0, seg[a0:a1]) * buffer.index_select(0, tb[a0:a1]))
    if b1 > b0:
        cot.scatter_add_(0, tb[b0:b1], hc.index_select(0, seg[b0:b1]) * buffer.index_select(0, ta[b0:b1]))


def tiny_recorded(part: Tiny, ta: torch.Tensor, tb: torch.Tensor, seg: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """The part's results with autograd recording."""
    zeros = buffer.new_zeros(part.out[1] - part.out[0])
    return zeros.index_add(0, seg, buffer[ta] * buffer[tb])


__all__ = ["Tiny", "TINY_PRODUCTS", "products", "tiny_forward", "tiny_backward", "tiny_recorded"]

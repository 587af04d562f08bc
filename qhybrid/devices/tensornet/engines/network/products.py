"""The batched matrix products of the many-network passes: ``bmm``, or an elementwise product where the summed
extent is one.

A step whose operands share no summed index (``k = 1``: every matrix an outer product, as where a lattice QAOA's
cones meet) was a ``bmm`` of ``[rows, m, 1] x [rows, 1, n]``; torch's CPU ``bmm`` pays per matrix for such tiny
products (complex128, one thread, 2^19 results: ~4.2 ms for m x n of 2 x 8 to 4 x 16, at any batch), where the
broadcast product costs 0.3-1.6 ms from ``m * n = 8`` on (1.6-9x less) and more below it (2 x 2: 0.9x). The
backward's products are outer products where the forward's ``m`` or ``n`` is one.

>>> import torch
>>> a, b = torch.rand(5, 4, 1, dtype=torch.complex128), torch.rand(5, 1, 3, dtype=torch.complex128)
>>> bool(torch.allclose(product(a, b), torch.bmm(a, b), rtol=0, atol=1e-15))  # (the same up to rounding)
True
"""

from __future__ import annotations

import torch

OUTER_MIN_ELEMENTS = 8
"""Result elements a matrix (``m * n``) from which a ``k = 1`` product is a broadcast ``mul`` (measured above)."""


def is_outer(m: int, k: int, n: int) -> bool:
    """Whether ``[rows, m, k] x [rows, k, n]`` runs as a broadcast product."""
    return k == 1 and m * n >= OUTER_MIN_ELEMENTS


def kernel(m: int, k: int, n: int):
    """The op for ``[rows, m, k] x [rows, k, n]``: ``torch.mul`` where ``is_outer``, else ``torch.bmm`` (arenas
    choose it once and keep it beside their views)."""
    return torch.mul if is_outer(m, k, n) else torch.bmm


def product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.bmm(a, b, out=out)`` by the op ``kernel`` picks for its shape (the same values)."""
    op = kernel(a.shape[-2], a.shape[-1], b.shape[-1])
    return op(a, b) if out is None else op(a, b, out=out)


__all__ = ["product", "kernel", "is_outer", "OUTER_MIN_ELEMENTS"]

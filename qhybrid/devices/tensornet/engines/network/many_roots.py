"""Where a ``ManyTrees``' networks leave their results, read out (and their cotangents put back) in a few ops.

Each network's result lies in the small buffer (``("small", positions)``) or in a held large result
(``("held", slot, shape, permutation)``). Read one by one, a step of 150 networks cost an indexing op per
network forward and a slice and an ``index_add_`` per network backward (Q100 p=3: ~375 ops of a step). Here the
small ones are read with ONE gather of all their positions, the held ones after them, and one more gather puts
the lot in the networks' order; the backward undoes it with one gather and one ``index_add_``.

>>> import torch
>>> layout = RootLayout([("small", torch.tensor([2])), ("small", torch.tensor([0, 1]))], "cpu")
>>> layout.outputs(torch.tensor([5.0, 6.0, 7.0]), [])
tensor([7., 5., 6.])
"""

from __future__ import annotations

import math

import numpy as np
import torch


class RootLayout:
    """The roots of one schedule on one device (``roots``: ``ManyTrees``' per network, device tables)."""

    def __init__(self, roots: list, device):
        small = [r[1] for r in roots if r[0] == "small"]
        self.small = torch.cat(small) if small else None
        self.held = [r[1:] for r in roots if r[0] == "held"]  # (slot, shape, perm), in the networks' order
        self.count = (len(self.small) if small else 0) + sum(math.prod(h[1]) for h in self.held)
        stacked, at_small, at_held = [], 0, len(self.small) if small else 0
        for r in roots:  # each network's elements' places in [small roots..., held roots...]
            n = len(r[1]) if r[0] == "small" else math.prod(r[2])
            if r[0] == "small":
                stacked.append(np.arange(at_small, at_small + n))
                at_small += n
            else:
                stacked.append(np.arange(at_held, at_held + n))
                at_held += n
        order = np.concatenate(stacked) if stacked else np.zeros(0, dtype=np.int64)
        identity = bool(np.array_equal(order, np.arange(len(order))))
        self.order = None if identity else torch.from_numpy(order).to(device)
        self.inverse = None if identity else torch.from_numpy(np.argsort(order)).to(device)

    def outputs(self, small: torch.Tensor, held: list) -> torch.Tensor:
        """Every network's result, flattened in its output order and concatenated."""
        parts = [small.index_select(0, self.small)] if self.small is not None else []
        for slot, shape, perm in self.held:
            parts.append(held[slot].view(shape).permute(perm).reshape(-1))
        out = parts[0] if len(parts) == 1 else torch.cat(parts)
        return out if self.order is None else out.index_select(0, self.order)

    def backward(self, grad: torch.Tensor, cot: torch.Tensor, cot_held: list) -> None:
        """The roots' cotangents ``grad`` (in ``outputs``' layout) into ``cot`` and ``cot_held``."""
        if self.inverse is not None:
            grad = grad.index_select(0, self.inverse)
        at = 0
        if self.small is not None:
            n = len(self.small)
            cot.index_add_(0, self.small, grad if n == len(grad) else grad[:n])
            at = n
        for slot, shape, perm in self.held:
            count = math.prod(shape)
            inverse = tuple(int(p) for p in np.argsort(perm))
            g = grad[at : at + count].reshape([shape[p] for p in perm]).permute(inverse).reshape(-1)
            cot_held[slot] = g if cot_held[slot] is None else cot_held[slot] + g
            at += count


__all__ = ["RootLayout"]

"""A bound program's inputs as one flat real vector: every gate kind's angles in one gather, every cotangent in
one scatter.

A plain qnode hands the device one scalar input per gate (``2 * gamma[l]`` is a new tensor per gate): read
input by input, each kind of gate was built once per input (G16: 32 ``RX`` builds) and each input's
cotangent was its own ``zeros`` + ``index_add``. Here the step concatenates the inputs once (one ``stack`` of
scalars, or one ``cat``), reads each gate group's angle columns ``[k, gates, *shape]`` and each diagonal
run's ``[gates, 1, B|1]`` with one ``index`` from index tables made once per input layout and device, and
returns the cotangents by one accumulating ``index_put_`` per group or run into one flat vector, split into
the inputs by one ``unbind`` (scalars) or a view each. Where every group and run reads one input alone (W1: the
embedding from ``x``, the layers from ``w``), each is one ``take`` from its input and its cotangent one
accumulating ``put_`` into that input's: no concatenation and no split.

>>> import torch
>>> lay = Layout((torch.zeros(()), torch.zeros(()), torch.zeros(2, 2)))
>>> lay.offsets, lay.total
((0, 1, 2), 6)
"""

from __future__ import annotations

import torch


class Layout:
    """Offsets of the inputs in the flat vector (in input order), from their shapes."""

    def __init__(self, inputs):
        self.shapes = tuple(tuple(x.shape) for x in inputs)
        sizes = [x.numel() for x in inputs]
        offsets, at = [], 0
        for s in sizes:
            offsets.append(at)
            at += s
        self.offsets, self.sizes, self.total = tuple(offsets), tuple(sizes), at
        self.scalars = all(not s for s in self.shapes)
        self._tables: dict = {}

    @staticmethod
    def key(inputs) -> tuple:
        return tuple(tuple(x.shape) for x in inputs)

    def flat(self, inputs, real: torch.dtype) -> torch.Tensor:
        """``[total]`` the inputs' values, one after the other, as ``real`` (one op, two with a dtype change)."""
        if len(inputs) == 1:
            out = inputs[0].reshape(-1)
        elif self.scalars:
            out = torch.stack(inputs)
        else:
            out = torch.cat([x.reshape(-1) for x in inputs])
        return out if out.dtype == real else out.to(real)

    def table(self, key, parts, device) -> torch.Tensor:
        """An index table into the flat vector, made once per key and device: ``parts`` is a nested list
        (rows of rows ...) whose leaves are ``(input, flat indices into that input)`` of one shape each."""
        hit = self._tables.get((key, device))
        if hit is None:
            hit = self._tables[(key, device)] = self._stack(parts).to(device)
        return hit

    def gather(self, inputs, flat, key, parts, sources, device, real) -> torch.Tensor:
        """The values ``table`` picks: from ``flat`` (``flat``'s result) where given, else from the one input
        ``sources`` names, by one ``take``."""
        if flat is not None:
            return flat[self.table(key, parts, device)]
        (src,) = sources
        out = torch.take(inputs[src], self.local(key, parts, device))
        return out if out.dtype == real else out.to(real)

    def local(self, key, parts, device) -> torch.Tensor:
        """``table`` without the offsets: flat indices into the one input every leaf of ``parts`` reads."""
        hit = self._tables.get((key, "local", device))
        if hit is None:
            hit = self._tables[(key, "local", device)] = self._stack(parts, local=True).to(device)
        return hit

    def _stack(self, parts, local: bool = False) -> torch.Tensor:
        if isinstance(parts, tuple):
            src, index = parts
            return index.clone() if local else self.offsets[src] + index
        return torch.stack([self._stack(p, local) for p in parts])

    def split(self, flat: torch.Tensor, inputs, needs) -> list:
        """The inputs' cotangents from that of the flat vector (None where not needed)."""
        if self.scalars:
            parts = flat.unbind(0)
        elif len(inputs) == 1:
            parts = [flat.view(self.shapes[0])]
        else:
            parts = [flat[o : o + s].view(sh) if nd else None
                     for o, s, sh, nd in zip(self.offsets, self.sizes, self.shapes, needs)]
        return [None if not nd else (p if p.dtype == x.dtype else p.to(x.dtype)) for p, x, nd in zip(parts, inputs, needs)]

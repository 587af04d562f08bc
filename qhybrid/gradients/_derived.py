"""Scalar sources derived from a few leaves by indexing and constant scaling, differentiated at those leaves.

A circuit written as PennyLane users write it (``qml.IsingZZ(2 * gamma[l], ...)`` per edge) hands the device
one scalar per gate, each made from ``gamma`` by a select and a product with a constant: 750 sources at
Q100 p=3. The circuit's node differentiates them (``_packed``), and autograd then walked each one's history
back to ``gamma``: a product, a select's backward and an addition into ``gamma``'s gradient apiece (2,250 ops
a step, more than the light cones' own backward). Where every source's history is such a chain (selects and
views of a leaf, products or quotients by a constant, negation, a constant added), the circuit's node takes
the leaves themselves as its inputs and hands them their gradients in one ``index_add``:
``d gamma[i] = sum over the sources k read from gamma[i] of a_k * d s_k``. The values still come from the
sources (bit for bit what the user computed); only the backward's route changes, and it stays
differentiable (a ``create_graph`` backward folds the sources' differentiable gradients the same way).

>>> import torch
>>> g = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True)
>>> sources = [2 * g[k % 2] for k in range(8)]
>>> f = fold(sources)
>>> [tuple(r.shape) for r in f.roots], f.grads(torch.ones(8, dtype=torch.float64))[0]
([(2,)], tensor([8., 8.], dtype=torch.float64))
"""

from __future__ import annotations

import ctypes
import math
from collections import OrderedDict

import torch

FOLD_MIN_SOURCES = 8
"""Sources are folded from this many on (a few chains cost less than walking them)."""

_TABLES: "OrderedDict[tuple, tuple]" = OrderedDict()
"""(root layout, each source's flat position and scale, device, dtype) -> the index and scale tensors: made
once, not from Python lists every step (that would be host data in a steady step)."""
_TABLES_SIZE = 32


class Fold:
    """Where each source's gradient goes: ``roots`` (the leaves, in order of first use), and per source a
    flat position in the roots laid end to end and a scale (its chain's constants, read when folded)."""

    def __init__(self, roots, key):
        self.roots, self._key = roots, key

    def _tables(self, device, dtype):
        key = (self._key, device, dtype)
        found = _TABLES.get(key)
        if found is None:
            shapes, flat, scales = self._key
            index = torch.tensor(flat, dtype=torch.long, device=device)
            scale = None if all(s == 1.0 for s in scales) else torch.tensor(scales, dtype=dtype, device=device)
            found = _TABLES[key] = (index, scale)
            if len(_TABLES) > _TABLES_SIZE:
                _TABLES.popitem(last=False)
        else:
            _TABLES.move_to_end(key)
        return found

    def grads(self, g) -> list:
        """The roots' gradients from the sources' (``g``: one tensor ``[sources]`` or a list of scalars)."""
        packed = getattr(g, "packed", None)
        if packed is None:
            packed = g if isinstance(g, torch.Tensor) else torch.stack(list(g))
        index, scale = self._tables(packed.device, packed.dtype)
        if scale is not None:
            packed = packed * scale
        total = sum(r.numel() for r in self.roots)
        flat = packed.new_zeros(total).index_add(0, index, packed)
        if len(self.roots) == 1:
            return [flat.view(self.roots[0].shape)]
        return [part.view(r.shape) for part, r in zip(flat.split([r.numel() for r in self.roots]), self.roots)]


_IDENTITY = {"CloneBackward0", "AliasBackward0"}


def _chain(s: torch.Tensor, seen: set | None = None):
    """``(root, flat index in root, scale)`` of a scalar source whose history is a chain of supported steps
    down to one leaf (``d s = scale * d root[index]``), else None. ``seen``: the steps of the chains walked
    before; a step two sources share is a tensor the caller may differentiate by itself (``autograd.grad``
    with respect to ``gamma * 1``, or the views ``torch.autograd.functional`` makes of its inputs), which a
    fold would route around: not folded."""
    if s.dim() != 0 or s.retains_grad or s._backward_hooks:
        return None
    node = s.grad_fn
    if node is None:
        return (s, 0, 1.0) if s.requires_grad else None
    flat, shape, scale = 0, (), 1.0
    while True:
        name = type(node).__name__
        if name != "AccumulateGrad" and seen is not None:
            if node in seen:
                return None
            seen.add(node)
        if name == "AccumulateGrad":
            root = node.variable
            return (root, flat, scale) if tuple(root.shape) == shape else None
        nexts = node.next_functions
        if len(nexts) == 1:
            k, child = 0, nexts[0][0]
        elif len(nexts) == 2 and (nexts[0][0] is None) != (nexts[1][0] is None):
            k = 0 if nexts[0][0] is not None else 1
            child = nexts[k][0]
        else:
            return None
        if child is None:
            return None
        if name == "SelectBackward0":
            sizes = tuple(node._saved_self_sym_sizes)
            dim, index = node._saved_dim, node._saved_index
            if index >= 2**63:  # a negative index, read back unsigned
                index -= 2**64
            if len(sizes) == 1 and not shape and type(sizes[0]) is int:  # a vector's entry (the usual case)
                flat, shape = index % sizes[0], sizes
                node = child
                continue
            if not all(isinstance(n, int) for n in sizes):
                return None
            dim %= len(sizes)
            if sizes[:dim] + sizes[dim + 1 :] != shape:  # a broadcast on the way: not a plain chain
                return None
            index %= sizes[dim]
            outer = _unravel(flat, shape)
            flat, shape = _ravel(outer[:dim] + (index,) + outer[dim:], sizes), sizes
        elif name == "ViewBackward0" or name == "UnsqueezeBackward0" or name.startswith("SqueezeBackward"):
            sizes = getattr(node, "_saved_self_sym_sizes", None)
            if sizes is None or not all(isinstance(n, int) for n in sizes):
                return None
            if math.prod(sizes) != math.prod(shape):
                return None
            shape = tuple(sizes)  # a view keeps the row-major order of the elements: the flat index too
        elif name in ("MulBackward0", "DivBackward0"):
            other = node._saved_other if k == 0 else node._saved_self
            if other is None or other.dim() != 0 or other.requires_grad or (name == "DivBackward0" and k != 0):
                return None
            value = _host_scalar(other)
            if value is None or (value == 0 and name == "DivBackward0"):
                return None
            scale = scale / value if name == "DivBackward0" else scale * value
        elif name == "NegBackward0":
            scale = -scale
        elif name == "AddBackward0" or name == "SubBackward0":
            alpha = node._saved_alpha if k == 1 else 1
            if not isinstance(alpha, (int, float)):
                return None
            scale = scale * (-alpha if name == "SubBackward0" and k == 1 else alpha)
        elif name == "RsubBackward1":
            alpha = node._saved_alpha
            if not isinstance(alpha, (int, float)):
                return None
            scale = -scale * alpha
        elif name not in _IDENTITY:
            return None
        node = child


def _unravel(flat: int, shape: tuple) -> tuple:
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return tuple(reversed(out))


def _ravel(index: tuple, shape: tuple) -> int:
    flat = 0
    for i, n in zip(index, shape):
        flat = flat * n + i
    return flat


_C_TYPES = {torch.float64: ctypes.c_double, torch.float32: ctypes.c_float, torch.int64: ctypes.c_int64}


def _host_scalar(t: torch.Tensor) -> float | None:
    """The value of a 0-dim CPU constant (what ``2 * x`` saved for its backward: the number 2, wrapped),
    read from its memory: no torch op (a Python dispatch mode sees a wrapped number as a plain number and
    cannot hand it to one, and ``float(t)`` would be a host read in the step's op list). None elsewhere."""
    kind = _C_TYPES.get(t.dtype)
    if kind is None or not t.is_cpu:
        return None
    return float(kind.from_address(t.data_ptr()).value)


def fold(sources) -> Fold | None:
    """The ``Fold`` of ``sources`` (real scalars, each a supported chain from a leaf, fewer leaves than
    sources), else None: the sources stay the node's inputs."""
    if len(sources) < FOLD_MIN_SOURCES:
        return None
    roots, where, offsets, flat, scales, seen = [], {}, [], [], [], set()
    for s in sources:
        found = _chain(s, seen)
        if found is None:
            return None
        root, at, scale = found
        r = where.get(id(root))
        if r is None:
            if root.dtype != s.dtype or root.is_complex():
                return None
            r = where[id(root)] = len(roots)
            offsets.append(offsets[-1] + roots[-1].numel() if roots else 0)
            roots.append(root)
        flat.append(offsets[r] + at)
        scales.append(float(scale))
    if len(roots) >= len(sources):
        return None
    key = (tuple(tuple(r.shape) for r in roots), tuple(flat), tuple(scales))
    return Fold(roots, key)


__all__ = ["Fold", "fold", "FOLD_MIN_SOURCES"]

"""Many scalar sources differentiated as one packed leaf (``AdjointTN``'s forward and backward).

A circuit written as PennyLane users write it (``qml.IsingZZ(2 * gamma[l], ...)`` per edge) hands the
device one scalar tensor per gate: 750 sources for a 100-node QAOA at p=3. Differentiated one leaf each,
every source costs a detach, an indexing op and an unbind in the forward and their autograd nodes in the
backward, and each gate kind's parameter column is stacked from hundreds of scalars (the gathered-column
path needs one input per column). Packed, the sources are one flat leaf: each gate kind's column is one
indexing op into it, the backward one ``IndexBackward``, and the gradient is split back into the sources'
shapes once (the same sums in another order).

>>> import torch, pennylane as qml
>>> from qhybrid._variant import Gather, Variant
>>> xs = [torch.tensor(0.1 * k, dtype=torch.float64) for k in range(8)]
>>> tape = qml.tape.QuantumScript([qml.RX(x, 0) for x in xs])
>>> v = Variant(tape, None, Gather(tuple(xs), tuple((k, torch.tensor(0)) for k in range(8))))
>>> leaf, (w,), unpack = pack([v], xs)
>>> leaf.shape, w.gather.maps[3], float(w.params[3])
(torch.Size([8]), (0, tensor(3)), 0.30000000000000004)
>>> pack([v], xs[:2]) is None  # fewer than PACK_MIN_SOURCES
True
"""

from __future__ import annotations

import torch

from .._variant import Gather, Variant

PACK_MIN_SOURCES = 8
"""Sources are packed from this many on (a few leaves cost less than the packing's own ops)."""


def pack(variants, sources: list) -> tuple | None:
    """``(leaf, variants gathering from it, unpack)`` where ``sources`` (the distinct gather inputs that need a
    gradient) are real tensors of one dtype and device; ``unpack(grad of leaf)`` gives each source's
    gradient. None where they are not packed."""
    if len(sources) < PACK_MIN_SOURCES:
        return None
    first = sources[0]
    if not first.dtype.is_floating_point or any(s.dtype != first.dtype or s.device != first.device for s in sources):
        return None
    sizes = [s.numel() for s in sources]
    shapes = [tuple(s.shape) for s in sources]
    scalars = all(not sh for sh in shapes)
    with torch.no_grad():  # one op for the copy (a detach per source was one more op each: 750 at Q100 p=3)
        leaf = torch.stack(sources) if scalars else torch.cat([s.reshape(-1) for s in sources])
    leaf.requires_grad_(True)
    where = {id(s): k for k, s in enumerate(sources)}
    offsets = [0]
    for n in sizes[:-1]:
        offsets.append(offsets[-1] + n)
    packed = [_packed_variant(v, leaf, where, offsets) for v in variants]

    def unpack(g: torch.Tensor) -> list:
        if scalars:
            return Unpacked(g.unbind(0), g)
        return [part.view(sh) for part, sh in zip(g.split(sizes), shapes)]

    return leaf, packed, unpack


class Unpacked(list):
    """The scalar sources' gradients, one each, and ``packed``: the leaf's gradient they are views of (a
    reader that wants them stacked again takes it as it is)."""

    def __init__(self, parts, packed: torch.Tensor):
        super().__init__(parts)
        self.packed = packed


def _packed_variant(v: Variant, leaf: torch.Tensor, where: dict, offsets: list) -> Variant:
    """``v`` gathering its source inputs from ``leaf`` (its other inputs kept, after the leaf)."""
    g = v.gather
    owner = tuple(where.get(id(x), -1) for x in g.inputs)
    key = ("packed", owner, tuple(offsets[k] for k in owner if k >= 0))
    template = g.memo.get(key)
    if template is None:  # once per structure and source layout (the memo is shared by rebound copies)
        others = [j for j, k in enumerate(owner) if k < 0]
        moved = {j: 1 + n for n, j in enumerate(others)}
        maps = []
        for m in g.maps:
            if m[0] == "const":
                maps.append(m)
            elif owner[m[0]] >= 0:
                maps.append((0, m[1] + offsets[owner[m[0]]]))
            else:
                maps.append((moved[m[0]], m[1]))
        template = g.memo[key] = Gather((), tuple(maps))
    inputs = (leaf, *(x for x, k in zip(g.inputs, owner) if k < 0))
    return Variant(v.tape, None, template.rebound(inputs))


__all__ = ["pack", "PACK_MIN_SOURCES"]

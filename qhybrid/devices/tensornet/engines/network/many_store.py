"""A ``ManyTrees`` as plain data and back: JSON-able numbers plus one flat array of buffer positions.

Building a ``ManyTrees`` walks every network's tree in Python (Q100 p=4: 150 networks, 58k small steps,
2.6k large ones, 3-4 s); a second process that runs the same networks can load the finished schedule
instead (``lightcone/together_store.py`` keeps it on disk). What is kept is every position table that
reads the small buffer (the waves' gathers, the tiny products' factors, the large steps' operands read
from the buffer, the roots left there), laid end to end in one int64 array, and the numbers around them
(group shapes and spans, each large step's shapes, slots and permutations). The large steps' position
tables over held results are not kept: they follow from the result's shape and the permutation
(``many_sequence.held_fetch``), and so do the sizes, the spans of the waves' gathers and each step's
last reads.

``from_plain`` checks what it reads before anything runs: every kept position lies in the small buffer,
every group's spans tile its wave's gathers and results with the sizes its shape implies, results are
written past the leaf table and inside the buffer, every large step reads only earlier results, each at
most once, with as many elements as it holds. A failed check raises ``ValueError``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import many_tiny
from .many import ManyTrees
from .many_sequence import Sequence, _Fetch, held_fetch
from .many_waves import ZERO_CELL, _Group, _Wave


def to_plain(trees: ManyTrees) -> tuple[dict, np.ndarray]:
    """``(meta, positions)``: the schedule's numbers (JSON-able) and its small-buffer tables end to end."""
    parts: list[np.ndarray] = []
    at = [0]

    def ref(a) -> list[int]:
        a = np.asarray(a.numpy() if isinstance(a, torch.Tensor) else a).reshape(-1)
        parts.append(a.astype(np.int64, copy=False))
        at[0] += a.size
        return [at[0] - a.size, a.size]

    waves = []
    for w in trees.waves:
        groups = [[g.m, g.k, g.n, g.rows, g.need_a, g.need_b] for g in w.groups]
        tiny = [[t.out[1] - t.out[0], ref(t.index_a), ref(t.index_b), ref(t.seg), list(t.a_need), list(t.b_need)] for t in w.tiny]
        out0 = w.groups[0].out[0] if w.groups else w.out[0]
        waves.append([ref(w.index_a), ref(w.index_b), groups, out0, list(w.a_need), list(w.b_need), tiny])
    steps = []
    for st in trees.sequence.steps:
        fetches = []
        for f in (st.a, st.b):
            if f.slot < 0:
                fetches.append([-1, ref(f.index), f.grad])
            else:
                perm = list(range(len(f.shape))) if f.perm is None else list(f.perm)
                fetches.append([f.slot, list(f.shape), perm, f.grad])
        steps.append([*fetches, st.rows, st.m, st.k, st.n])
    roots = [list(r) if r[0] == "held" else ["small", ref(r[1].reshape(-1))] for r in trees._roots]
    roots = [[r[0], r[1], list(r[2]), list(r[3])] if r[0] == "held" else r for r in roots]
    meta = {
        "table_size": trees.table_size, "mirrored": trees.mirrored, "small_size": trees.small_size, "need": trees.need,
        "small_read": trees.small_read, "waves": waves, "steps": steps, "roots": roots,
    }  # fmt: skip
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return meta, flat


def from_plain(meta: dict, flat: np.ndarray) -> ManyTrees:
    """The ``ManyTrees`` that ``to_plain`` described (its tables views of ``flat``), checked (module doc)."""
    table_size, small_size = _int(meta["table_size"]), _int(meta["small_size"])
    if flat.dtype != np.int64 or flat.ndim != 1 or 2 * table_size + ZERO_CELL > small_size:
        raise ValueError("inconsistent sizes")
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= small_size):
        raise ValueError("a position outside the buffer")

    def take(r) -> torch.Tensor:
        start, count = _int(r[0]), _int(r[1])
        if start + count > flat.size:
            raise ValueError("a table past the positions")
        return torch.from_numpy(flat[start : start + count])

    written = 2 * table_size + ZERO_CELL  # results are laid out in order after the table, its conjugate, the zero
    waves = []
    for ra, rb, groups, out0, a_need, b_need, tiny in meta["waves"]:
        ia, ib = take(ra), take(rb)
        if _int(out0) != written:
            raise ValueError("a wave's results out of order")
        made, a_at, b_at = [], 0, 0
        for m, k, n, rows, need_a, need_b in groups:
            m, k, n, rows = _int(m), _int(k), _int(n), _int(rows)
            g = _Group(m, k, n, rows, (a_at, a_at + rows * m * k), (b_at, b_at + rows * k * n),
                       (written, written + rows * m * n), bool(need_a), bool(need_b))  # fmt: skip
            a_at, b_at, written = g.a[1], g.b[1], g.out[1]
            made.append(g)
        if a_at != len(ia) or b_at != len(ib):
            raise ValueError("a wave's gathers do not match its groups")
        bmm = (_int(out0), written)
        parts = []
        for count, ta_ref, tb_ref, seg_ref, ta_need, tb_need in tiny:
            ta, tb, seg, count = take(ta_ref), take(tb_ref), take(seg_ref), _int(count)
            if len(ta) != len(seg) or len(tb) != len(seg) or (len(seg) and int(seg.max()) >= count):
                raise ValueError("a tiny part's factors do not match its results")
            parts.append(many_tiny.Tiny((written, written + count), ta, tb, seg, _span(ta_need, len(ta)), _span(tb_need, len(tb))))
            written += count
        sizes = [tuple(g.a[1] - g.a[0] for g in made), tuple(g.b[1] - g.b[0] for g in made), tuple(g.out[1] - g.out[0] for g in made)]
        waves.append(_Wave(ia, ib, tuple(made), bmm, *sizes, _span(a_need, len(ia)), _span(b_need, len(ib)), tuple(parts)))
    if written > small_size:
        raise ValueError("results past the buffer")
    sequence, read = Sequence(), set()
    for s, (fa, fb, rows, m, k, n) in enumerate(meta["steps"]):
        rows, m, k, n = _int(rows), _int(m), _int(k), _int(n)
        a = _fetch(fa, rows * k * m, s, sequence.sizes, read, take)
        b = _fetch(fb, rows * k * n, s, sequence.sizes, read, take)
        sequence.add(a, b, (rows, m, k, n))
    sequence.finish()
    roots = []
    for r in meta["roots"]:
        if r[0] == "held":
            slot, shape, perm = _int(r[1]), tuple(map(_int, r[2])), tuple(map(_int, r[3]))
            if not 0 <= slot < len(sequence.sizes) or slot in read or math.prod(shape) != sequence.sizes[slot]:
                raise ValueError("a root that is not a held result")
            _permutation(perm, len(shape))
            roots.append(("held", slot, shape, perm))
        elif r[0] == "small":
            roots.append(("small", take(r[1]).numpy()))
        else:
            raise ValueError("a root of unknown kind")
    trees = object.__new__(ManyTrees)
    trees.table_size, trees.mirrored, trees.small_size = table_size, bool(meta["mirrored"]), small_size
    trees.need = _int(meta["need"])
    trees.small_read = _int(meta.get("small_read", 0))
    trees.keep_waves = "small_read" in meta  # (the reader decides under its memory target: together_store)
    trees.waves, trees.sequence, trees._roots = waves, sequence, roots
    trees._on, trees._spare = {}, []
    return trees


def _fetch(plain, count: int, step: int, sizes: list, read: set, take) -> _Fetch:
    if plain[0] == -1:
        index = take(plain[1])
        if len(index) != count:
            raise ValueError("a gather of the wrong size")
        return _Fetch(-1, index, (), None, bool(plain[2]))
    slot, shape, perm = _int(plain[0]), tuple(map(_int, plain[1])), tuple(map(_int, plain[2]))
    if not 0 <= slot < step or slot in read or math.prod(shape) != sizes[slot] or sizes[slot] != count:
        raise ValueError("a step reading a result it may not")
    read.add(slot)
    _permutation(perm, len(shape))
    return held_fetch(slot, shape, perm, bool(plain[3]))


def _permutation(perm: tuple, n: int) -> None:
    if sorted(perm) != list(range(n)):
        raise ValueError("not a permutation")


def _span(span, size: int) -> tuple[int, int]:
    a, b = _int(span[0]), _int(span[1])
    if not 0 <= a <= b <= size:
        raise ValueError("a span outside its table")
    return (a, b)


def _int(x) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x < 0:
        raise ValueError(f"expected a count, got {x!r}")
    return x


__all__ = ["to_plain", "from_plain"]

"""The large steps of many networks' trees, one at a time in each tree's depth-first order (``many.py``).

A step with a large operand (a cone tensor of 2^14-2^19 elements meeting a gate) is bound by memory
traffic, not by dispatch: batching it with other networks' steps gains nothing, and reading its operands
through position tables from one buffer of every intermediate (the waves' way) costs a cache miss per
element: its operand was written waves earlier and evicted since (29 ns an element measured on Q100 p=4,
against 1-4 ns for a permutation copy of a tensor still in cache). Here each large step runs on its own,
right after the steps that made its operands (depth-first), and reads a held operand as a strided view
permuted so that the indices it shares with its partner come first (``bt + k + rest``): a copy whose
inner runs are the rest of the tensor in its own order (the cheap direction of a permutation), or none at
all where they already lead. Both operands are read as ``[b, k, free]``, the left one transposed in the
matrix product, so neither is ever moved to the back. Gathered operands are kept for the backward (a held
result is dropped once its consumer has its copy), so the backward permutes nothing but each cotangent back
into its producer's layout, and skips the products of operands that need no gradient.

>>> # exercised through ``ManyTrees`` (many.py), whose doctest and tests run it with every step large
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from .products import product

MAX_COPY_RUNS = 7
"""A permutation whose copy falls into more than this many coalesced strided runs is gathered through a
position table instead: on 2^14-2^16-element tensors of extent-2 indices torch's permuted copy took 1.2-2.5
ns an element up to 7 runs, 3-8 ns at 8-11 and 12-21 ns at 12 and more; ``index_select`` 1.6-2.9 ns
whatever the runs (medians, one thread)."""


@dataclass(frozen=True)
class _Fetch:
    """How a step reads one operand as ``[rows, k, free]``: from the small buffer by positions
    (``index``), or from a held result (``slot``) through a permutation (``perm`` of its ``shape``; None
    when it is read as it lies) or a position table (``index`` over its elements)."""

    slot: int  # -1: the small buffer
    index: torch.Tensor | None
    shape: tuple[int, ...]
    perm: tuple[int, ...] | None
    grad: bool  # whether a cotangent must flow into it
    inverse: torch.Tensor | None = None  # a held result's position table inverted (the backward's gather)
    unperm: tuple[int, ...] | None = None  # ``perm`` inverted

    def read(self, small: torch.Tensor, held: list, rows: int, k: int, free: int) -> torch.Tensor:
        if self.slot < 0:
            return small.index_select(0, self.index).view(rows, k, free)
        t = held[self.slot]
        if self.index is not None:
            return t.reshape(-1).index_select(0, self.index).view(rows, k, free)
        if self.perm is None:
            return t.view(rows, k, free)
        return t.view(self.shape).permute(self.perm).reshape(rows, k, free)

    def back(self, g: torch.Tensor) -> torch.Tensor:
        """A cotangent in this fetch's ``[rows, k, free]`` order, in the held result's own layout."""
        if self.index is not None:  # a gather by the inverse table: half the time of scattering by the table
            return g.reshape(-1).index_select(0, self.inverse)
        if self.perm is None:
            return g.reshape(-1)
        return g.reshape([self.shape[p] for p in self.perm]).permute(self.unperm).reshape(-1)


@dataclass(frozen=True)
class _SeqStep:
    a: _Fetch
    b: _Fetch
    rows: int
    m: int
    k: int
    n: int
    last_use: tuple[int, ...]  # held slots this step reads for the last time (dropped after it)


class Sequence:
    """The large steps of several trees, in order, with their held results (built by ``many.ManyTrees``).

    ``add(...)`` appends a step and returns its slot; ``roots`` are (slot, permutation to the network's
    output order, shape) for networks whose result is held here."""

    def __init__(self):
        self.steps: list[_SeqStep] = []
        self._pending: list[dict] = []
        self.sizes: list[int] = []  # elements of each slot's result

    def add(self, a: _Fetch, b: _Fetch, shape: tuple[int, int, int, int]) -> int:
        rows, m, k, n = shape
        self._pending.append(dict(a=a, b=b, rows=rows, m=m, k=k, n=n))
        self.sizes.append(rows * m * n)
        return len(self._pending) - 1

    def finish(self) -> None:
        """Fix each step's last reads (a held result is read by exactly one later step)."""
        for s, p in enumerate(self._pending):
            drop = tuple(f.slot for f in (p["a"], p["b"]) if f.slot >= 0)
            self.steps.append(_SeqStep(p["a"], p["b"], p["rows"], p["m"], p["k"], p["n"], drop))
        self._pending = []

    def to(self, device) -> "Sequence":
        """The same steps with their position tables on ``device``."""
        moved = Sequence()
        moved.sizes = self.sizes
        on = lambda f: f if f.index is None else replace(f, index=f.index.to(device), inverse=_to(f.inverse, device))  # noqa: E731
        moved.steps = [replace(st, a=on(st.a), b=on(st.b)) for st in self.steps]
        return moved

    @property
    def held_elements(self) -> int:
        """Elements kept from the forward for the backward: of each step's two gathered operands, those the
        other's cotangent reads (``B`` where ``A`` takes one, ``A`` where ``B`` does)."""
        return sum(s.rows * s.k * (s.m * s.b.grad + s.n * s.a.grad) for s in self.steps)

    def forward(self, small: torch.Tensor, keep: dict) -> list:
        """Every step's result (``held``, ``None`` where consumed); the gathered operands into ``keep``."""
        held: list = [None] * len(self.steps)
        gathered = []
        for s, st in enumerate(self.steps):
            a = st.a.read(small, held, st.rows, st.k, st.m)
            b = st.b.read(small, held, st.rows, st.k, st.n)
            held[s] = product(a.mT, b)  # [rows, m, n]
            for slot in st.last_use:
                held[slot] = None
            # only what a cotangent reads is kept (Q100 p=4: 22.3M of 29.7M elements, 120 MB less to fault in)
            gathered.append((a if st.b.grad else None, b if st.a.grad else None))
        keep["gathered"] = gathered
        return held

    def backward(self, gathered: list, cot_held: list, cot_small: torch.Tensor) -> None:
        """Conjugated cotangents (``h = conj(g)``) of every step's operands, from ``cot_held`` (the held
        results', filled for the roots), into ``cot_held`` (held operands) and ``cot_small`` (buffer operands,
        accumulated): ``h_A = h_C B^T``, ``h_B = A^T h_C``, no operand conjugated."""
        for s in range(len(self.steps) - 1, -1, -1):
            st = self.steps[s]
            gc = cot_held[s]
            cot_held[s] = None
            if gc is None:
                continue
            gc = gc.view(st.rows, st.m, st.n)
            a, b = gathered[s]
            gathered[s] = None
            if st.a.grad:
                # h_A = (h_C B^T)^T = B h_C^T: [rows, k, m] made contiguous by the product itself (its
                # transpose read back flat was a copy and two ops more)
                self._give(st.a, product(b, gc.mT), cot_held, cot_small)  # [rows, k, m]
            if st.b.grad:
                self._give(st.b, product(a, gc), cot_held, cot_small)  # [rows, k, n]

    @staticmethod
    def _give(fetch: _Fetch, g: torch.Tensor, cot_held: list, cot_small: torch.Tensor) -> None:
        if fetch.slot < 0:
            cot_small.index_add_(0, fetch.index, g.reshape(-1))
        else:
            cot_held[fetch.slot] = fetch.back(g)

    def recorded(self, small: torch.Tensor) -> list:
        """The forward with autograd recording (for a backward that builds its own graph)."""
        held: list = [None] * len(self.steps)
        for s, st in enumerate(self.steps):
            a = st.a.read(small, held, st.rows, st.k, st.m)
            b = st.b.read(small, held, st.rows, st.k, st.n)
            held[s] = torch.matmul(a.mT, b)
        return held


def fetch_of(home, want: list, sizes: dict, grad: bool) -> _Fetch:
    """How to read a tensor at ``home`` in the index order ``want``: ``("positions", array, order)`` (the
    small buffer) or ``("held", slot, order)``."""
    kind, where, order = home
    if kind == "positions":
        # a copy: ``where`` may be a read-only array shared between programs
        index = torch.from_numpy(np.array(where.transpose([order.index(x) for x in want]), order="C").reshape(-1))
        return _Fetch(-1, index, (), None, grad)
    return held_fetch(where, tuple(sizes[x] for x in order), tuple(order.index(x) for x in want), grad)


def held_fetch(slot: int, shape: tuple, perm: tuple, grad: bool) -> _Fetch:
    """How to read held result ``slot`` (``shape``) permuted by ``perm`` (a position table past
    ``MAX_COPY_RUNS`` coalesced runs, derived from the two: ``many_store`` keeps only them). Tables are
    int32 where they fit: half the pages to fault in (Q100 p=4: 16M positions and as many inverse ones),
    and ``index_select`` of 2^18 complex128 elements took 0.65-0.93 ms by int32, 0.83-1.55 by int64."""
    where = slot
    if perm == tuple(range(len(perm))):
        return _Fetch(where, None, shape, None, grad)
    unperm = tuple(int(i) for i in np.argsort(perm))
    if _runs(shape, perm) > MAX_COPY_RUNS:
        count = math.prod(shape)
        kind = np.int32 if count <= np.iinfo(np.int32).max else np.int64
        index = permuted_positions(shape, perm, kind)
        inverse = None
        if grad:  # the inverse table is the permuted positions of the inverse permutation (built as fast
            # as the table; a scatter of the positions took 2-6x as long, 0.1 s of loading Q100 p=4's schedule)
            inverse = torch.from_numpy(permuted_positions(tuple(shape[p] for p in perm), unperm, kind))
        return _Fetch(where, torch.from_numpy(index), shape, perm, grad, inverse, unperm)
    return _Fetch(where, None, shape, perm, grad, None, unperm)


def permuted_positions(shape: tuple, perm: tuple, kind=np.int64) -> np.ndarray:
    """``arange(prod(shape)).reshape(shape).transpose(perm).reshape(-1)``, built outward from its innermost
    run of axes (one sum per run over the whole result so far), in place from the end of the one array it
    returns: numpy's transposed copy of 2^14-2^19 positions over 12-19 extent-2 axes took 18 ns an element,
    broadcast sums into fresh arrays 3-6 (Q100 p=4's 34M positions and inverse positions: 0.2 s of loading
    a kept schedule, ``many_store``, half of it page faults of the temporaries).

    >>> permuted_positions((2, 3), (1, 0)).tolist()
    [0, 3, 1, 4, 2, 5]"""
    strides = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    runs: list[list[int]] = []  # [extent, stride] of each run of axes adjacent in both orders
    for p in perm:
        if shape[p] == 1:
            continue
        if runs and runs[-1][1] == strides[p] * shape[p]:
            runs[-1] = [runs[-1][0] * shape[p], strides[p]]
        else:
            runs.append([shape[p], strides[p]])
    total = math.prod(extent for extent, _ in runs)
    out = np.empty(total, dtype=kind)  # built in place from its end: no temporaries to fault in
    out[-1:] = 0
    size = 1
    for extent, stride in reversed(runs):
        prev = out[total - size :]
        start = total - extent * size
        if extent > 8:  # many short blocks: one broadcast sum, from a copy of the (short) table so far
            steps = np.arange(0, extent * stride, stride, dtype=kind)[:, None]
            np.add(steps, prev.copy()[None, :], out=out[start:].reshape(extent, size))
        else:
            for i in range(extent - 1):
                np.add(prev, i * stride, out=out[start + i * size : start + (i + 1) * size])
            prev += (extent - 1) * stride  # the last block is where the table so far lies
        size *= extent
    return out


def _to(t: torch.Tensor | None, device) -> torch.Tensor | None:
    return None if t is None else t.to(device)


def _runs(shape: tuple, perm: tuple) -> int:
    """Coalesced runs of a permuted copy: axes adjacent in the result that are adjacent in the source too
    (or of extent 1) merge into one."""
    runs, prev = 0, None
    for p in perm:
        if shape[p] == 1:
            continue
        if prev is None or p != prev + 1:
            runs += 1
        prev = p
    return runs


__all__ = ["Sequence", "fetch_of", "held_fetch", "MAX_COPY_RUNS"]

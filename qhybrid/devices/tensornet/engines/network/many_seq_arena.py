"""A ``ManyTrees``' large steps over buffers kept from step to step, batched by levels (``many_arena``'s for
the sequence).

Run one at a time (``many_sequence``), a large step reads each operand as a view, a permuted copy or a gather,
multiplies them, and its backward makes two products and hands each cotangent back through the inverse read:
~7 ops a step at best, one or two of them per operand (an 8x8 lattice QAOA p=3: 277 steps, ~1,300 of a step's
ops). Here the steps are cut into *levels* (a step's level is one past its operands' producers'), every result
lies in one flat buffer (the *pool*), and a level is:

* ONE gather of all its steps' operands read from the small buffer, ONE of those read from held results (a
  permutation, or any position table, is a table into the pool), into the level's own buffer;
* one ``bmm`` per distinct ``(rows, m, k, n)`` shape (and operand sources) among its steps, their operands and
  results laid end to end so that same-shape steps of several networks are one product;
* backward, the two products of each shape into a cotangent buffer laid out as the gathers, then ONE
  ``scatter_add_`` into the small buffer's cotangent and ONE ``scatter_`` into the pool's (each held result
  is read by exactly one step, whole: its cotangent is that read's inverse permutation, no zeroing needed).

A level whose operands pass ``CHUNK_ELEMENTS`` runs in chunks of its groups, a gather and a give each (so
that a product reads operands still in cache). Cotangents a step's operand needs no (``grad`` false) are sent
to a junk cell (the small buffer's zero cell, past the pool's end), where nothing reads them. A chunk's
operand cotangents live until its gives only: every chunk's are one scratch buffer per source. The roots are read out of the pool (and their cotangents put
back) by one gather each way. The same products as ``Sequence``: values and gradients equal to rounding.

A large held operand whose permutation copies in few strided runs (``Sequence``'s rule, ``MAX_COPY_RUNS``; or
none) is not gathered by positions but copied as a permuted view into a buffer of its own, and its cotangent
written back through the same view (``COPY_MIN_ELEMENTS``): one op more each way, at half the time a table took.
"""

from __future__ import annotations

import numpy as np
import torch

from .many_sequence import permuted_positions
from .products import kernel


COPY_MIN_ELEMENTS = 1 << 15
"""Held operands from this many elements on are read by a permuted copy where their permutation allows one (module
notes): an 8x8 lattice QAOA p=3 read a 2^20-element operand over 6 runs by ``index_select`` in 13.8 ms and as a
permuted copy in 6.9 ms, and wrote its cotangent back by ``scatter_`` in 13.0 ms and by a permuted copy in 6.6
(one thread); below ~2^15 the op a copy adds costs more than it saves."""

CHUNK_ELEMENTS = 1 << 18
"""Operand elements (4 MiB of complex128) up to which one gather feeds a level's products: gathered all at once,
a level's operands were evicted before its products read them (an 8x8 lattice QAOA p=3: the large steps took
~15% longer than reading each step's operands just before its product); past this a level runs in chunks, a
gather and a give each."""


def sequence_elements(sequence) -> int:
    """Elements an arena holds for ``sequence``: results and their cotangents, operands and theirs (and the
    position tables of every operand, at most two int64 ones, as much as one complex128 element)."""
    return sum(2 * st.rows * st.m * st.n + 3 * st.rows * st.k * (st.m + st.n) for st in sequence.steps)


class SequenceArena:
    """Buffers, views and tables of one sequence on one device and dtype (see the module). ``junk``: a
    position of the small buffer whose cotangent nothing reads."""

    def __init__(self, sequence, dtype, device, roots, junk: int):
        steps = sequence.steps
        zeros = lambda n: torch.zeros(n, dtype=dtype, device=device)  # noqa: E731
        self.roots = roots
        level = [0] * len(steps)
        for s, st in enumerate(steps):
            level[s] = max([level[f.slot] + 1 for f in (st.a, st.b) if f.slot >= 0], default=0)
        by_level: list[dict] = [{} for _ in range(max(level, default=-1) + 1)]
        for s, st in enumerate(steps):  # same shape, same operand sources: one product
            key = (st.rows, st.m, st.k, st.n, st.a.slot < 0, st.b.slot < 0)
            by_level[level[s]].setdefault(key, []).append(s)
        chunks = []  # each level's groups cut into runs whose operands fit ``CHUNK_ELEMENTS``
        for groups in by_level:
            chunk, size = {}, 0
            for key, members in groups.items():
                rows, m, k, n = key[:4]
                more = len(members) * rows * k * (m + n)
                if chunk and size + more > CHUNK_ELEMENTS:
                    chunks.append(chunk)
                    chunk, size = {}, 0
                chunk[key], size = members, size + more
            if chunk:
                chunks.append(chunk)
        offsets, at = {}, 0  # the pool: chunk by chunk, group by group, its members' results end to end
        for groups in chunks:
            for members in groups.values():
                for s in members:
                    offsets[s] = at
                    at += steps[s].rows * steps[s].m * steps[s].n
        pool_junk = at
        self.pool, self.pool_cot = zeros(at + 1), zeros(at + 1)
        # a chunk's operands' cotangents live only until its gives: one scratch per source for every chunk
        most = {True: 0, False: 0, COPIED: 0}
        for groups in chunks:
            count = {True: 0, False: 0, COPIED: 0}
            for (rows, m, k, n, small_a, small_b), members in groups.items():
                for small, free, which in ((small_a, m, "a"), (small_b, n, "b")):
                    count[_source(steps, members, which, small, rows * k * free)] += len(members) * rows * k * free
            most = {x: max(most[x], count[x]) for x in most}
        self._scratch = {x: zeros(most[x]) for x in most}
        self.levels = [self._level(steps, groups, offsets, zeros, junk, pool_junk, device) for groups in chunks]
        held = [(slot, shape, perm) for slot, shape, perm in roots.held]
        places = [offsets[slot] + permuted_positions(shape, perm) for slot, shape, perm in held]
        self.root_index = torch.from_numpy(np.concatenate(places).astype(np.int64)).to(device) if places else None
        self.held = [self.pool[offsets[s] : offsets[s] + st.rows * st.m * st.n].view(st.rows, st.m, st.n) for s, st in enumerate(steps)]
        self.joined = True

    def _level(self, steps, groups: dict, offsets: dict, zeros, junk: int, pool_junk: int, device) -> tuple:
        """``(gathers, copies, products, gives, copy_gives)`` of one level: ``gathers`` ``[(source is the pool,
        table, buffer)]``, ``copies`` ``[(destination, permuted view of a held result)]``, ``products`` per shape
        ``(a [R, k, m], b [R, k, n], out [R, m, n], gc [R, m, n], ga, gb)`` (``ga``/``gb`` None where no
        member's operand needs a cotangent), ``gives`` ``[(to the pool, table, buffer)]``, ``copy_gives``
        ``[(permuted view of the pool's cotangent, cotangent)]``."""
        tables = {True: [], False: []}  # by source (the pool?): [(forward positions, backward positions)]
        sizes = {True: 0, False: 0, COPIED: 0}
        held_copies = []  # (slot, shape, perm, start in the copy buffer, elements, grad)
        plan = []
        for (rows, m, k, n, small_a, small_b), members in groups.items():
            sides = []
            for small, free, which in ((small_a, m, "a"), (small_b, n, "b")):
                source = _source(steps, members, which, small, rows * k * free)
                start = sizes[source]
                need = False
                for s in members:
                    f = getattr(steps[s], which)
                    need = need or f.grad
                    if source is COPIED:
                        held_copies.append((f.slot, f.shape, f.perm, sizes[COPIED], rows * k * free, f.grad))
                        sizes[COPIED] += rows * k * free
                        continue
                    pool = source
                    fwd = f.index.cpu().numpy() if small else offsets[f.slot] + _positions(f, rows * k * free)
                    back = fwd if f.grad else np.full(fwd.shape, pool_junk if pool else junk, dtype=np.int64)
                    tables[pool].append((fwd.astype(np.int64), back.astype(np.int64)))
                    sizes[pool] += fwd.size
                sides.append((source, start, sizes[source], need, free))
            plan.append((rows * len(members), m, k, n, offsets[members[0]], sides))
        bufs, grads, gathers, gives = {}, {}, [], []
        for pool in (False, True):
            if not tables[pool]:
                continue
            fwd, back = (np.concatenate([t[x] for t in tables[pool]]) for x in (0, 1))
            # gathers by int32 tables where they fit (a third less time than int64 here); the gives' ``scatter_``
            # and ``scatter_add_`` take int64 only (``scatter_add_`` adds as ``index_add_`` does, in the same
            # order, at half its time on 10^5 complex128 elements into 10^6, one thread)
            wide = len(fwd) and int(fwd.max()) > np.iinfo(np.int32).max
            fwd = torch.from_numpy(fwd.astype(np.int64 if wide else np.int32)).to(device)
            back = torch.from_numpy(back.astype(np.int64)).to(device)
            bufs[pool], grads[pool] = zeros(len(fwd)), self._scratch[pool][: len(fwd)]
            gathers.append((pool, fwd, bufs[pool]))
            gives.append((pool, back, grads[pool]))
        copies, copy_gives = [], []
        if held_copies:
            bufs[COPIED], grads[COPIED] = zeros(sizes[COPIED]), self._scratch[COPIED][: sizes[COPIED]]
        for slot, shape, perm, at, count, grad in held_copies:
            order = perm or tuple(range(len(shape)))
            permuted = [shape[p] for p in order]
            span = slice(offsets[slot], offsets[slot] + count)
            copies.append((bufs[COPIED][at : at + count].view(permuted), self.pool[span].view(shape).permute(order)))
            if grad:
                copy_gives.append((self.pool_cot[span].view(shape).permute(order), grads[COPIED][at : at + count].view(permuted)))
        products = []
        for rows, m, k, n, at, sides in plan:
            (pa, a0, a1, need_a, _), (pb, b0, b1, need_b, _) = sides
            a, b = bufs[pa][a0:a1].view(rows, k, m), bufs[pb][b0:b1].view(rows, k, n)
            out = self.pool[at : at + rows * m * n].view(rows, m, n)
            gc = self.pool_cot[at : at + rows * m * n].view(rows, m, n)
            ga = grads[pa][a0:a1].view(rows, k, m) if need_a else None
            gb = grads[pb][b0:b1].view(rows, k, n) if need_b else None
            products.append((a.mT, b, out, gc, gc.mT, a, ga, gb, kernel(m, k, n), kernel(k, n, m), kernel(k, m, n)))
        return gathers, copies, products, gives, copy_gives

    def run_forward(self, small: torch.Tensor) -> list:
        """Every step's result (views of the pool)."""
        pool = self.pool
        for gathers, copies, products, _, _ in self.levels:
            for from_pool, index, buf in gathers:
                torch.index_select(pool if from_pool else small, 0, index, out=buf)
            for buf, held in copies:
                buf.copy_(held)
            for aT, b, out, *_, op, _, _ in products:  # (``products.kernel``: bmm, or mul for outer products)
                op(aT, b, out=out)
        return self.held

    def outputs(self, small: torch.Tensor) -> torch.Tensor:
        """Every network's result, in the roots' order."""
        r = self.roots
        parts = [] if r.small is None else [small.index_select(0, r.small)]
        parts += [] if self.root_index is None else [self.pool.index_select(0, self.root_index)]
        out = parts[0] if len(parts) == 1 else torch.cat(parts)
        return out if r.order is None else out.index_select(0, r.order)

    def give_roots(self, grad: torch.Tensor, cot_small: torch.Tensor, cot_held: list) -> None:
        """``outputs``' cotangent ``grad`` into ``cot_small`` and the pool's cotangent."""
        r = self.roots
        if r.inverse is not None:
            grad = grad.index_select(0, r.inverse)
        n = 0 if r.small is None else len(r.small)
        if n:
            cot_small.index_add_(0, r.small, grad[:n])
        if self.root_index is not None:
            self.pool_cot.scatter_(0, self.root_index, grad[n:] if n else grad)

    def run_backward(self, cot_held: list, cot_small: torch.Tensor) -> None:
        """``Sequence.backward`` over the arena, level by level in reverse (the roots' cotangents given by
        ``give_roots``)."""
        pool_cot = self.pool_cot
        for l in range(len(self.levels) - 1, -1, -1):
            _, _, products, gives, copy_gives = self.levels[l]
            for aT, b, out, gc, gcT, a, ga, gb, _, op_a, op_b in products:
                if ga is not None:
                    op_a(b, gcT, out=ga)  # h_A = (h_C B^T)^T = B h_C^T, as [rows, k, m]
                if gb is not None:
                    op_b(a, gc, out=gb)
            for to_pool, index, buf in gives:
                if to_pool:
                    pool_cot.scatter_(0, index, buf)  # (``index_copy_``: 2-5x as long here)
                else:
                    cot_small.scatter_add_(0, index, buf)
            for held, buf in copy_gives:  # (each held result is read by one step, whole: written, not added)
                held.copy_(buf)


COPIED = "copied"
"""The source of a level's operands read by permuted copies (beside ``False``, the small buffer, and ``True``, the
pool through a table)."""


def _source(steps, members, which: str, small: bool, count: int):
    """Where a group's ``which`` operands are read from: ``False`` (the small buffer), ``True`` (the pool, by a
    table), or ``COPIED`` where every member's is a held result of ``count >= COPY_MIN_ELEMENTS`` elements read
    unpermuted or through a permutation (no table: few runs, ``many_sequence.held_fetch``)."""
    if small:
        return False
    if count >= COPY_MIN_ELEMENTS and all(getattr(steps[s], which).index is None for s in members):
        return COPIED
    return True


def _positions(fetch, count: int) -> np.ndarray:
    """A held fetch's read order as positions in its held result."""
    if fetch.index is not None:
        return fetch.index.cpu().numpy().astype(np.int64)
    if fetch.perm is None:
        return np.arange(count, dtype=np.int64)
    return permuted_positions(fetch.shape, fetch.perm, np.int64)


__all__ = ["SequenceArena", "sequence_elements"]

"""A ``ManyTrees``' wave buffers kept from step to step, every view its passes take of them made once.

Batched by waves (``many_waves.py``), a wave's steps are one gather per operand side and one ``bmm`` per
``(m, k, n)`` shape, but each ``bmm`` reads and writes through views of the step's fresh buffers: three views
a group forward, five views and two transposes a group backward (Q100 p=3: 337 groups, ~3,000 of a step's
~11,000 ops, each a few microseconds of dispatch and a kernel launch on a GPU). An ``Arena`` holds the small
buffer, its cotangent, each wave's gathered operands and their cotangents from one step to the next, with
those views made when it is built. A wave is then ONE gather (``out=``) of every group's operands and its
tiny part's factors, one ``bmm`` a group, the tiny part's product and sum (``many_tiny``), and backward the
groups' products and the tiny part's (the cotangents each side needs, laid end to end) and ONE ``scatter_add_``
back, nothing else. Its large steps get their own (``many_seq_arena``).

Sums into the buffers by position are ``scatter_add``, not ``index_add``: on a 1-D tensor with an int64 table
the two add the same terms in the same order (the same bits), and on the CPU ``scatter_add_`` took 0.4-0.7x
the time (10^5 complex128 elements into 10^6, one thread: 0.52 against 1.15 ms at random positions, 0.43
against 1.69 sorted; Q100 p=3's 36 wave gives, a step's 11 ms of ``index_add_`` measured on a slow host).

One step at a time owns it (``take`` / ``release``): a forward whose graph is alive keeps it, so a second
forward before that backward (two losses, ``retain_graph``) runs on fresh buffers as before; the lease ends
with the backward, or when the graph is dropped unused. Only schedules whose wave buffers fit
``ARENA_MAX_ELEMENTS`` get one (they are held between steps).

>>> # exercised through ``ManyTrees`` (tests/devices/tensornet/test_network_many.py)
"""

from __future__ import annotations

import weakref

import torch

from .many_seq_arena import SequenceArena, sequence_elements
from .products import kernel

ARENA_MAX_ELEMENTS = 1 << 23
"""Elements (buffer, cotangent, gathered operands and their cotangents) up to which a schedule keeps an arena
between steps (128 MiB of complex128); larger ones allocate their buffers per step, as before."""


INT32_POSITIONS = (1 << 31) - 1
"""Buffers up to this many elements are gathered from by int32 tables (``index_select`` took 0.93x the time of int64
ones in place, and half the memory); the sums back take int64 (``scatter_add_`` needs it)."""


SEQUENCE_MAX_ELEMENTS = 1 << 25
"""Elements (results, operands and their cotangents) up to which the large steps' buffers are kept too
(``many_seq_arena``; 512 MiB of complex128: an 8x8 lattice QAOA p=3 holds 17M)."""


GPU_HELD_FRACTION = 16
"""On a GPU each cap above is instead this fraction of the GPU's memory (1/16: 8.7 GiB on an H200, 5 GiB on an
H100), where buffers made per step cost a kernel launch a view: Q100 p=4 (2^23.7 elements of waves, 2^26.9 of
large steps, 2.2 GB in all) keeps its arena there, 44,228 -> 6,816 ops a step (counted on the CPU with the caps
raised). The CPU keeps the caps above: held between steps, its buffers would be the process's memory for good."""

SEQUENCE_DEVICES = ("cuda", "cpu")
"""Device types whose large steps run over the arena. The CPU too since the arena's reads of the small buffer
became one gather a step and its roots one read: an 8x8 lattice QAOA p=3 5,237 -> ~2,000 ops a step, no slower
(an earlier measure, before that, had the CPU 10% slower on Q100 p=3 at load 7-9 for 5,918 -> 5,038 ops)."""


class _Lease:
    """Held by the step that took the arena (its autograd context): dropped, it gives the arena back."""


class Arena:
    """Persistent buffers and views of one schedule on one device and dtype (see the module)."""

    def __init__(self, trees, indices: list, dtype, device):
        t = trees.table_size
        new = lambda n: torch.empty(n, dtype=dtype, device=device)  # noqa: E731
        self.small = new(trees.small_size)
        self.small[2 * t :].zero_()  # (the zero cell padded operands read; the rest written by every step)
        self.cot = torch.zeros(trees.small_size, dtype=dtype, device=device)
        self.table, self.conj = self.small[:t], self.small[t : 2 * t]
        self.cot_table, self.cot_conj = self.cot[:t], self.cot[t : 2 * t]
        most = max((p.out[1] - p.out[0] for w in trees.waves for p in w.tiny), default=0)
        zeros = torch.zeros(most, dtype=dtype, device=device)  # (never written: what tiny sums start from)
        self.forward: list = []  # per wave: (gather table, its buffer, [(a3, b3, c3)], tiny run or None)
        self.backward: list = []  # per wave: ([(gc3, bT, ga3, aT, gb3)], tiny run or None, add table, its buffer)
        for wave, (ia, ib, tiny) in zip(trees.waves, indices):
            # ONE gather a wave: every group's left and right operands, then the tiny products' factors
            tables = [ia, ib] + [x for ta, tb, _ in tiny for x in (ta, tb)]
            index = torch.cat(tables)
            if len(index) and trees.small_size <= INT32_POSITIONS:  # (Q100 p=3's 43 gathers: 6.0 -> 5.6 ms a step)
                index = index.to(torch.int32)
            gathered = new(len(index))
            a, b, *factors = gathered.split([len(x) for x in tables])
            c = self.small[wave.out[0] : wave.out[1]]
            gc = self.cot[wave.out[0] : wave.out[1]]
            (a0, a1), (b0, b1) = wave.a_need, wave.b_need
            adds = [ia[a0:a1], ib[b0:b1]]  # ONE scatter_add_ back a wave: the needed cotangents, laid as gathered
            for part, (ta, tb, _) in zip(wave.tiny, tiny):
                (p0, p1), (q0, q1) = part.a_need, part.b_need
                adds += [ta[p0:p1], tb[q0:q1]]
            add_index = torch.cat(adds)
            given = new(len(add_index))
            ga_need, gb_need, *tiny_given = given.split([len(x) for x in adds])
            parts = zip(wave.groups, a.split(wave.a_sizes), b.split(wave.b_sizes), c.split(wave.out_sizes), gc.split(wave.out_sizes))
            fwd, bwd = [], []
            for g, ag, bg, cg, gcg in parts:
                a3, b3, c3 = ag.view(g.rows, g.m, g.k), bg.view(g.rows, g.k, g.n), cg.view(g.rows, g.m, g.n)
                fwd.append((kernel(g.m, g.k, g.n), a3, b3, c3))
                ga3 = ga_need[g.a[0] - a0 : g.a[1] - a0].view(g.rows, g.m, g.k) if g.need_a else None
                gb3 = gb_need[g.b[0] - b0 : g.b[1] - b0].view(g.rows, g.k, g.n) if g.need_b else None
                bwd.append((gcg.view(g.rows, g.m, g.n), b3.mT, ga3, a3.mT, gb3, kernel(g.m, g.n, g.k), kernel(g.k, g.m, g.n)))
            tiny_fwd = tiny_bwd = None
            for part, (_, _, seg) in zip(wave.tiny, tiny):  # (one a wave at most)
                fa, fb = factors
                count = part.out[1] - part.out[0]
                products = new(len(seg))
                tiny_fwd = (fa, fb, products, zeros[:count], seg, self.small[part.out[0] : part.out[1]])
                (p0, p1), (q0, q1) = part.a_need, part.b_need
                lo, hi = (min(p0, q0), max(p1, q1)) if p1 > p0 and q1 > q0 else ((p0, p1) if p1 > p0 else (q0, q1))
                hc = new(hi - lo)
                ya, yb = tiny_given
                tiny_bwd = (self.cot[part.out[0] : part.out[1]], seg[lo:hi], hc, hc[p0 - lo : p1 - lo], fb[p0:p1], ya,
                            hc[q0 - lo : q1 - lo], fa[q0:q1], yb)  # fmt: skip
            self.forward.append((index, gathered, fwd, tiny_fwd))
            self.backward.append((bwd, tiny_bwd, add_index, given))
        self.sequence = None
        steps = trees.sequence.steps
        sequence_cap = held_caps(device, dtype.itemsize)[1]
        if steps and torch.device(device).type in SEQUENCE_DEVICES and sequence_elements(trees.sequence) <= sequence_cap:
            _, sequence, roots = trees._at(device)
            self.sequence = SequenceArena(sequence, dtype, device, roots, junk=2 * t)
        self.busy = 0  # the generation of the lease that holds it (0: free)
        self._generation = 0

    def take(self) -> _Lease | None:
        """A lease on the arena, or None while a step holds it."""
        if self.busy:
            return None
        self._generation += 1
        self.busy = self._generation
        lease = _Lease()
        weakref.finalize(lease, self._free, self._generation)
        return lease

    def _free(self, generation: int) -> None:
        if self.busy == generation:
            self.busy = 0

    def load(self, table: torch.Tensor) -> torch.Tensor:
        """The small buffer with ``table`` and its conjugate at its head."""
        self.table.copy_(table)
        torch.conj_physical(table, out=self.conj)
        return self.small

    def waves_forward(self, waves: list, indices: list) -> None:
        small = self.small
        for index, gathered, groups, tiny in self.forward:
            if len(index):
                torch.index_select(small, 0, index, out=gathered)
            for op, a3, b3, c3 in groups:  # (``products.kernel``: bmm, or mul for outer products)
                op(a3, b3, out=c3)
            if tiny is not None:  # C[o] = sum_l A[pa(o, l)] B[pb(o, l)]
                fa, fb, products, zeros, seg, out = tiny
                torch.mul(fa, fb, out=products)
                torch.scatter_add(zeros, 0, seg, products, out=out)

    def waves_backward(self, waves: list, indices: list) -> None:
        """``many_waves.waves_backward`` over the arena's buffers (the forward's gathers are still there)."""
        cot = self.cot
        for w in range(len(waves) - 1, -1, -1):
            groups, tiny, add_index, given = self.backward[w]
            for gc3, bT, ga3, aT, gb3, op_a, op_b in groups:
                if ga3 is not None:
                    op_a(gc3, bT, out=ga3)
                if gb3 is not None:
                    op_b(aT, gc3, out=gb3)
            if tiny is not None:  # h_A[pa] += h_C[o] B[pb], and the same for B
                hc_all, seg, hc, hc_a, fb, ya, hc_b, fa, yb = tiny
                torch.index_select(hc_all, 0, seg, out=hc)
                if len(ya):
                    torch.mul(hc_a, fb, out=ya)
                if len(yb):
                    torch.mul(hc_b, fa, out=yb)
            if len(add_index):
                cot.scatter_add_(0, add_index, given)


def held_caps(device, itemsize: int) -> tuple[int, int]:
    """Elements a schedule may keep between steps on ``device``: (its wave buffers, its large steps' buffers).

    >>> held_caps("cpu", 16) == (ARENA_MAX_ELEMENTS, SEQUENCE_MAX_ELEMENTS)
    True
    """
    device = torch.device(device)
    if device.type != "cuda":
        return ARENA_MAX_ELEMENTS, SEQUENCE_MAX_ELEMENTS
    cap = torch.cuda.get_device_properties(device).total_memory // (GPU_HELD_FRACTION * itemsize)
    return cap, cap


def arena_fits(trees, device="cpu", itemsize: int = 16) -> bool:
    """Whether ``trees`` keeps an arena on ``device``: its waves' buffers kept anyway (``keep_waves``) and within
    the device's cap (``held_caps``)."""
    products = sum(len(t.index_a) for w in trees.waves for t in w.tiny)  # (their factors, products, cotangents)
    size = 2 * (trees.small_size + trees.small_read) + 3 * products
    return bool(getattr(trees, "keep_waves", False)) and size <= held_caps(device, itemsize)[0]


__all__ = ["Arena", "ARENA_MAX_ELEMENTS", "GPU_HELD_FRACTION", "arena_fits", "held_caps"]

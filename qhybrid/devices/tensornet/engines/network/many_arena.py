"""A ``ManyTrees``' wave buffers kept from step to step, every view its passes take of them made once.

Batched by waves (``many_waves.py``), a wave's steps are one gather per operand side and one ``bmm`` per
``(m, k, n)`` shape, but each ``bmm`` reads and writes through views of the step's fresh buffers: three views
a group forward, five views and two transposes a group backward (Q100 p=3: 337 groups, ~3,000 of a step's
~11,000 ops, each a few microseconds of dispatch and a kernel launch on a GPU). An ``Arena`` holds the small
buffer, its cotangent, each wave's gathered operands and their cotangents from one step to the next, with
those views (and the index spans the backward adds through) made when it is built: a wave is then its two
gathers (``out=``), one ``bmm`` a group, and its two ``index_add_`` back, nothing else.

One step at a time owns it (``take`` / ``release``): a forward whose graph is alive keeps it, so a second
forward before that backward (two losses, ``retain_graph``) runs on fresh buffers as before; the lease ends
with the backward, or when the graph is dropped unused. Only schedules whose wave buffers fit
``ARENA_MAX_ELEMENTS`` get one (they are held between steps).

>>> # exercised through ``ManyTrees`` (tests/devices/tensornet/test_network_many.py)
"""

from __future__ import annotations

import weakref

import torch

from . import many_tiny
from .many_seq_arena import SequenceArena, sequence_elements

ARENA_MAX_ELEMENTS = 1 << 23
"""Elements (buffer, cotangent, gathered operands and their cotangents) up to which a schedule keeps an arena
between steps (128 MiB of complex128); larger ones allocate their buffers per step, as before."""


SEQUENCE_MAX_ELEMENTS = 1 << 25
"""Elements (results, operands and their cotangents) up to which the large steps' buffers are kept too
(``many_seq_arena``; 512 MiB of complex128: an 8x8 lattice QAOA p=3 holds 17M)."""


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
        self.small = torch.empty(trees.small_size, dtype=dtype, device=device)
        self.cot = torch.zeros(trees.small_size, dtype=dtype, device=device)
        self.table, self.conj = self.small[:t], self.small[t : 2 * t]
        self.cot_table, self.cot_conj = self.cot[:t], self.cot[t : 2 * t]
        self.forward: list = []  # per wave: None, or (ia, ib, a, b, [(a3, b3, c3) per group])
        self.backward: list = []  # per wave: None, or ([(gc3, bT, ga3, aT, gb3, need_a, need_b)], adds)
        for wave, (ia, ib, _) in zip(trees.waves, indices):
            if not wave.groups:
                self.forward.append(None)
                self.backward.append(None)
                continue
            a, b = torch.empty(len(ia), dtype=dtype, device=device), torch.empty(len(ib), dtype=dtype, device=device)
            ga, gb = torch.empty_like(a), torch.empty_like(b)
            c = self.small[wave.out[0] : wave.out[1]]
            gc = self.cot[wave.out[0] : wave.out[1]]
            parts = zip(
                wave.groups, a.split(wave.a_sizes), b.split(wave.b_sizes), c.split(wave.out_sizes),
                gc.split(wave.out_sizes), ga.split(wave.a_sizes), gb.split(wave.b_sizes),
            )  # fmt: skip
            fwd, bwd = [], []
            for g, ag, bg, cg, gcg, gag, gbg in parts:
                a3, b3, c3 = ag.view(g.rows, g.m, g.k), bg.view(g.rows, g.k, g.n), cg.view(g.rows, g.m, g.n)
                fwd.append((a3, b3, c3))
                gc3 = gcg.view(g.rows, g.m, g.n)
                bwd.append((gc3, b3.mT, gag.view(g.rows, g.m, g.k), a3.mT, gbg.view(g.rows, g.k, g.n), g.need_a, g.need_b))
            (a0, a1), (b0, b1) = wave.a_need, wave.b_need
            adds = [(ia[a0:a1], ga[a0:a1])] if a1 > a0 else []
            adds += [(ib[b0:b1], gb[b0:b1])] if b1 > b0 else []
            self.forward.append((ia, ib, a, b, fwd))
            self.backward.append((bwd, adds))
        self._tiny(trees, indices, dtype, device)
        self.sequence = None
        steps = trees.sequence.steps
        if steps and torch.device(device).type in SEQUENCE_DEVICES and sequence_elements(trees.sequence) <= SEQUENCE_MAX_ELEMENTS:
            _, sequence, roots = trees._at(device)
            self.sequence = SequenceArena(sequence, dtype, device, roots)
        self.busy = 0  # the generation of the lease that holds it (0: free)
        self._generation = 0

    def _tiny(self, trees, indices: list, dtype, device) -> None:
        """Per wave, its tiny parts' runs over two scratch buffers shared by every part (``many_tiny``):
        forward ``(ta, tb, a, b, results, a as [-1, k] or None where k is 1)``, backward per side ``(index, other factors' positions, gathered, the results' cotangents [-1, 1],
        products [-1, k])``."""
        size = max((len(t.index_a) for w in trees.waves for t in w.tiny), default=0)
        one = torch.empty(size, dtype=dtype, device=device)
        two = torch.empty(size, dtype=dtype, device=device)
        self.tiny_forward, self.tiny_backward = [], []
        for wave, (_, _, tiny) in zip(trees.waves, indices):
            fwd, bwd = [], []
            for part, (ta, tb) in zip(wave.tiny, tiny):
                n, k = len(ta), part.k
                out = self.small[part.out[0] : part.out[1]]
                a, b = one[:n], two[:n]
                fwd.append((ta, tb, a, b, out, a.view(-1, k) if k > 1 else None))
                sides = []
                for (p0, p1), mine, other in ((part.a_need, ta, tb), (part.b_need, tb, ta)):
                    if p1 > p0:
                        hc = self.cot[part.out[0] + p0 // k : part.out[0] + p1 // k].view(-1, 1)
                        gathered, products = one[: p1 - p0], two[: p1 - p0]
                        sides.append((mine[p0:p1], other[p0:p1], gathered, hc, gathered.view(-1, k), products, products.view(-1, k)))
                bwd.append(sides)
            self.tiny_forward.append(fwd)
            self.tiny_backward.append(bwd)

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
        for run, tiny in zip(self.forward, self.tiny_forward):
            for ta, tb, a, b, out, rows in tiny:  # C[o] = sum_l A[pa(o, l)] B[pb(o, l)]
                torch.index_select(small, 0, ta, out=a)
                torch.index_select(small, 0, tb, out=b)
                if rows is None:  # one product a result
                    torch.mul(a, b, out=out)
                else:
                    a.mul_(b)
                    torch.sum(rows, 1, out=out)
            if run is None:
                continue
            ia, ib, a, b, groups = run
            torch.index_select(small, 0, ia, out=a)
            torch.index_select(small, 0, ib, out=b)
            for a3, b3, c3 in groups:
                torch.bmm(a3, b3, out=c3)

    def waves_backward(self, waves: list, indices: list) -> None:
        """``many_waves.waves_backward`` over the arena's buffers (the forward's gathers are still there)."""
        small, cot = self.small, self.cot
        for w in range(len(waves) - 1, -1, -1):
            for sides in self.tiny_backward[w]:  # h_A[pa] += h_C[o] B[pb], and the same for B
                for mine, other, gathered, hc, gathered2, products, products2 in sides:
                    torch.index_select(small, 0, other, out=gathered)
                    torch.mul(hc, gathered2, out=products2)
                    cot.index_add_(0, mine, products)
            run = self.backward[w]
            if run is None:
                continue
            groups, adds = run
            for gc3, bT, ga3, aT, gb3, need_a, need_b in groups:
                if need_a:
                    torch.bmm(gc3, bT, out=ga3)
                if need_b:
                    torch.bmm(aT, gc3, out=gb3)
            for index, values in adds:
                cot.index_add_(0, index, values)


def arena_fits(trees) -> bool:
    """Whether ``trees`` keeps an arena: its waves' buffers kept anyway (``keep_waves``) and within the cap."""
    products = max((len(t.index_a) for w in trees.waves for t in w.tiny), default=0)
    size = 2 * (trees.small_size + trees.small_read + products)
    return bool(getattr(trees, "keep_waves", False)) and size <= ARENA_MAX_ELEMENTS


__all__ = ["Arena", "ARENA_MAX_ELEMENTS", "arena_fits"]

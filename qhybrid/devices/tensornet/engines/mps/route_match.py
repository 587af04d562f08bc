"""A second router for :func:`.route.plan`, for circuits whose ready gates are many at once (QAOA cost layers:
every edge of a lattice commutes with every other): rounds of *sort the chain so that a chosen set of ready
gates becomes contiguous*, instead of bringing one gate's wires together at a time.

Each round (after every contiguous ready gate has run, nearest the centre first):

1. **Choose a target.** Ready gates, fewest SWAPs needed first, join the target while their wires are free
   (a matching); gates needing at most :data:`PATH_NEED` SWAPs may also chain into paths (a lattice row whose
   wires sit between another row's). Each group of wires is to sit together, in path order, where its wires
   are on average now; wires in no group keep their place. Two candidates — matching only, and paths too —
   are scored by the SWAPs the sort costs (the Kendall distance of the two orders) plus the SWAPs the ready
   gates would still need after it (gates of later generations weighted :data:`AHEAD_WEIGHT`); the lower
   wins.
2. **Sort.** Adjacent pairs out of target order are exchanged, the one nearest the orthogonality centre
   first (every exchange removes one inversion: the sort costs exactly the Kendall distance); a gate that
   becomes contiguous at the centre runs at once, a ready gate on the exchanged pair rides in the SWAP.

On an 8x8 lattice in row-major order this finds the tour *rows interleaved in even pairs -> rows apart ->
rows interleaved in odd pairs*: about 196 SWAPs a QAOA layer where moving one wire per edge takes about 520.
"""

from __future__ import annotations

PATH_NEED = 1
"""Gates needing at most this many SWAPs may chain into paths in a target: a row interleaved with another
is one SWAP from each neighbour; chaining distant gates would pull whole columns together (a transpose)."""

AHEAD_WEIGHT = 0.5
"""Weight, in a target's score, of what the ready gates of later generations (past the first pending
layer) still need: they count, less than the layer at hand."""


class MatchRouter:
    """State: where each slot's wire sits, the centre's span (the last block's sites), the blocks so far."""

    def __init__(self, gates, n_sites: int, waiting, successors, block):
        self.gates = gates
        self.n = n_sites
        self.pos = list(range(n_sites))  # slot -> site
        self.at = list(range(n_sites))  # site -> slot
        self.clo, self.chi = 0, 0
        self.blocks = []
        self.block = block
        self.waiting, self.successors = list(waiting), successors
        self.ready = [g for g in range(len(gates)) if self.waiting[g] == 0]
        self.generation = _generations(gates, successors)

    # --- bookkeeping -------------------------------------------------------------------------

    def _finish(self, g) -> None:
        self.ready.remove(g)
        for s in self.successors[g]:
            self.waiting[s] -= 1
            if self.waiting[s] == 0:
                self.ready.append(s)

    def _exchange(self, q) -> None:
        a, b = self.at[q], self.at[q + 1]
        self.at[q], self.at[q + 1] = b, a
        self.pos[a], self.pos[b] = q + 1, q

    def _travel(self, lo, hi) -> int:
        return max(0, lo - self.chi, self.clo - hi)

    def _span(self, g):
        sites = [self.pos[s] for s in self.gates[g][0]]
        return min(sites), max(sites)

    def _need(self, g) -> int:
        lo, hi = self._span(g)
        return hi - lo + 1 - len(self.gates[g][0])

    def _gate_block(self, g, swap_after=False) -> None:
        slots = self.gates[g][0]
        start = min(self.pos[s] for s in slots)
        offsets = tuple(self.pos[s] - start for s in slots)
        self.blocks.append(self.block(start, len(slots), g, offsets, swap_after))
        if swap_after:
            self._exchange(start)
        self.clo, self.chi = start, start + len(slots) - 1
        self._finish(g)

    def _swap(self, q) -> None:
        pair = {self.at[q], self.at[q + 1]}
        rider = next((g for g in self.ready if len(self.gates[g][0]) == 2 and set(self.gates[g][0]) == pair), None)
        if rider is not None:
            self._gate_block(rider, swap_after=True)
            return
        self.blocks.append(self.block(q, 2))
        self._exchange(q)
        self.clo, self.chi = q, q + 1

    # --- rounds ------------------------------------------------------------------------------

    def run(self):
        while self.ready:
            self._flush()
            if self.ready:
                self._round()
        return tuple(self.blocks), tuple(self.pos)

    def _flush(self) -> None:
        """Run one-site gates, then contiguous ready gates nearest the centre first, while there are any."""
        while True:
            one = next((g for g in self.ready if len(self.gates[g][0]) == 1), None)
            if one is not None:
                self.blocks.append(self.block(self.pos[self.gates[one][0][0]], 1, one, (0,)))
                self._finish(one)
                continue
            contiguous = [g for g in self.ready if self._need(g) == 0]
            if not contiguous:
                return
            self._gate_block(min(contiguous, key=lambda g: (self._travel(*self._span(g)), g)))

    def _round(self) -> None:
        front = sorted(self.ready, key=lambda g: (self._need(g), self._span(g), g))
        rank = min((self._target(front, path_need) for path_need in (-1, PATH_NEED)), key=lambda r: self._score(r, front))
        while True:
            out_of_order = [q for q in range(self.n - 1) if rank[self.at[q]] > rank[self.at[q + 1]]]
            if not out_of_order:
                return
            self._swap(min(out_of_order, key=lambda q: (self._travel(q, q + 1), q)))
            for g in list(self.ready):  # one-site gates wait for the next flush: they need no centre
                if len(self.gates[g][0]) > 1 and self._need(g) == 0 and self._travel(*self._span(g)) == 0:
                    self._gate_block(g)

    def _target(self, front, path_need) -> list[int]:
        """Target rank of every slot (see the module): groups of chosen gates' wires at their mean site."""
        groups = _Groups(self.n)
        for g in front:
            slots = self.gates[g][0]
            if len(slots) == 2 and self._need(g) <= path_need:
                groups.chain(*slots)
            else:
                groups.match(slots)
        key = [(float(self.pos[s]), 1, 0, 0) for s in range(self.n)]
        for members in groups.members():
            ordered = groups.path_order(members, self.pos)
            mean = sum(self.pos[s] for s in members) / len(members)
            first = min(self.pos[s] for s in members)
            for i, s in enumerate(ordered):
                key[s] = (mean, 0, first, i)
        order = sorted(range(self.n), key=lambda s: (key[s], self.pos[s]))
        rank = [0] * self.n
        for i, s in enumerate(order):
            rank[s] = i
        return rank

    def _score(self, rank, front) -> float:
        """SWAPs of the sort to ``rank`` plus the SWAPs the ready gates would still need there."""
        swaps = _inversions([rank[s] for s in self.at])
        first = min(self.generation[g] for g in front)
        need = 0.0
        for g in front:
            sites = [rank[s] for s in self.gates[g][0]]
            weight = 1.0 if self.generation[g] == first else AHEAD_WEIGHT
            need += weight * (max(sites) - min(sites) + 1 - len(sites))
        return swaps + need


class _Groups:
    """Wires grouped by the gates a target makes contiguous: single gates (matched) and paths (chained)."""

    def __init__(self, n):
        self.parent = list(range(n))
        self.adjacent: dict[int, list[int]] = {}
        self.used: set[int] = set()  # wires of matched gates (and of 3+-wire ones): in no other group
        self.grouped: set[int] = set()

    def _root(self, x):
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def match(self, slots) -> None:
        if any(s in self.grouped for s in slots):
            return
        for s in slots:
            self.parent[self._root(s)] = self._root(slots[0])
            self.used.add(s)
            self.grouped.add(s)

    def chain(self, a, b) -> None:
        if a in self.used or b in self.used or self._root(a) == self._root(b):
            return
        if len(self.adjacent.get(a, ())) >= 2 or len(self.adjacent.get(b, ())) >= 2:
            return
        self.adjacent.setdefault(a, []).append(b)
        self.adjacent.setdefault(b, []).append(a)
        self.parent[self._root(a)] = self._root(b)
        self.grouped.update((a, b))

    def members(self):
        out: dict[int, list[int]] = {}
        for s in self.grouped:
            out.setdefault(self._root(s), []).append(s)
        return out.values()

    def path_order(self, members, pos) -> list[int]:
        """A path's wires from the end nearer the chain's start; a matched group's by site."""
        if not any(s in self.adjacent for s in members):
            return sorted(members, key=lambda s: pos[s])
        ends = [s for s in members if len(self.adjacent[s]) == 1]
        s, prev = min(ends, key=lambda s: pos[s]), None
        order = [s]
        while len(order) < len(members):
            s, prev = next(t for t in self.adjacent[s] if t != prev), s
            order.append(s)
        return order


def _generations(gates, successors) -> list[int]:
    """How many multi-site gates lie on the longest chain of predecessors up to and including each gate
    (a QAOA layer is one generation)."""
    gen = [0] * len(gates)
    for g in range(len(gates)):  # predecessors come first in circuit order
        own = gen[g] + (1 if len(gates[g][0]) > 1 else 0)
        gen[g] = own
        for s in successors[g]:
            gen[s] = max(gen[s], own)
    return gen


def _inversions(seq) -> int:
    """Pairs out of order in ``seq`` (a permutation of 0..n-1), by a Fenwick tree."""
    n = len(seq)
    tree = [0] * (n + 1)
    count = 0
    for seen, v in enumerate(seq):
        i, below = v + 1, 0
        while i > 0:
            below += tree[i]
            i -= i & -i
        count += seen - below
        i = v + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
    return count

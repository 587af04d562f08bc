"""Where and in what order a circuit's gates run on the MPS chain: a plan of blocks (a gate on contiguous sites,
or a SWAP of two neighbours), computed from the gates' wires alone, so one plan serves every parameter value.

Two freedoms are used.

- **Order.** Gates on disjoint wires commute, and so do gates diagonal in the computational basis on shared
  wires (``IsingZZ``, ``CZ``, ``CRZ``, ``MultiRZ``, ...): a QAOA cost layer is one set of mutually commuting
  gates. Among the gates whose predecessors are done, the cheapest one next to the orthogonality centre goes
  next (SWAPs it needs plus sites the centre travels: each is one two-site split), so a brickwork layer becomes
  a serpentine sweep and a cost layer a sweep of the lattice.
- **Placement.** A gate on wires d sites apart moves one wire next to the other by d - 1 SWAPs (each a
  truncated two-site split, so the bond cap holds throughout) and leaves it there: the chain's wire order
  changes and the plan returns where every wire ended. Moving it back (another d - 1 splits) is chosen only
  when the layout left behind would cost the next gates more; which wire moves, and whether the gate's split
  also exchanges its two wires (free: a SWAP times the gate is one split), is chosen the same way, by the
  SWAPs the next :data:`LOOKAHEAD_PER_SITE` x n gates would need. A gate ready on the two wires a SWAP
  exchanges is applied in that SWAP's split, at no cost.

A StronglyEntanglingLayers ring-closing CNOT then costs d - 1 splits instead of 2d - 1 and turns the chain's
order one step around the ring, where the next layer's gates are as near as before.

Wide sets of ready gates (a QAOA cost layer on a lattice) are better served by sorting the chain so that
many of them meet at once (:mod:`.route_match`). Both routers plan every circuit; the plan with the lower
:func:`plan_cost` runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .route_match import MatchRouter

MOVE_COST = 0.25
"""A centre move (an exact QR of one site, :mod:`.qr`) against a two-site split (an eigendecomposition of a
block twice the size, forward and backward): measured about 0.15-0.25 at bond 64 on one CPU thread."""

LOOKAHEAD_PER_SITE = 2
"""The placement choice counts the SWAPs of the next ``LOOKAHEAD_PER_SITE * n_sites`` gates (in circuit
order): about two layers of a hardware-efficient circuit."""


@dataclass(frozen=True)
class Block:
    """One step: merge sites ``start .. start + width - 1``; apply gate ``gate`` (its wire j on site
    ``start + offsets[j]``) then, if ``swap_after``, exchange the two sites; ``gate`` None: a SWAP."""

    start: int
    width: int
    gate: int | None = None
    offsets: tuple[int, ...] = ()
    swap_after: bool = False


def plan(gates: tuple[tuple[tuple[int, ...], bool], ...], n_sites: int) -> tuple[tuple[Block, ...], tuple[int, ...]]:
    """Blocks applying ``gates`` (each ``(slots, diagonal)``: the chain positions its wires start at, and
    whether its matrix is diagonal) and where each slot's wire ends, ``final[slot] = site``.

    >>> blocks, final = plan((((0, 2), False),), 3)
    >>> [(b.start, b.width, b.gate) for b in blocks], final
    ([(1, 2, None), (0, 2, 0)], (0, 2, 1))
    """
    return _plan_cached(tuple(gates), n_sites)


@functools.lru_cache(maxsize=128)
def _plan_cached(gates, n_sites):
    greedy = _Router(gates, n_sites).run()
    waiting, successors = _dependencies(gates)
    matched = MatchRouter(gates, n_sites, waiting, successors, Block).run()
    return min((greedy, matched), key=lambda p: plan_cost(p[0]))


def plan_cost(blocks) -> float:
    """Two-site splits of a plan plus :data:`MOVE_COST` per site the centre moves between its blocks (each
    block's splits leave the centre on the side of the next multi-site block, as the engine does)."""
    multi = [b for b in blocks if b.width > 1]
    splits = sum(b.width - 1 for b in multi)
    moves, centre = 0, 0
    for i, b in enumerate(multi):
        stop = b.start + b.width - 1
        moves += max(0, b.start - centre, centre - stop)
        following = multi[i + 1].start if i + 1 < len(multi) else None
        centre = b.start if following is not None and following < b.start else stop
    return splits + MOVE_COST * moves


def _dependencies(gates) -> tuple[list[int], list[list[int]]]:
    """Unapplied-predecessor counts and successor lists of the commutation DAG: a gate waits for the last
    non-commuting gate on each of its wires (diagonal gates commute with each other)."""
    last_plain: dict[int, int] = {}  # the last non-diagonal gate on a wire
    diagonal_since: dict[int, list[int]] = {}  # diagonal gates on a wire since its last non-diagonal one
    waiting = [0] * len(gates)
    successors: list[list[int]] = [[] for _ in gates]
    for g, (slots, diagonal) in enumerate(gates):
        preds = set()
        for s in slots:
            if diagonal:
                if s in last_plain:
                    preds.add(last_plain[s])
            else:
                since = diagonal_since.get(s)
                if since:
                    preds.update(since)
                elif s in last_plain:
                    preds.add(last_plain[s])
        for p in preds:
            successors[p].append(g)
        waiting[g] = len(preds)
        for s in slots:
            if diagonal:
                diagonal_since.setdefault(s, []).append(g)
            else:
                last_plain[s] = g
                diagonal_since[s] = []
    return waiting, successors


class _Router:
    """The greedy schedule and placement of :func:`plan` (state: where each slot's wire sits now)."""

    def __init__(self, gates, n_sites: int):
        self.gates = gates
        self.pos = list(range(n_sites))  # slot -> site
        self.at = list(range(n_sites))  # site -> slot
        self.centre = 0
        self.blocks: list[Block] = []
        self.window = max(LOOKAHEAD_PER_SITE * n_sites, 1)

    def run(self):
        self.waiting, self.successors = _dependencies(self.gates)
        self.ready = [g for g in range(len(self.gates)) if self.waiting[g] == 0]
        self.done = [False] * len(self.gates)
        self.next_unapplied = 0
        while self.ready:
            g = min(self.ready, key=lambda g: (self._cost(g), g))
            self.ready.remove(g)
            self._apply(g)
            self._finish(g)
        return tuple(self.blocks), tuple(self.pos)

    def _finish(self, g) -> None:
        self.done[g] = True
        while self.next_unapplied < len(self.gates) and self.done[self.next_unapplied]:
            self.next_unapplied += 1
        for s in self.successors[g]:
            self.waiting[s] -= 1
            if self.waiting[s] == 0:
                self.ready.append(s)

    # --- costs -------------------------------------------------------------------------------

    def _span(self, g, pos=None) -> tuple[int, int]:
        pos = pos or self.pos
        sites = [pos[s] for s in self.gates[g][0]]
        return min(sites), max(sites)

    def _need(self, g, pos=None) -> int:
        """SWAPs gate ``g`` needs to make its sites contiguous."""
        lo, hi = self._span(g, pos)
        return hi - lo + 1 - len(self.gates[g][0])

    def _cost(self, g) -> int:
        if len(self.gates[g][0]) == 1:
            return -1  # one-site gates need neither the centre nor SWAPs: first
        lo, hi = self._span(g)
        travel = 0 if lo <= self.centre <= hi else min(abs(lo - self.centre), abs(hi - self.centre))
        return self._need(g) + travel

    def _future(self, pos, skip) -> int:
        """SWAPs the next unapplied gates (a window in circuit order) would need with wires at ``pos``."""
        total, seen, g = 0, 0, self.next_unapplied
        while g < len(self.gates) and seen < self.window:
            if not self.done[g] and g != skip and len(self.gates[g][0]) > 1:
                total += self._need(g, pos)
                seen += 1
            g += 1
        return total

    # --- moves -------------------------------------------------------------------------------

    def _swap(self, q: int) -> None:
        """A SWAP block of sites ``q, q + 1``; a ready gate on exactly those two wires rides along (the gate
        and the SWAP are one split: the gate is free)."""
        pair = {self.at[q], self.at[q + 1]}
        rider = next((g for g in self.ready if len(self.gates[g][0]) == 2 and set(self.gates[g][0]) == pair), None)
        if rider is None:
            self.blocks.append(Block(q, 2))
            self._exchange(self.pos, self.at, q)
        else:
            self.ready.remove(rider)
            self._gate_block(rider, swap_after=True)
            self._finish(rider)
        self.centre = q

    @staticmethod
    def _exchange(pos, at, q):
        a, b = at[q], at[q + 1]
        at[q], at[q + 1] = b, a
        pos[a], pos[b] = q + 1, q

    def _gate_block(self, g, swap_after=False) -> None:
        slots = self.gates[g][0]
        start = min(self.pos[s] for s in slots)
        offsets = tuple(self.pos[s] - start for s in slots)
        self.blocks.append(Block(start, len(slots), g, offsets, swap_after))
        if swap_after:
            self._exchange(self.pos, self.at, start)
        self.centre = start

    def _apply(self, g) -> None:
        slots = self.gates[g][0]
        if len(slots) == 1:
            self.blocks.append(Block(self.pos[slots[0]], 1, g, (0,)))
            return
        if len(slots) > 2 or self._need(g) == 0:
            self._gather(slots)
            self._gate_block(g)
            return
        self._route_pair(g)

    def _gather(self, slots) -> None:
        """SWAPs bringing the wires of ``slots`` next to the leftmost one (in their order along the chain)."""
        ordered = sorted(slots, key=lambda s: self.pos[s])
        first = self.pos[ordered[0]]
        for j, s in enumerate(ordered[1:], start=1):
            for q in range(self.pos[s] - 1, first + j - 1, -1):
                self._swap(q)

    def _route_pair(self, g) -> None:
        """A two-site gate on distant wires: the cheapest of moving the left or the right wire (and leaving
        it, or moving it back), by the splits now and the SWAPs the next gates would need after."""
        a, b = sorted(self.gates[g][0], key=lambda s: self.pos[s])
        p, q = self.pos[a], self.pos[b]
        d = q - p
        best = None
        for mover, path in ((b, range(q - 1, p, -1)), (a, range(p, q - 1))):
            pos, at = list(self.pos), list(self.at)
            for site in path:
                self._exchange(pos, at, site)
            lo = min(pos[a], pos[b])
            stay = self._future(pos, g)
            pos2, at2 = list(pos), list(at)
            self._exchange(pos2, at2, lo)
            exchanged = self._future(pos2, g)
            back = self._future(self.pos, g)
            options = [
                (d - 1 + stay, 0, mover, False, False),
                (d - 1 + exchanged, 1, mover, True, False),
                (2 * (d - 1) + back, 2, mover, False, True),
            ]
            choice = min(options)
            best = choice if best is None or choice[:2] < best[:2] else best
        _, _, mover, swap_after, back = best
        path = list(range(q - 1, p, -1)) if mover == b else list(range(p, q - 1))
        for site in path:
            self._swap(site)
        self._gate_block(g, swap_after)
        if back:
            for site in reversed(path):
                self._swap(site)

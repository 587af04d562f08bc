"""An order of a circuit's multi-site gates that keeps the MPS orthogonality centre moving little.

Gates on disjoint wires commute, so any topological order of the gate dependency graph gives the same state.
Greedily taking, among the gates whose wires are free, the one nearest the centre turns a brickwork layer
written left to right after one written left to right into a serpentine sweep: the centre travels the chain
once a layer instead of twice.
"""

from __future__ import annotations


def schedule(gate_sites: list[tuple[int, ...]], n_sites: int) -> list[int]:
    """Indices of ``gate_sites`` in a dependency-respecting order, each next gate the one nearest the last.

    >>> schedule([(0, 1), (2, 3), (1, 2)], 4)
    [0, 1, 2]
    >>> schedule([(0, 1), (2, 3), (4, 5), (1, 2), (3, 4)], 6)
    [0, 1, 2, 4, 3]
    """
    last_on_wire: dict[int, int] = {}
    waiting = [0] * len(gate_sites)  # unapplied predecessors of each gate
    successors: list[list[int]] = [[] for _ in gate_sites]
    for g, sites in enumerate(gate_sites):
        preds = {last_on_wire[s] for s in sites if s in last_on_wire}
        for p in preds:
            successors[p].append(g)
        waiting[g] = len(preds)
        for s in sites:
            last_on_wire[s] = g
    ready = [g for g in range(len(gate_sites)) if waiting[g] == 0]
    order: list[int] = []
    centre = 0
    while ready:
        best = min(ready, key=lambda g: (_distance(gate_sites[g], centre), g))
        ready.remove(best)
        order.append(best)
        centre = _landing(gate_sites[best], centre)
        for s in successors[best]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    return order


def _distance(sites: tuple[int, ...], centre: int) -> int:
    lo, hi = min(sites), max(sites)
    return 0 if lo <= centre <= hi else min(abs(lo - centre), abs(hi - centre))


def _landing(sites: tuple[int, ...], centre: int) -> int:
    lo, hi = min(sites), max(sites)
    return hi if centre <= lo else lo if centre >= hi else centre

"""Contraction trees from variable elimination: min-fill orders on a network's index graph.

A closed light-cone network of a QAOA circuit, with its diagonal gates as hyperedges, is a graph of
extent-2 indices joined by rank-1 and rank-2 tensors: contracting it is eliminating its indices one by
one (QTensor's way), and a good tree is a good elimination order. Pairwise greedy contraction is lost
on such networks (a Q100 p=4 cone: 2^33-2^36 flops greedy, 2^24-2^25 along a min-fill order, ~10 ms to
find). Here:

* ``min_fill_order``: the index graph (two indices adjacent when a tensor holds both), eliminated one
  index at a time, each time the one whose elimination adds the fewest edges (fill-in; ties: fewer
  neighbours), the fill kept by incremental triangle counts (``fill = C(degree, 2) - triangles``) on
  Python-int bitsets. A draw with ``noise`` adds ``noise * u`` to each index's fill, ``u`` uniform per
  index and seed: orders that differ where min-fill is ambivalent. Its estimate is the sum over
  eliminations of the extents of the eliminated index's clique, which tracks the tree's flops within
  ~1.5x (measured on Q100 p=4 cones), so draws are compared without building their trees.
* ``bucket_path``: the order as a linear path: each eliminated index's tensors merged smallest first.
* ``eliminate``: ``draws`` orders (the first without noise), the best by its estimate, as a ``Found``.

Output indices are never eliminated (they stay on the last tensors, merged smallest first).

>>> from .problem import Problem, _evaluate
>>> ring = Problem.of([(i, (i + 1) % 8) for i in range(8)], (), {i: 2 for i in range(8)})
>>> found = eliminate(ring, 1)
>>> found.flops == _evaluate(ring, found.path).flops and found.largest <= 4
True
"""

from __future__ import annotations

import heapq
import math
import random

from .problem import Found, Problem, _evaluate

NOISE = 3.0
"""Perturbation of a draw's fill-in counts (uniform in [0, NOISE) per index): on Q100 p=4's 20 costliest
cones, 8 draws at 0 / 1 / 2 / 3 / 4 / 6 gave 2^27.25 / 27.21 / 27.03 / 26.78 / 26.99 / 27.13 flops in
total (one draw: 2^27.3-2^27.6; the hyper tier's randomised greedy rounds before it: 2^28.7)."""


class IndexGraph:
    """A network's index graph: indices numbered 0.., adjacency as int bitsets, log2 extents, the bitset
    of the output's indices (never eliminated), and each index's degree and triangle count (every draw
    starts from them)."""

    def __init__(self, problem: Problem):
        number: dict = {}
        for ix in problem.inputs:
            for i in ix:
                number.setdefault(i, len(number))
        self.names = list(number)
        adj = [0] * len(number)
        for ix in problem.inputs:
            bits = 0
            for i in ix:
                bits |= 1 << number[i]
            for i in ix:
                adj[number[i]] |= bits
        self.adj = [a & ~(1 << v) for v, a in enumerate(adj)]
        self.kept = sum(1 << number[i] for i in set(problem.output) if i in number)
        self.log_sizes = [math.log2(problem.sizes[i]) for i in self.names]
        self.degree = [a.bit_count() for a in self.adj]
        self.triangles = [sum((self.adj[u] & a).bit_count() for u in _bits(a)) // 2 for a in self.adj]


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def min_fill_order(graph: IndexGraph, seed: int = 0, noise: float = 0.0) -> tuple[list, float]:
    """(indices in elimination order, estimated flops): min-fill with ``noise`` (see the module)."""
    adj = list(graph.adj)
    size = len(adj)
    rng = random.Random(seed)
    jitter = [rng.random() for _ in range(size)] if noise else [0.0] * size
    degree, triangles = list(graph.degree), list(graph.triangles)
    alive = [not (graph.kept >> v & 1) for v in range(size)]

    def key(v):
        d = degree[v]
        return d * (d - 1) // 2 - triangles[v] + noise * jitter[v], d, v

    heap = [key(v) for v in range(size) if alive[v]]
    heapq.heapify(heap)
    order, estimate, left = [], 0.0, len(heap)
    logs, names, push, pop = graph.log_sizes, graph.names, heapq.heappush, heapq.heappop
    while left:
        entry = pop(heap)
        v = entry[2]
        if not alive[v] or entry != key(v):  # stale: its fill changed since it was pushed
            continue
        alive[v] = False
        left -= 1
        order.append(names[v])
        near = adj[v]
        changed, width = near, logs[v]
        members = _bits(near)
        for a in members:  # the neighbours become a clique: count the triangles each new edge closes
            width += logs[a]
            missing = near & ~adj[a] & ~(1 << a) & ~((1 << a) - 1)  # new edges (a, b), b > a
            while missing:
                low = missing & -missing
                missing ^= low
                b = low.bit_length() - 1
                common = adj[a] & adj[b]
                closed = common.bit_count()
                triangles[a] += closed
                triangles[b] += closed
                while common:
                    c = common & -common
                    common ^= c
                    triangles[c.bit_length() - 1] += 1
                changed |= adj[a] & adj[b]
                adj[a] |= low
                adj[b] |= 1 << a
                degree[a] += 1
                degree[b] += 1
        estimate += 2.0**width
        gone, lost = ~(1 << v), degree[v] - 1
        for a in members:  # v leaves: its neighbours (now a clique) lose the triangles through v
            triangles[a] -= lost
            degree[a] -= 1
            adj[a] &= gone
        adj[v] = 0
        changed &= gone
        while changed:
            low = changed & -changed
            changed ^= low
            a = low.bit_length() - 1
            if alive[a]:
                push(heap, key(a))
    return order, estimate


def bucket_path(problem: Problem, order) -> list[tuple[int, int]]:
    """The linear path that eliminates ``order``'s indices in turn (each one's tensors merged pairwise,
    smallest first), then merges what is left (output indices, disconnected parts) smallest first."""
    sizes, output = problem.sizes, set(problem.output)
    tensors = [frozenset(ix) for ix in problem.inputs]
    holders: dict = {}
    for t, ix in enumerate(tensors):
        for i in ix:
            holders.setdefault(i, set()).add(t)
    numel = [math.prod(sizes[i] for i in ix) for ix in tensors]
    alive = set(range(len(tensors)))
    ssa = []

    def merge(a, b):
        new = len(tensors)
        both = tensors[a] | tensors[b]
        for i in tensors[a]:
            holders[i].discard(a)
        for i in tensors[b]:
            holders[i].discard(b)
        kept = frozenset(i for i in both if i in output or holders[i])
        for i in kept:
            holders[i].add(new)
        tensors.append(kept)
        numel.append(math.prod(sizes[i] for i in kept))
        alive.difference_update((a, b))
        alive.add(new)
        ssa.append((a, b))
        return new

    def merge_all(group):
        group = sorted(group, key=lambda t: (numel[t], t))
        while len(group) > 1:
            new = merge(group.pop(0), group.pop(0))
            group.append(new)
            group.sort(key=lambda t: (numel[t], t))

    for i in order:
        merge_all(holders.get(i, ()))
    merge_all(alive)
    return _ssa_to_linear(ssa)


def _ssa_to_linear(ssa) -> list[tuple[int, int]]:
    import opt_einsum as oe

    return [tuple(step) for step in oe.paths.ssa_to_linear(ssa)]


def eliminate(problem: Problem, draws: int, seed: int = 0) -> Found:
    """The tree of the best of ``draws`` min-fill orders (the first without noise, the others with
    ``NOISE`` and seeds ``seed + 1``, ...), best by the orders' estimates."""
    graph = IndexGraph(problem)
    best = min((min_fill_order(graph, seed + k, NOISE if k else 0.0) for k in range(max(draws, 1))),
               key=lambda drawn: drawn[1])  # fmt: skip
    return _evaluate(problem, bucket_path(problem, best[0]))


__all__ = ["IndexGraph", "min_fill_order", "bucket_path", "eliminate", "NOISE"]

"""Chains of small tensors meeting one large one, re-associated into one pass over the large one.

A contraction tree found by flops often applies gates to a large cone tensor one at a time:
``((T g1) g2) g3``. Each step is a full pass over ``T``'s 2^14-2^19 elements (read, permute, write) for a
few flops an element, and passes, not flops, are what those steps cost. Contracting the small operands
first, ``T (g1 g2 g3)``, is one pass with a wider small operand: on Q100 p=4 half of the elements the large
steps wrote came from such chains. The rewrite keeps every index the rest of the tree needs, so the result
is the same contraction; it is taken while the merged small tensor stays at most ``FUSE_MAX_ELEMENTS`` and
the fused step costs at most ``FUSE_FLOPS_RATIO`` times the flops of the steps it replaces.

>>> nodes = {3: (0, 1), 4: (3, 2)}            # (T g1) g2, T on indices a..e, g1 on (a, x), g2 on (b, y)
>>> sizes = dict.fromkeys("abcdexy", 2)
>>> indices = {0: tuple("abcde"), 1: tuple("ax"), 2: tuple("by"), 3: tuple("xbcde"), 4: tuple("xycde")}
>>> new, ix, root = fuse_chains(nodes, indices, sizes, 4, big=8)
>>> new[root], ix[new[root][1]]
((0, 5), ('a', 'x', 'b', 'y'))
"""

from __future__ import annotations

import math

FUSE_MAX_ELEMENTS = 256
"""Largest merged small operand (elements): four two-index gates. A pass with an 16x16 operand still costs
less than two passes with 2x2 ones (batched products measured here: 4.1 ns an output element at 2x2, 3.2 at
4x4, 4.8 at 8x8, one thread)."""

FUSE_FLOPS_RATIO = 2.0
"""The fused step may cost this many times the flops of the steps it replaces (they are memory bound)."""


def fuse_chains(nodes: dict, indices: dict, sizes: dict, root: int, big: int, max_small: int = FUSE_MAX_ELEMENTS):
    """``(nodes, indices, root)`` of the tree with each chain ``(T g1) g2`` (``T`` above ``big`` elements,
    ``g1``, ``g2`` at most ``max_small``) rewritten ``T (g1 g2)``. New nodes take fresh ids; the inputs keep
    theirs. The arguments are not changed."""
    nodes, indices = dict(nodes), dict(indices)
    numel = lambda t: math.prod(sizes[x] for x in indices[t])  # noqa: E731
    flops = lambda a, b: math.prod(sizes[x] for x in set(indices[a]) | set(indices[b]))  # noqa: E731
    fresh = max(max(nodes), max(indices)) + 1
    merged_nodes: set[int] = set()  # the small products made here: never the large side of a chain
    for node in _post_order(nodes, root):
        while True:
            left, right = nodes[node]
            inner, g2 = (left, right) if left in nodes and numel(right) <= max_small else (right, left)
            if inner not in nodes or inner in merged_nodes or numel(inner) <= big or numel(g2) > max_small:
                break
            a, b = nodes[inner]
            t, g1 = (a, b) if numel(b) <= max_small and numel(a) > big else (b, a)
            if numel(t) <= big or numel(g1) > max_small:
                break
            outside = set(indices[t]) | set(indices[node])
            merged = tuple(x for x in dict.fromkeys(indices[g1] + indices[g2]) if x in outside)
            if math.prod(sizes[x] for x in merged) > max_small:
                break
            indices[fresh] = merged
            before = flops(t, g1) + flops(inner, g2)
            if flops(t, fresh) > FUSE_FLOPS_RATIO * before:
                del indices[fresh]
                break
            nodes[fresh] = (g1, g2)
            merged_nodes.add(fresh)
            nodes[node] = (t, fresh)
            del nodes[inner], indices[inner]
            fresh += 1
    return nodes, indices, root


def _post_order(nodes: dict, root: int) -> list[int]:
    order, stack = [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if node not in nodes:
            continue
        if done:
            order.append(node)
            continue
        left, right = nodes[node]
        stack.extend(((node, True), (right, False), (left, False)))
    return order


__all__ = ["fuse_chains", "FUSE_MAX_ELEMENTS", "FUSE_FLOPS_RATIO"]

"""The backward of a recomputed tree within a memory target: keep what is costly to recompute, recompute the rest.

``tree_grad._RecomputedTree`` holds only its operands between the passes; its backward used to run the
forward again and keep every step's result for the reverse walk: ``plan.held_elements``, the sum of all
intermediates. On an 8x8 lattice QAOA p=4 a class's tree of 2^26-element intermediates (1 GiB each) held
2^30.5 elements (24 GiB) that way, and the step died asking for memory. Here the forward run keeps the step
results costliest to recompute per element while they fit ``budget`` elements (``kept_steps``), and frees the
others once their parent step has read them; the reverse walk recomputes a dropped value from its subtree when its parent step needs it
(reading kept values, recomputing dropped ones inside, freed as it goes) and frees every value once its
parent step is done. Peak: the kept values, the cotangents waiting for their step, and one recomputation's
working set. Cost: each dropped value once more per dropped ancestor (kept first: the large intermediates near
the root, whose subtrees hold the flops; kept smallest first instead, an 8x8 lattice p=4 backward recomputed
its spine of 1 GiB results once per level and ran for over ten minutes). The reverse walk is
``tree_grad._backward``'s (same einsum equations, same order of sums); this module gives it the values.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import _VF


class _Like:
    """A dropped value's shape and dtype: what ``tree_grad._fit`` reads of the operand it fits a cotangent to."""

    __slots__ = ("shape", "dtype")

    def __init__(self, t: torch.Tensor):
        self.shape, self.dtype = t.shape, t.dtype

    def is_complex(self) -> bool:
        return self.dtype.is_complex


def kept_steps(sizes: list[int], budget: float, costs: list[float] | None = None) -> set[int]:
    """Positions of the step results kept while their sum fits ``budget`` elements (the last step, the tree's
    result, is never read by the backward): those costliest to recompute per element first (``costs``: the
    flops of each step's whole subtree; None: smallest first). A dropped value is recomputed from its subtree
    each time an ancestor's recomputation passes through it, so the large results near the root, whose
    subtrees hold most of the flops, are the ones to keep; results near the leaves are cheap to recompute.

    >>> sorted(kept_steps([8, 1, 4, 2, 100], 7))
    [1, 2, 3]
    >>> sorted(kept_steps([8, 1, 4, 2, 100], 9, costs=[800, 1, 4, 2, 900]))
    [0, 1]
    """
    rank = (lambda s: sizes[s]) if costs is None else (lambda s: -costs[s] / max(sizes[s], 1))
    kept, total = set(), 0
    for s in sorted(range(len(sizes) - 1), key=rank):
        if total + sizes[s] <= budget:
            kept.add(s)
            total += sizes[s]
    return kept


def step_sizes(plan) -> tuple[list[int], list[float]]:
    """Elements of each step's result and flops of each step's whole subtree, in the tape's step order."""
    nodes, indices = plan.binary_tree()
    sizes = plan._sizes

    def numel(ix) -> int:
        n = 1
        for i in ix:
            n *= sizes[i]
        return n

    out, subtree = [], {}
    for node in sorted(nodes):
        left, right = nodes[node]
        args = (left,) if right == -1 else (left, right)
        touched = set(indices[node]).union(*(indices[a] for a in args))
        subtree[node] = numel(touched) + sum(subtree.get(a, 0.0) for a in args)
        out.append(numel(indices[node]))
    return out, [subtree[node] for node in sorted(nodes)]


def bounded_values(plan, tape, operands, budget: float) -> tuple[list, list, Callable[[int], torch.Tensor]]:
    """For ``tree_grad._backward``: the forward's values with only the kept step results (others None), every
    value's shape and dtype (``_Like``), and the function that recomputes a dropped value from its subtree."""
    n = tape.n_inputs
    sizes, costs = step_sizes(plan)
    kept = {n + s for s in kept_steps(sizes, budget, costs)}
    values: list = list(operands) + [None] * len(tape.steps)
    like: list = list(operands) + [None] * len(tape.steps)
    with torch.no_grad():
        for s, step in enumerate(tape.steps):
            out = _VF.einsum(step.equation, [values[a] for a in step.args])
            for a in step.args:
                if a >= n and a not in kept:
                    values[a] = None  # read by its parent, this step: not needed until the backward
            values[n + s], like[n + s] = out, _Like(out)
    values[-1] = None  # the result: the backward reads its cotangent, not its value

    def value(t: int) -> torch.Tensor:
        got = values[t]
        if got is not None:
            return got
        step = tape.steps[t - n]
        return _VF.einsum(step.equation, [value(a) for a in step.args])

    return values, like, value


__all__ = ["bounded_values", "kept_steps", "step_sizes"]

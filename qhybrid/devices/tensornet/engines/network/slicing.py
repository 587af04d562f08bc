"""Slicing a contraction path to a memory target: ``sliced_path`` sums some indices outside the contraction
(one contraction of the rest per value, each within ``max_elements``), cotengra picking the indices and, for
paths with a few slices or more, reconfiguring the sliced tree. ``ContractionPlan.contract_slices`` runs them.
"""

from __future__ import annotations

import math

from .problem import Found, Problem, _evaluate, _numel


def _with_slices(problem: Problem, path, sliced: tuple = ()) -> Found:
    """The path's cost with ``sliced`` indices summed outside it (every slice counted in ``flops``)."""
    if not sliced:
        return _evaluate(problem, path)
    rest = Problem.of([tuple(i for i in ix if i not in sliced) for ix in problem.inputs], problem.output, problem.sizes)
    inner = _evaluate(rest, path)
    slices = math.prod(problem.sizes[i] for i in sliced)
    return Found(inner.path, inner.flops * slices, inner.largest, True, inner.widest, tuple(sliced), inner.write * slices)


SLICE_RECONF_MIN_SLICES = 4
"""A sliced path gets a subtree reconfiguration of its slices (cotengra's ``slice_and_reconfigure``) when
it needs at least this many slices: fewer cost little more than the unsliced path."""

SLICE_RECONF_MAX_TENSORS = 160
"""Networks with more tensors are sliced without reconfiguration (it takes minutes on a 400-tensor cone)."""

MAX_SLICES = 1 << 12
"""A path that needs more slices than this to fit is refused instead (a sum of more contractions than
this is no longer a memory-for-time trade worth making; the caller may take another route, as the light
cones do for a Hamiltonian whose united network is too wide)."""


def sliced_path(problem: Problem, path, max_elements: float) -> Found | None:
    """The path with indices sliced until its largest intermediate has at most ``max_elements`` elements (a
    sum of ``prod(extents)`` contractions of the sliced network, each within the memory target); None
    where slicing cannot reach it (the output alone is larger). Output and lead indices are never sliced.

    >>> p = Problem.of([(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 8, 2: 8, 3: 2})
    >>> f = sliced_path(p, ((0, 1), (0, 1)), 8)
    >>> len(f.sliced) > 0, f.largest <= 8
    (True, True)
    """
    import cotengra as ctg

    if _numel(problem.output, problem.sizes) > max_elements:
        return None
    inputs, output, sizes = problem.symbolic()
    tree = ctg.ContractionTree.from_path(inputs, output, sizes, path=[list(p) for p in path])
    target = max(int(max_elements), 1)
    try:
        tree.slice_(target_size=target, allow_outer=False)
        if tree.nslices > MAX_SLICES:
            return None
        if SLICE_RECONF_MIN_SLICES <= tree.nslices and problem.n <= SLICE_RECONF_MAX_TENSORS:
            tree.slice_and_reconfigure_(target_size=target, allow_outer=False, reconf_opts={"subtree_size": 6})
    except Exception:  # noqa: BLE001 - cotengra could not reach the target: the memory guard refuses
        return None
    index = {symbol: i for symbol, i in zip(sizes, problem.sizes)}  # symbolic() keeps the extents' order
    sliced = tuple(sorted(index[symbol] for symbol in tree.sliced_inds))
    if not sliced or set(sliced) & set(problem.output):
        return None
    return _with_slices(problem, [tuple(p) for p in tree.get_path()], sliced)


__all__ = ["sliced_path", "SLICE_RECONF_MIN_SLICES", "SLICE_RECONF_MAX_TENSORS", "MAX_SLICES"]

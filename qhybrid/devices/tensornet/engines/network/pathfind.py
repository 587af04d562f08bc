"""Contraction paths within a time budget: a greedy path at once, a randomised search only where it pays.

Every network first gets cotengra's greedy path (and, for chain-like circuits, a sweep along the wires),
which costs milliseconds. What is left of the budget ``plan_time`` then goes to the networks whose
greedy path is expensive to contract, in proportion to that cost: a search that can at best save
microseconds per call is never run. Paths are remembered per network topology with the batch extent
left out, so a structure seen before at another batch size reuses its searched path when that path is
still at least as cheap as the greedy one at the new size.

>>> probs = [Problem.of([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})]
>>> find_paths(probs, "auto", plan_time=0.0)[0].path
((0, 1),)
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

import opt_einsum as oe

DEFAULT_PLAN_TIME = 1.0
"""Seconds a structure's path search may take by default (the greedy pass always runs, however short)."""

OPTIMAL_MAX_TENSORS = 6
"""Networks this small are planned exhaustively."""

SWEEP_MIN_TENSORS = 12
"""Networks at least this large also try a sweep along the wires (the better path is kept)."""

FLOP_RATE = 1e9
"""Flops per second assumed when judging whether a search pays (a modest CPU; a GPU is faster, so a search
judged worth it there is, if anything, over-generous)."""

PAYBACK_CALLS = 100
"""A network's search may take as long as this many contractions along its greedy path would."""

MIN_SEARCH_S = 0.01
"""Searches allotted less time than this are skipped (one randomised greedy trial takes about as long)."""

MAX_TRIALS = 1024
"""Upper bound on the trials of one randomised search (the time limit normally stops it first)."""

MEMO_SIZE = 4096
"""Searched paths remembered (one per network topology, batch extent left out)."""


@dataclass(frozen=True)
class Problem:
    """One network to plan: each tensor's indices, the output's, index extents, wire positions, memo key."""

    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    sizes: dict
    positions: tuple[int, ...] | None = None
    key: tuple | None = None  # topology without the varying (batch) extent; None: not memoised

    @classmethod
    def of(cls, inputs, output, sizes: dict[int, int], positions=None, vary: int | None = None) -> "Problem":
        """From index tuples; ``vary`` names an index whose extent is left out of the memo key."""
        inputs = tuple(tuple(ix) for ix in inputs)
        fixed = tuple(sorted((i, s) for i, s in sizes.items() if i != vary))
        key = (inputs, tuple(output), fixed)
        return cls(inputs, tuple(output), dict(sizes), None if positions is None else tuple(positions), key)

    @property
    def n(self) -> int:
        return len(self.inputs)

    def sets(self) -> tuple[list[frozenset], frozenset]:
        """Inputs and output as opt_einsum's path optimisers take them."""
        return [frozenset(ix) for ix in self.inputs], frozenset(self.output)


@dataclass(frozen=True)
class Found:
    path: tuple[tuple[int, ...], ...]
    flops: int
    largest: int
    searched: bool = False  # the result of a randomised search (or taken from one, via the memo)


@dataclass
class SearchStats:
    """What the planner did since the last :func:`reset_stats` (for tests and diagnostics)."""

    quick: int = 0  # networks given a greedy/sweep/optimal path
    searches: int = 0  # randomised searches run
    trials: int = 0  # trials those searches reported
    memo_hits: int = 0  # networks that took a remembered searched path
    time_limits: list[float] = field(default_factory=list)  # max_time each search optimiser was built with


STATS = SearchStats()
_MEMO: OrderedDict = OrderedDict()


def reset_stats() -> SearchStats:
    """Zero :data:`STATS` (in place) and return it."""
    STATS.__init__()
    return STATS


def clear_memo() -> None:
    _MEMO.clear()


def _evaluate(problem: Problem, path) -> Found:
    """Flops (opt_einsum's count: every index's extent, doubled where one is summed) and largest
    intermediate of a linear path; computed here because opt_einsum's ``contract_path`` spends far
    longer describing a large network's steps than finding its greedy path."""
    sizes = problem.sizes
    working, output = problem.sets()
    count: dict = {}
    for ix in working:
        for i in ix:
            count[i] = count.get(i, 0) + 1
    flops = largest = 0
    for step in path:
        taken = [working.pop(p) for p in sorted(step, reverse=True)]
        every = frozenset().union(*taken)
        for ix in taken:
            for i in ix:
                count[i] -= 1
        kept = frozenset(i for i in every if count[i] > 0 or i in output)
        for i in kept:
            count[i] += 1
        working.append(kept)
        flops += _numel(every, sizes) * (2 if len(kept) < len(every) else 1)
        largest = max(largest, _numel(kept, sizes))
    return Found(tuple(tuple(p) for p in path), flops, largest)


def _numel(ix, sizes) -> int:
    n = 1
    for i in ix:
        n *= sizes[i]
    return n


def _sweep_path(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Contract tensors one by one in order of the lowest wire they touch (ideal for chain-like circuits
    such as CNOT ladders, whose boundary stays a few bonds wide); a linear opt_einsum path."""
    order = sorted(range(len(positions)), key=lambda i: (positions[i], i))
    ssa, acc, nxt = [], order[0], len(positions)
    for t in order[1:]:
        ssa.append((acc, t))
        acc, nxt = nxt, nxt + 1
    return oe.paths.ssa_to_linear(ssa)


def _greedy(problem: Problem):
    """cotengra's greedy path: as fast as opt_einsum's, and on circuits with a batch hyperedge often ten
    to a thousand times cheaper to contract (its score does not chase the batch index)."""
    from cotengra.pathfinders.path_basic import optimize_greedy

    return optimize_greedy(list(problem.inputs), problem.output, problem.sizes)


def _better(a: Found, b: Found | None) -> bool:
    return b is None or (a.flops, a.largest) < (b.flops, b.largest)


def _quick(problem: Problem, optimizer: str) -> Found:
    """The instant path: exhaustive for tiny networks, else greedy (or the sweep, or the memo, if cheaper)."""
    STATS.quick += 1
    if problem.n == 1:
        return Found(((0,),), 0, 0)
    if optimizer == "optimal" or (optimizer == "auto" and problem.n <= OPTIMAL_MAX_TENSORS):
        return _evaluate(problem, oe.paths.optimal(*problem.sets(), problem.sizes))
    best = _evaluate(problem, _greedy(problem))
    if problem.positions is not None and problem.n >= SWEEP_MIN_TENSORS:
        sweep = _evaluate(problem, _sweep_path(problem.positions))
        if _better(sweep, best):
            best = sweep
    remembered = _MEMO.get(problem.key) if problem.key is not None else None
    if remembered is not None:
        memo = _evaluate(problem, [tuple(p) for p in remembered])
        if not _better(best, memo):  # the searched path still pays at this size: no new search needed
            STATS.memo_hits += 1
            _MEMO.move_to_end(problem.key)
            return Found(memo.path, memo.flops, memo.largest, searched=True)
    return best


def _search_optimizer(optimizer: str, seconds: float):
    """The randomised path optimiser for one search, its time limit ``seconds`` (its own trial count capped)."""
    if optimizer == "cotengra":
        import cotengra as ctg

        return ctg.HyperOptimizer(
            methods=["greedy"], max_repeats=MAX_TRIALS, max_time=seconds, parallel=False, progbar=False,
            optlib="random",
        )
    return oe.RandomGreedy(max_repeats=MAX_TRIALS, max_time=seconds)


def _trials(opt) -> int:
    costs = getattr(opt, "costs", None)  # opt_einsum's random optimisers record one cost per trial
    if costs is not None:
        return len(costs)
    return len(getattr(opt, "scores", ()))  # cotengra's HyperOptimizer


def _search(problem: Problem, optimizer: str, seconds: float) -> Found:
    opt = _search_optimizer(optimizer, seconds)
    STATS.searches += 1
    STATS.time_limits.append(seconds)
    found = _evaluate(problem, opt(*problem.sets(), problem.sizes))
    STATS.trials += _trials(opt)
    return Found(found.path, found.flops, found.largest, searched=True)


def _wanted(found: Found) -> float:
    """Seconds a search of this network may take: a hundred greedy contractions' worth."""
    if found.searched:
        return 0.0
    return PAYBACK_CALLS * found.flops / FLOP_RATE


def find_paths(problems: Sequence[Problem], optimizer: str = "auto", plan_time: float = DEFAULT_PLAN_TIME) -> list[Found]:
    """A path for each network; searches together take at most what ``plan_time`` leaves after the quick pass.

    ``optimizer``: ``"auto"`` (greedy, then opt_einsum's randomised greedy where it pays), ``"cotengra"``
    (the same with cotengra's hyper-optimiser as the search), ``"greedy"`` or ``"optimal"`` (no search).
    """
    start = time.perf_counter()
    found = [_quick(p, optimizer) for p in problems]
    if optimizer not in ("auto", "cotengra") or plan_time <= 0:
        return found
    quick_time = (time.perf_counter() - start) / max(len(problems), 1)  # about one greedy trial
    wanted = [_wanted(f) if p.n > OPTIMAL_MAX_TENSORS else 0.0 for p, f in zip(problems, found)]
    deadline = start + plan_time
    for k in sorted(range(len(problems)), key=lambda k: -wanted[k]):
        left = deadline - time.perf_counter()
        total = sum(wanted[j] for j in range(len(problems)) if wanted[j] > 0)
        if wanted[k] <= 0 or left <= 0 or total <= 0:
            break
        # a fair share of what is left, less one trial: the optimiser checks its clock between trials
        seconds = min(wanted[k], left * wanted[k] / total) - quick_time
        wanted[k] = 0.0
        if seconds < MIN_SEARCH_S:
            continue
        better = _search(problems[k], optimizer, seconds)
        if _better(better, found[k]):
            found[k] = better
        if problems[k].key is not None:  # searched: the best path known for this topology, kept or found
            _MEMO[problems[k].key] = found[k].path
            if len(_MEMO) > MEMO_SIZE:
                _MEMO.popitem(last=False)
    return found


__all__ = ["Problem", "Found", "find_paths", "DEFAULT_PLAN_TIME", "STATS", "reset_stats", "clear_memo"]

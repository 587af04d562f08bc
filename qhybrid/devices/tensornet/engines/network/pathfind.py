"""Contraction paths within a time budget: a greedy path at once, a randomised search only where it pays.

Every network first gets cotengra's greedy path (and, for chain-like circuits, a sweep along the wires),
which costs milliseconds. What is left of the budget ``plan_time`` then goes to the networks whose
greedy path is expensive to contract, in proportion to that cost: a search that can at best save
microseconds per call is never run. Paths are remembered per network topology with the batch extent
left out, so a structure seen before at another batch size is not searched again (it gets its budget
once): it takes its remembered path, or the greedy one where that is cheaper at the new size.

Networks whose quick path costs at least ``hyper.HYPER_MIN_FLOPS`` (deep light cones) get the hyper tier
first (``hyper.improve``: randomised greedy trees refined by subtree reconfiguration, whatever the
budget, then cotengra's hyper-optimiser within the network's share of ``plan_time``, in proportion to
its flops); the randomised search above then has what is left for the cheaper ones.

A path is never accepted only because the budget ran out: one whose largest intermediate is above the
memory the device allows (or whose step needs more indices than einsum has letters) gets a further
search of its own, minimising the largest intermediate (``RESCUE_TIME_S``), before the memory guard
refuses the network. With a :class:`~.path_cache.PathStore` the paths found are kept on disk by
structure: a later process takes them without planning.

>>> probs = [Problem.of([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})]
>>> find_paths(probs, "auto", plan_time=0.0)[0].path
((0, 1),)
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Sequence

import opt_einsum as oe

from . import hyper
from .eliminate import eliminate
from .hyper_tier import hyper_tier
from .path_cache import PathStore, structure_key
from .problem import FLOP_RATE, MAX_STEP_INDICES, Found, Problem, _evaluate, _numel
from .search_stats import STATS, SearchStats, reset_stats
from .slicing import _with_slices, sliced_path

DEFAULT_PLAN_TIME = 1.0
"""Seconds a structure's path search may take by default (the greedy pass always runs, however short)."""

OPTIMAL_MAX_TENSORS = 6
"""Networks this small are planned exhaustively."""

EXHAUSTIVE_MAX_TENSORS = 10
"""The most tensors ``optimizer="optimal"`` plans exhaustively (opt_einsum's search: 0.1 s at 8 tensors, 5 s at
10, a minute at 11); larger networks are refused by name rather than planned for hours."""

SWEEP_MIN_TENSORS = 12
"""Networks at least this large also try a sweep along the wires (the better path is kept)."""

PAYBACK_CALLS = 100
"""A network's search may take as long as this many contractions along its greedy path would."""

MIN_SEARCH_S = 0.01
"""Searches allotted less time than this are skipped (one randomised greedy trial takes about as long)."""

MAX_TRIALS = 1024
"""Upper bound on the trials of one randomised search (the time limit normally stops it first)."""

MEMO_SIZE = 4096
"""Searched paths remembered (one per network topology, batch extent left out)."""

QUICK_MEMO_SIZE = 1024
"""Greedy paths remembered per structure in a process (a 400-tensor cone's path is ~25 KB: 25 MB at most)."""

RESCUE_TIME_S = 10.0
"""Seconds of further search (for the narrowest path) a network gets when its best path within the budget
would not fit in memory, before it is refused."""

STORE_MIN_TENSORS = 16
"""Networks with fewer tensors are not kept on disk (their greedy path is quicker than a file read)."""


@dataclass(frozen=True)
class PathSettings:
    """How paths are found: the method (``"auto"``, ``"cotengra"``, ``"greedy"``, ``"optimal"``), the most
    elements an intermediate may have, where paths are kept on disk (None: nowhere), whether costly
    networks get the hyper tier (``hyper.improve``) and whether a path that would not fit ``max_elements``
    gets the rescue search (``RESCUE_TIME_S``); both off for networks planned only to be judged, such as
    the whole-circuit alternative to light cones, which is refused rather than rescued; ``progress``: the
    planning progress bar (``hyper_tier``).

    >>> PathSettings.of("greedy")
    PathSettings(method='greedy', max_elements=inf, store=None, hyper=True, rescue=True, progress=None)
    """

    method: str = "auto"
    max_elements: float = math.inf
    store: PathStore | None = None
    hyper: bool = True
    rescue: bool = True
    progress: bool | None = None  # the hyper tier's progress bar: None on a terminal only, True, False

    @classmethod
    def of(cls, optimizer: "str | PathSettings") -> "PathSettings":
        return optimizer if isinstance(optimizer, PathSettings) else cls(optimizer)

    @property
    def searches(self) -> bool:
        return self.method in ("auto", "cotengra")


_MEMO: OrderedDict = OrderedDict()
_QUICK: OrderedDict = OrderedDict()  # structure key -> its greedy (or sweep) path's Found, this process
_READ: OrderedDict = OrderedDict()  # (store directory, structure key) -> (file mtime, its Found), this process


def clear_memo() -> None:
    _MEMO.clear()
    _QUICK.clear()
    _READ.clear()


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
    to a thousand times cheaper to contract (its score does not chase the batch index). In Rust where
    ``cotengrust`` is installed: on the deep QAOA word networks (150 of 200-436 tensors) 6-10x faster than
    cotengra's Python greedy, and 2^0.8-2^3.9 fewer flops in total (benchmarks/results/trees.md in git history)."""
    if hyper.rust_available():
        from cotengrust import optimize_greedy as rust_greedy

        return rust_greedy(*problem.symbolic())
    from cotengra.pathfinders.path_basic import optimize_greedy

    return optimize_greedy(list(problem.inputs), problem.output, problem.sizes)


def _better(a: Found, b: Found | None, max_elements: float = math.inf) -> bool:
    """Whether ``a`` beats ``b``: a path that fits in memory beats one that does not, then fewer flops."""
    if b is None:
        return True
    return (not a.fits(max_elements), a.flops, a.largest) < (not b.fits(max_elements), b.flops, b.largest)


def _settled(found: Found) -> Found:
    return replace(found, searched=True)


def _quick(problem: Problem, optimizer: str, key: str | None = None, counted: bool = True) -> Found:
    """The instant path: exhaustive for tiny networks, else greedy (or the sweep, or the memo, if cheaper).
    ``key``: the structure key, under which the greedy/sweep path is remembered for this process (a word
    network is priced, judged and planned by separate calls: one greedy pass serves them all).
    ``counted``: whether ``STATS`` counts it (pricing does not: the plan that follows is counted)."""
    stats = STATS if counted else SearchStats()
    stats.quick += 1
    if problem.n == 1:
        return Found(((0,),), 0, 0)
    if optimizer == "optimal" and problem.n > EXHAUSTIVE_MAX_TENSORS:
        raise ValueError(
            f"optimizer='optimal' tries every contraction order, which takes minutes and more beyond "
            f"{EXHAUSTIVE_MAX_TENSORS} tensors; this circuit's network has {problem.n}. Use optimizer='auto' (greedy "
            "paths, searched within plan_time where they pay)."
        )
    if optimizer == "optimal" or (optimizer == "auto" and problem.n <= OPTIMAL_MAX_TENSORS):
        return _evaluate(problem, oe.paths.optimal(*problem.sets(), problem.sizes))
    known = _QUICK.get(key) if key is not None else None
    if known is not None:
        stats.quick_hits += 1
        _QUICK.move_to_end(key)
        best = replace(known, searched=False)
    else:
        best = _evaluate(problem, _greedy(problem))
        if problem.positions is not None and problem.n >= SWEEP_MIN_TENSORS:
            sweep = _evaluate(problem, _sweep_path(problem.positions))
            if _better(sweep, best):
                best = sweep
        if key is not None:
            _QUICK[key] = best
            if len(_QUICK) > QUICK_MEMO_SIZE:
                _QUICK.popitem(last=False)
    remembered = _MEMO.get(problem.key) if problem.key is not None else None
    if remembered is not None:  # this topology had its budget (at another batch size): no new search
        stats.memo_hits += 1
        _MEMO.move_to_end(problem.key)
        memo = _evaluate(problem, [tuple(p) for p in remembered])
        return _settled(best if _better(best, memo) else memo)
    return best


def _search_optimizer(optimizer: str, seconds: float, minimize: str = "flops"):
    """cotengra's hyper-optimiser over randomised greedy paths, its time limit ``seconds`` (its own trial
    count capped). Subtree reconfiguration is left out: on this project's gate networks it made one
    trial take about a second (overrunning short limits) and found no better path than more trials did."""
    import cotengra as ctg

    return ctg.HyperOptimizer(
        methods=["greedy"], max_repeats=MAX_TRIALS, max_time=seconds, parallel=False, progbar=False,
        optlib="random", minimize=minimize, reconf_opts=None,
    )


def _trials(opt) -> int:
    costs = getattr(opt, "costs", None)  # opt_einsum's random optimisers record one cost per trial
    if costs is not None:
        return len(costs)
    return len(getattr(opt, "scores", ()))  # cotengra's HyperOptimizer


def _search(problem: Problem, optimizer: str, seconds: float, minimize: str = "flops") -> Found:
    opt = _search_optimizer(optimizer, seconds, minimize=minimize)
    STATS.searches += 1
    STATS.time_limits.append(seconds)
    found = _evaluate(problem, opt(*problem.symbolic()))
    STATS.trials += _trials(opt)
    return _settled(found)


def _wanted(found: Found) -> float:
    """Seconds a search of this network may take: a hundred greedy contractions' worth."""
    if found.searched:
        return 0.0
    return PAYBACK_CALLS * found.flops / FLOP_RATE


def _from_store(problems: Sequence[Problem], keys: Sequence[str], store: PathStore | None) -> list[Found | None]:
    found: list[Found | None] = [None] * len(problems)
    if store is None:
        return found
    for k, (p, key) in enumerate(zip(problems, keys)):
        if p.n >= STORE_MIN_TENSORS:
            hit = _stored(p, key, store)
            if hit is not None:
                STATS.disk_hits += 1
                found[k] = hit
    return found


def _stored(problem: Problem, key: str | None, store: PathStore) -> Found | None:
    """The store's path for ``problem`` as a Found, read once per process while its file is unchanged
    (an engine choice prices a class by it, then the class's plan takes it: one read, one evaluation)."""
    key = key or structure_key(problem.inputs, problem.output, problem.sizes)
    try:
        stamp = store._file(key).stat().st_mtime_ns
    except OSError:
        return None
    memo = _READ.get((str(store.directory), key))
    if memo is not None and memo[0] == stamp:
        return memo[1]
    hit = store.load(problem.inputs, problem.output, problem.sizes, key=key)
    if hit is None:
        return None
    found = replace(_with_slices(problem, hit.path, hit.sliced), searched=hit.searched)
    _READ[(str(store.directory), key)] = (stamp, found)
    if len(_READ) > QUICK_MEMO_SIZE:
        _READ.popitem(last=False)
    return found


def priced_paths(problems: Sequence[Problem], store: PathStore | None) -> list[Found]:
    """Paths to price networks by (an engine choice): the store's (planned before, here or in an earlier
    process), else the greedy path (remembered for the planning that follows) or, where that costs the hyper
    tier's threshold or more, one min-fill order's tree if cheaper (milliseconds; priced by greedy trees 2^11
    too high, 8x8 lattice p=4 cone classes chose 25-wire state vectors). Nothing searched or written."""
    out = []
    for p in problems:  # (not counted in STATS: the plan that follows takes the same entry and counts it)
        key = structure_key(p.inputs, p.output, p.sizes)
        stored = _stored(p, key, store) if store is not None and p.n >= STORE_MIN_TENSORS else None
        if stored is None:
            stored = _quick(p, "greedy", key, counted=False)
            if stored.flops >= hyper.HYPER_MIN_FLOPS:
                ordered = eliminate(p, 1)
                stored = ordered if ordered.flops < stored.flops else stored
        out.append(stored)
    return out


def _budgeted_search(problems, found: list[Found], optimizer: str, plan_time: float, start: float, max_elements):
    """Search, within what ``plan_time`` leaves, the networks whose paths are costly, costliest first."""
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
        if _better(better, found[k], max_elements):  # (_find settles every path afterwards)
            found[k] = better


def _hyper_tier(problems: Sequence[Problem], found: list[Found], plan_time: float, settings: PathSettings) -> None:
    """Networks whose path costs at least ``hyper.HYPER_MIN_FLOPS`` and is not settled: each gets
    ``hyper.improve``'s trees whatever the budget (a path far above the best is never kept for want of time),
    and its deep search within its share of ``plan_time``, in proportion to its path's flops (the time goes
    where the flops are); spread over the process's cores, with a progress bar (``hyper_tier``)."""
    picked = [
        k for k, (p, f) in enumerate(zip(problems, found))
        if not f.searched and p.n > OPTIMAL_MAX_TENSORS and f.flops >= hyper.HYPER_MIN_FLOPS
    ]  # fmt: skip
    began = time.perf_counter()
    STATS.hyper += hyper_tier(problems, found, picked, plan_time, settings.max_elements, settings.progress)
    STATS.hyper_seconds += time.perf_counter() - began


def _rescue(problem: Problem, found: Found, optimizer: str, max_elements: float) -> Found:
    """A path that would not fit in memory: search further, for the smallest largest intermediate; if that
    still does not fit, slice the best path to ``max_elements`` (cotengra picks the indices)."""
    STATS.rescues += 1
    narrow = _search(problem, optimizer, RESCUE_TIME_S, minimize="size")
    best = narrow if _better(narrow, found, max_elements) else found
    if best.fits(max_elements) or not math.isfinite(max_elements):
        return best
    sliced = sliced_path(problem, best.path, max_elements)
    return best if sliced is None else sliced


def find_paths(
    problems: Sequence[Problem], optimizer: "str | PathSettings" = "auto", plan_time: float = DEFAULT_PLAN_TIME
) -> list[Found]:
    """A path for each network; searches together take at most what ``plan_time`` leaves after the quick pass
    (plus, for a network whose best path would not fit in ``max_elements``, up to ``RESCUE_TIME_S``).

    ``optimizer``: a method name or :class:`PathSettings`. ``"auto"`` (greedy, then cotengra's
    hyper-optimiser over randomised greedy paths where it pays), ``"cotengra"`` (the same),
    ``"greedy"`` or ``"optimal"`` (no search); paths in the settings' store are taken as they are.
    """
    settings = PathSettings.of(optimizer)
    # networks equal up to the numbering of their indices (isomorphic light cones, say) are planned once
    keys = [structure_key(p.inputs, p.output, p.sizes) for p in problems]
    slot: dict[str, int] = {}
    distinct = []
    for problem, key in zip(problems, keys):
        if key not in slot:
            slot[key] = len(slot)
            distinct.append(problem)
    STATS.shared += len(problems) - len(distinct)
    found = _find(distinct, list(slot), settings, plan_time)
    return [found[slot[key]] for key in keys]


def _find(problems: Sequence[Problem], keys: Sequence[str], settings: PathSettings, plan_time: float) -> list[Found]:
    method, limit = settings.method, settings.max_elements
    start = time.perf_counter()
    stored = _from_store(problems, keys, settings.store)
    found = [s if s is not None else _quick(p, method, key) for p, s, key in zip(problems, stored, keys)]
    # a network whose output alone exceeds the memory is refused whatever its path: no search for it (probs() of
    # 100 wires searched for minutes before its refusal)
    hopeless = {k for k, p in enumerate(problems) if _numel(p.output, p.sizes) > limit}
    if settings.searches and plan_time > 0 and len(hopeless) < len(problems):
        hopeful = [k for k in range(len(problems)) if k not in hopeless]
        some = [problems[k] for k in hopeful]
        picked = [found[k] for k in hopeful]
        if settings.hyper:
            _hyper_tier(some, picked, plan_time, settings)
        _budgeted_search(some, picked, method, plan_time, start, limit)
        for j, p in enumerate(some):
            if settings.rescue and not picked[j].fits(limit) and p.n > OPTIMAL_MAX_TENSORS:
                picked[j] = _rescue(p, picked[j], method, limit)
        for k, f in zip(hopeful, picked):
            found[k] = f
        # each structure gets its planning budget once, across batch sizes and processes: what it found is
        # final (remembered for other batch sizes; kept on disk)
        found = [_settled(f) for f in found]
        for p, f in zip(problems, found):
            if p.key is not None and p.n > OPTIMAL_MAX_TENSORS:
                _MEMO[p.key] = f.path
                _MEMO.move_to_end(p.key)
                if len(_MEMO) > MEMO_SIZE:
                    _MEMO.popitem(last=False)
    if settings.store is not None:
        for p, key, s, f in zip(problems, keys, stored, found):
            if p.n >= STORE_MIN_TENSORS and (s is None or (s.path, s.searched, s.sliced) != (f.path, f.searched, f.sliced)):
                settings.store.save(p.inputs, p.output, p.sizes, f.path, f.searched, key=key, sliced=f.sliced)
                STATS.disk_writes += 1
    return found


__all__ = [
    "Problem", "Found", "PathSettings", "find_paths", "priced_paths", "DEFAULT_PLAN_TIME", "STATS", "reset_stats", "clear_memo",
]  # fmt: skip

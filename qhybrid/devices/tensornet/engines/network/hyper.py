"""The hyper tier of the path search: contraction trees worth having for networks whose greedy path is costly.

cotengra's plain greedy path can be many powers of two above the best known tree of a deep light cone (a
Q100 QAOA p=4 cone of ~400 tensors: 2^33-2^38 flops greedy against 2^23-2^25 here). A network whose
quick path costs at least ``HYPER_MIN_FLOPS`` gets, however little of the planning budget is left:

1. min-fill elimination orders of its index graph (``eliminate``; QTensor's way with diagonal gates as
   hyperedges): batches of ``DRAW_BATCH`` draws, the first without noise, while the draws stay within
   ``PAYBACK_CALLS`` contractions along the best estimate so far (at most ``MAX_DRAWS``); the best
   order becomes a tree;
2. subtree reconfiguration of that tree (``ContractionTree.subtree_reconfigure_`` with ``RECONF_OPTS``:
   the costliest subtrees of 8 leaves re-planned optimally) where it pays back the same way;
3. rounds of randomised greedy trees (cotengra's ``RandomGreedyOptimizer``, in Rust with ``cotengrust``)
   with the same reconfiguration, new seeds each round, while the work so far stays within the payback
   (at most ``MAX_ROUNDS``): networks that elimination does not suit (dense gate tensors) get them, the
   QAOA cones do not need them;
4. where the tree still costs ``PARTITION_MIN_FLOPS`` or more (2D lattice cones at p=4), cotengra's
   ``HyperOptimizer`` over partitioned trees, trials counted by the same payback (``partition_search``, one search per seed).

The payback counts nominal seconds (``DRAW_SECONDS_PER_INDEX``, ``RECONF_SECONDS_PER_TENSOR``,
``ROUND_SECONDS_PER_TENSOR``), not the clock: how many draws and rounds a structure gets depends on its
structure alone, so its tree is the same in every process, whatever the load.

Measured on Q100 p=4's 119 costly cone classes (one thread, load 2-3; results/trees2.md in git history): steps
1-3 2^27.7 flops in total in 12 s, where the randomised greedy rounds before them gave 2^29.7 in 169 s;
L8p3's 12 costly classes 2^24.6 in 1.1 s against 2^26.5 in 12 s. cotengra's ``HyperOptimizer`` with reconfiguration after
every trial took 20-90 s a cone for the same or worse, and kahypar partitions were worse than greedy on
these hyperedge networks. So the full ``HyperOptimizer`` (greedy trials, plus kahypar, or labels where
kahypar is not installed, the same reconfiguration after each trial) runs only on what a network's share
of the budget leaves after steps 1-3, and only when that is at least ``DEEP_MIN_S``; partitioned trees
join only from ``PARTITION_MIN_S``. The better tree is kept; slicing to the memory target follows in
``slicing`` (``sliced_path``, cotengra's ``slice_and_reconfigure_``).

>>> from .problem import Problem
>>> ring = Problem.of([(i, (i + 1) % 12) for i in range(12)], (), {i: 4 for i in range(12)})
>>> improve(ring, 0.0).flops <= _evaluate(ring, [(0, 1)] * 11).flops
True
"""

from __future__ import annotations

import importlib.util
import math
import random
import time
from dataclasses import replace

from . import partition
from .eliminate import NOISE, IndexGraph, bucket_path, min_fill_order
from .problem import COMBO, FLOP_RATE, Found, Problem, _evaluate

HYPER_MIN_FLOPS = 1 << 22
"""Networks whose quick path costs at least this many flops (~4 ms a contraction at 1 GFLOP/s) get the
hyper tier: a few elimination draws (~10 ms each on a 400-tensor cone) pay back within a few calls. Was
2^24 with the randomised greedy rounds (0.3-0.6 s a cone); Q100 p=4's 30 classes below 2^24 then kept
greedy trees of 2^27.4 flops in total."""

PAYBACK_CALLS = 30
"""Steps 1-3 go on while their nominal time stays below this many contractions along the best tree so
far (at ``problem.FLOP_RATE``). On Q100 p=4's 119 costly cones: 10 calls 2^28.03 flops in total in 9.2 s,
30 calls 2^27.67 in 11.6 s, 60 calls 2^27.61 in 18.5 s (load 2-3): the first step's planning is what the
issue's targets bind."""

DRAW_BATCH = 4
"""Elimination orders drawn between two payback checks."""

MAX_DRAWS = 64
"""Most elimination orders for one network."""

ESTIMATE_FLOPS = 1.5
"""A min-fill order's estimate (``eliminate.min_fill_order``) times this is about its tree's flops (measured
1.3-1.9x on Q100 p=4 cones): the payback of the draws reads it."""

DRAW_SECONDS_PER_INDEX = 6e-5
"""Nominal seconds of one elimination draw per index (a 190-index Q100 p=4 cone: 8-12 ms, one thread)."""

RECONF_OPTS = {"subtree_size": 8, "maxiter": 16}
"""Subtree reconfiguration of step 2 (and of each round of step 3): the 16 costliest subtrees of 8 leaves
re-planned optimally, ~50 ms on a 400-tensor cone. On Q100 p=4's 20 costliest cones after 8 draws:
2^27.03 -> 2^26.74 flops in total (64 subtrees: 2^26.81 -> ... for 3x the time)."""

RECONF_SECONDS_PER_TENSOR = 1.2e-4
"""Nominal seconds of step 2 per tensor (~50 ms for a 400-tensor cone)."""

ROUND_SECONDS_PER_TENSOR = 1.5e-3
"""Nominal seconds of one round of step 3 per tensor (32 Rust greedy trials and a reconfiguration of a
400-tensor cone: ~0.6 s)."""

RANDOM_GREEDY_TRIALS = 32
"""Randomised greedy trials a round of step 3 with cotengra's Rust backend (``cotengrust``)."""

PYTHON_GREEDY_TRIALS = 4
"""Trials a round without ``cotengrust`` (each is a pure-Python greedy pass, tens of times slower)."""

MAX_ROUNDS = 16
"""Most rounds of step 3 for one network (the payback rule normally stops them first)."""

DEEP_MIN_S = 0.5
"""A network's budget share must leave at least this many seconds after steps 1-3 for cotengra's
``HyperOptimizer`` to run (one greedy trial with its reconfiguration: 0.2-0.4 s on a 400-tensor cone)."""

PARTITION_MIN_S = 30.0
"""The deep search also tries partitioned trees (kahypar, or cotengra's ``labels``) only on a share this
long: on Q100 p=4 cones a kahypar trial took 1-5 s and, within 3 s, gave 2^24-2^52 flops where greedy
trials with reconfiguration gave 2^22-2^26 (and the trials' split between methods halves the greedy ones)."""

DEEP_MAX_REPEATS = 64
"""Trial cap of the deep search (its time limit normally stops it first)."""

PARTITION_MIN_FLOPS = float(1 << 30)
"""A network whose tree after steps 1-3 still costs this much (a second or more a contraction) gets step 4:
cotengra's ``HyperOptimizer`` over partitioned trees (kahypar, else ``labels``), each trial reconfigured, trials
counted by the payback rule. On the costliest classes of an 8x8 lattice QAOA p=4 (2026-11-26, load 3-40) steps 1-3
left 2^35.4 / 2^33.7 flops, where this step found 2^33.7 / 2^32.7 (32 trials offline: 2^30.8 on the first; about
3 s a trial); random partition parameters without the optimiser's guidance gave 2^33.5-2^86, so the trials go
through ``HyperOptimizer``."""

PARTITION_SECONDS_PER_TENSOR = 3.5e-3
"""Nominal seconds of one step-4 trial per tensor: kahypar with its reconfiguration took 1.3-1.8 s a trial on the
8x8 p=4 cones of 424-518 tensors (64 trials in 83-115 s, one thread, 2026-11-27)."""

MAX_PARTITION_TRIALS = 64
"""Most step-4 trials of one network in each of its searches (``PARTITION_SEEDS``). The sampler first settles
after 16-32 trials and finds the cheaper trees after 32 (L8p4's costliest classes, seeded, best after 32 / 64
trials: 2^32.7 / 2^31.7 flops on three classes that steps 1-3 left at 2^33.7-2^34.3; 2^32.7 / 2^32.2 on a fourth;
2^29.9 / 2^29.7 on a 2^30.9 class); 32 unseeded trials had left them at 2^33.7-2^35.7, sliced 2-32 times."""

PARTITION_SEEDS = (0, 1)
"""Step 4 runs one seeded search per seed here and keeps the best tree. A seed goes to cotengra's sampler
(``PARTITION_OPTLIB``), through ``constants`` to every trial's partitioner, and to Python's global ``random``
for the search (the trials read it too), so the tree is the same in every process. Which seed matters more than
the trial count: 64 trials on L8p4's costliest class gave 2^31.7 flops with seeds 0 and 1 and no gain
(2^33.9-2^34.0) with seeds 2 and 7; seed 7 improved one of six costly classes, seed 0 all six, seed 1 was the
better of the two on two of them (2^31.0 / 2^31.8 where seed 0 gave 2^31.7 / 2^32.2). Two searches halve the
chance that a class keeps its steps-1-3 tree (2026-11-27). A third search (seeds 0-2, 53 trials each on the
three costliest L8p4 classes, 37 on the fourth, instead of 64 / 56) gained nothing on two and lost half a power
of two on the fourth (2^32.3 -> 2^32.8 flops): not taken (2026-11-28)."""

PARTITION_OPTLIB = "sbplx"
"""The ``HyperOptimizer``'s sampler for step 4, named rather than cotengra's default (which depends on what else
is installed: optuna, cmaes), so a seed means the same search in every environment."""

SEED = 7
"""Fixed seed: the same structure gets the same tree in every process."""


def rust_available() -> bool:
    """Whether cotengra's Rust backend (``cotengrust``) is installed (step 3 then runs many more trials)."""
    return importlib.util.find_spec("cotengrust") is not None


def partitioner() -> str:
    """The cotengra method of the partitioned trees (step 4, and the deep search): kahypar where it is installed,
    with fewer initial partitioning runs than cotengra's profiles (``partition.METHOD``, ~2.3x cheaper trials),
    else cotengra's own label propagation (``"labels"``, pure Python)."""
    try:
        import kahypar  # noqa: F401
    except ImportError:
        return "labels"
    return partition.register()


def deep_methods(seconds: float = PARTITION_MIN_S) -> list[str]:
    """cotengra ``HyperOptimizer`` methods of a deep search of ``seconds``: greedy trees, and partitioned ones
    from ``PARTITION_MIN_S`` on."""
    return ["greedy", partitioner()] if seconds >= PARTITION_MIN_S else ["greedy"]


def improve(problem: Problem, seconds: float, start: Found | None = None, max_elements: float = math.inf) -> Found:
    """The best of ``start`` (the quick path; None: none), steps 1-3 (always run, within their payback), step 4's
    seeded searches where the tree is still costly, and, where ``seconds`` leaves at least ``DEEP_MIN_S`` after
    them, cotengra's ``HyperOptimizer`` for the rest of ``seconds``. Best: within ``max_elements`` first, then
    fewer flops. The result is marked searched (settled). ``head``, ``partition_search`` and ``finish`` are its
    parts, which ``hyper_tier`` runs in separate workers (the same tree)."""
    began = time.perf_counter()
    best, trials = head(problem, start, max_elements)
    for seed in PARTITION_SEEDS if trials else ():
        best = better(best, partition_search(problem, trials, seed, max_elements), max_elements)
    return finish(problem, best, seconds - (time.perf_counter() - began), max_elements)


def head(problem: Problem, start: Found | None, max_elements: float) -> tuple[Found, int]:
    """Steps 1-3 from ``start``, and the trials each of step 4's seeded searches gets (0: no step 4)."""
    best, spent = _eliminated(problem, start, max_elements)
    best, spent = _greedy_rounds(problem, best, spent, max_elements)
    return best, _partition_trials(problem, best, spent)


def finish(problem: Problem, best: Found, left: float, max_elements: float) -> Found:
    """``best``, or the deep search's tree where ``left`` seconds allow it and it is better; marked searched."""
    import cotengra as ctg

    if left >= DEEP_MIN_S:
        inputs, output, sizes = problem.symbolic()
        opt = ctg.HyperOptimizer(
            methods=deep_methods(left), max_repeats=DEEP_MAX_REPEATS, max_time=left, parallel=False, minimize=COMBO, reconf_opts=dict(RECONF_OPTS), progbar=False, on_trial_error="ignore",
        )  # fmt: skip
        try:
            best = _keep(problem, opt.search(inputs, output, sizes), best, max_elements)
        except (KeyError, ValueError):  # every trial failed (cotengra then has no best tree): keep steps 1-4
            pass
    return replace(best, searched=True)


def better(best: Found, other: Found | None, max_elements: float) -> Found:
    """``other`` where it ranks before ``best`` (within ``max_elements`` first, then cost, then largest), else
    ``best``: step 4's searches are merged in seed order with this, so their order of completion does not matter."""
    return other if other is not None and _rank(other, max_elements) < _rank(best, max_elements) else best


def _pays(spent: float, flops: float) -> bool:
    return spent < PAYBACK_CALLS * flops / FLOP_RATE


def _eliminated(problem: Problem, best: Found | None, max_elements: float) -> tuple[Found, float]:
    """Steps 1-2: the best of ``best`` and the reconfigured tree of the best elimination order drawn
    while they pay (leaving room for the reconfiguration, which runs where it pays alone); and the
    nominal seconds spent."""
    graph = IndexGraph(problem)
    draw_s = DRAW_SECONDS_PER_INDEX * max(len(graph.names), 1)
    reconf_s = RECONF_SECONDS_PER_TENSOR * problem.n
    order, estimate, spent, drawn = None, math.inf, 0.0, 0
    while drawn < MAX_DRAWS:
        for k in range(drawn, drawn + DRAW_BATCH):
            got, cost = min_fill_order(graph, SEED + k, NOISE if k else 0.0)
            if cost < estimate:
                order, estimate = got, cost
        drawn += DRAW_BATCH
        spent += DRAW_BATCH * draw_s
        if not _pays(spent + reconf_s, ESTIMATE_FLOPS * estimate):
            break
    tree = _evaluate(problem, bucket_path(problem, order))
    if _pays(reconf_s, tree.flops):
        spent += reconf_s
        tree = _reconfigured(problem, tree, max_elements)
    return (tree if best is None or _rank(tree, max_elements) < _rank(best, max_elements) else best), spent


def _reconfigured(problem: Problem, found: Found, max_elements: float) -> Found:
    import cotengra as ctg

    inputs, output, sizes = problem.symbolic()
    tree = ctg.ContractionTree.from_path(inputs, output, sizes, path=[list(step) for step in found.path])
    tree.subtree_reconfigure_(minimize=COMBO, seed=SEED, **RECONF_OPTS)
    return _keep(problem, tree, found, max_elements)


def _greedy_rounds(problem: Problem, best: Found, spent: float, max_elements: float) -> tuple[Found, float]:
    """Step 3: randomised greedy trees with their reconfiguration, a new seed each round, while they pay."""
    from cotengra.pathfinders.path_basic import RandomGreedyOptimizer

    inputs, output, sizes = problem.symbolic()
    trials = RANDOM_GREEDY_TRIALS if rust_available() else PYTHON_GREEDY_TRIALS
    round_s = ROUND_SECONDS_PER_TENSOR * problem.n
    for draw in range(MAX_ROUNDS):
        if not _pays(spent + round_s, best.flops):
            break
        spent += round_s
        tree = RandomGreedyOptimizer(max_repeats=trials, seed=SEED + draw, parallel=False).search(inputs, output, sizes)
        tree.subtree_reconfigure_(minimize=COMBO, seed=SEED + draw, **RECONF_OPTS)
        best = _keep(problem, tree, best, max_elements)
    return best, spent


def _partition_trials(problem: Problem, best: Found, spent: float) -> int:
    """Step 4's trials per seeded search: none below ``PARTITION_MIN_FLOPS``, else as many as pay (every
    search's trial counted) up to ``MAX_PARTITION_TRIALS``."""
    if best.flops < PARTITION_MIN_FLOPS:
        return 0
    trial_s = PARTITION_SECONDS_PER_TENSOR * problem.n * len(PARTITION_SEEDS)  # a trial in every search
    trials = 0
    while trials < MAX_PARTITION_TRIALS and _pays(spent + (trials + 1) * trial_s, best.flops):
        trials += 1
    return trials


def partition_search(problem: Problem, trials: int, seed: int, max_elements: float) -> Found | None:
    """Step 4's search for ``seed``: cotengra's ``HyperOptimizer`` over ``trials`` partitioned trees (the
    partitioner seeded too), its best tree (None where every trial failed). Its trials also draw from Python's
    global ``random`` (seeded from the OS in each process): it is seeded here for the search and given back after,
    so a seed's tree is the same in every process (a 20-tensor network, seed 2, three trials: three calls in one
    process gave three trees before)."""
    import cotengra as ctg

    inputs, output, sizes = problem.symbolic()
    method = partitioner()
    state = random.getstate()  # the caller's, given back below
    random.seed(SEED + seed)
    opt = ctg.HyperOptimizer(
        methods=[method], max_repeats=trials, parallel=False, minimize=COMBO, reconf_opts=dict(RECONF_OPTS),
        optlib=PARTITION_OPTLIB, seed=seed, constants={method: {"seed": seed}}, progbar=False, on_trial_error="ignore",
    )  # fmt: skip
    try:
        return _keep(problem, opt.search(inputs, output, sizes), None, max_elements)
    except (KeyError, ValueError):  # every trial failed: nothing from this search
        return None
    finally:
        random.setstate(state)


def _keep(problem: Problem, tree, best: Found | None, max_elements: float) -> Found:
    """The better of ``best`` and cotengra's ``tree`` (as a Found): within ``max_elements`` first, then the
    lower cost (flops and writes, ``Found.cost``), then a smaller largest intermediate."""
    found = _evaluate(problem, [tuple(step) for step in tree.get_path()])
    if best is None or _rank(found, max_elements) < _rank(best, max_elements):
        return found
    return best


def _rank(found: Found, max_elements: float) -> tuple:
    return not found.fits(max_elements), found.cost, found.largest


__all__ = ["improve", "head", "partition_search", "finish", "better", "partitioner", "deep_methods", "rust_available", "HYPER_MIN_FLOPS", "RECONF_OPTS", "MAX_ROUNDS",
           "PAYBACK_CALLS", "MAX_DRAWS"]

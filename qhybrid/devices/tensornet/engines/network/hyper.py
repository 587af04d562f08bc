"""The hyper tier of the path search: contraction trees worth having for networks whose greedy path is costly.

cotengra's plain greedy path can be many powers of two above the best known tree of a deep light cone (a
Q100 QAOA p=4 cone of ~400 tensors: 2^38 flops greedy against 2^25 after this tier). A network whose
quick path costs at least ``HYPER_MIN_FLOPS`` gets, however little of the planning budget is left:

1. a batch of ``RANDOM_GREEDY_TRIALS`` randomised greedy trees (cotengra's ``RandomGreedyOptimizer``; in
   Rust when ``cotengrust`` is installed, ~0.1 s for 32 trials of a 400-tensor cone), then
2. subtree reconfiguration of the best one (``ContractionTree.subtree_reconfigure_`` with
   ``RECONF_OPTS``: every subtree of 8 leaves re-planned optimally, 64 of them, the costliest first);
3. rounds of 1-2 again with new seeds, the best tree kept, while the time spent stays below what
   ``ROUND_PAYBACK_CALLS`` contractions along the best tree so far would take (at most ``MAX_ROUNDS``):
   the batch whose best tree reconfigures best is a lottery (one seed's tree of a Q100 p=4 cone reached
   2^30.5 flops, another's 2^23.3), so a costly tree buys more draws and a cheap one stops after one.
   On the eight costliest Q100 p=4 cones: 2^30.8 -> 2^26.7 flops in total for 3.9 -> 16 s; on the 15 8x8
   lattice p=3 classes 2^27.9 -> 2^26.8 (load 4-11; benchmarks/results/trees.md). Larger subtrees (10
   leaves, 128 of them) cost 5x a round for less than a second seed gives.

Measured on the Q100 p=4 cones (loaded 2-core machine): steps 1+2 take 0.3-0.5 s and reach 2^25.2 / 2^19.3 /
2^20.4 flops where greedy gave 2^38.0 / 2^33.5 / 2^28.8; cotengra's ``HyperOptimizer`` with reconfiguration
after every trial took 20-90 s for the same or worse (2^24.3-2^25.6), and kahypar partitions were worse
than random greedy on these hyperedge networks (2^30.7 before reconfiguration). So the full
``HyperOptimizer`` (greedy trials, plus kahypar, or labels where kahypar is not installed, the same
reconfiguration after each trial) runs only on what a network's share of the budget leaves after steps
1-3, and only when that is at least ``DEEP_MIN_S``; partitioned trees join only from ``PARTITION_MIN_S``.
The better tree is kept; slicing to the memory target
follows in ``slicing`` (``sliced_path``, cotengra's ``slice_and_reconfigure_``).

>>> from .problem import Problem
>>> ring = Problem.of([(i, (i + 1) % 12) for i in range(12)], (), {i: 4 for i in range(12)})
>>> improve(ring, 0.0).flops <= _evaluate(ring, [(0, 1)] * 11).flops
True
"""

from __future__ import annotations

import importlib.util
import math
import time

from .problem import FLOP_RATE, Found, Problem, _evaluate

HYPER_MIN_FLOPS = 1 << 24
"""Networks whose quick path costs at least this many flops (~17 ms a contraction at 1 GFLOP/s) get the
hyper tier: its 0.1-0.5 s pays back within a few dozen calls, and a cheaper network's greedy path is close
enough to its best."""

RANDOM_GREEDY_TRIALS = 32
"""Randomised greedy trials in step 1 with cotengra's Rust backend (``cotengrust``)."""

PYTHON_GREEDY_TRIALS = 4
"""Trials in step 1 without ``cotengrust`` (each is a pure-Python greedy pass, tens of times slower)."""

RECONF_OPTS = {"subtree_size": 8, "maxiter": 64}
"""Subtree reconfiguration of step 2 (and of each trial of the deep search): subtrees of 8 leaves re-planned
optimally, the 64 costliest. On Q100 p=4 cones: 2^29.4 -> 2^25.2 flops in 0.3 s; cotengra's default (up to
1024 subtrees) reached the same in 1.5 s, subtrees of 10 leaves 2^24.5 in 1.9 s."""

ROUND_PAYBACK_CALLS = 100
"""Rounds of steps 1-2 go on while the time spent is below this many contractions along the best tree so
far (at ``problem.FLOP_RATE``): the planning pays back within about as many calls as a step's costliest trees."""

MAX_ROUNDS = 16
"""Most rounds of steps 1-2 for one network (the payback rule normally stops them first)."""

DEEP_MIN_S = 0.5
"""A network's budget share must leave at least this many seconds after steps 1-3 for cotengra's
``HyperOptimizer`` to run (one greedy trial with its reconfiguration: 0.2-0.4 s on a 400-tensor cone)."""

PARTITION_MIN_S = 30.0
"""The deep search also tries partitioned trees (kahypar, or cotengra's ``labels``) only on a share this
long: on Q100 p=4 cones a kahypar trial took 1-5 s and, within 3 s, gave 2^24-2^52 flops where greedy
trials with reconfiguration gave 2^22-2^26 (and the trials' split between methods halves the greedy ones)."""

DEEP_MAX_REPEATS = 64
"""Trial cap of the deep search (its time limit normally stops it first)."""

SEED = 7
"""Fixed seed: the same structure gets the same tree in every process."""


def rust_available() -> bool:
    """Whether cotengra's Rust backend (``cotengrust``) is installed (step 1 then runs many more trials)."""
    return importlib.util.find_spec("cotengrust") is not None


def partitioner() -> str:
    """The hypergraph partitioner the deep search uses: kahypar where it is installed, else cotengra's own
    label propagation (``"labels"``, pure Python)."""
    try:
        import kahypar  # noqa: F401
    except ImportError:
        return "labels"
    return "kahypar"


def deep_methods(seconds: float = PARTITION_MIN_S) -> list[str]:
    """cotengra ``HyperOptimizer`` methods of a deep search of ``seconds``: greedy trees, and partitioned ones
    from ``PARTITION_MIN_S`` on."""
    return ["greedy", partitioner()] if seconds >= PARTITION_MIN_S else ["greedy"]


def improve(problem: Problem, seconds: float, start: Found | None = None, max_elements: float = math.inf) -> Found:
    """The best of ``start`` (the quick path; None: none), steps 1-3 (always run), and, where ``seconds``
    leaves at least ``DEEP_MIN_S`` after them, cotengra's ``HyperOptimizer`` for the rest of ``seconds``.
    Best: within ``max_elements`` first, then fewer flops. The result is marked searched (settled)."""
    import cotengra as ctg
    from cotengra.pathfinders.path_basic import RandomGreedyOptimizer

    began = time.perf_counter()
    inputs, output, sizes = problem.symbolic()
    best = start
    trials = RANDOM_GREEDY_TRIALS if rust_available() else PYTHON_GREEDY_TRIALS
    for draw in range(MAX_ROUNDS):
        tree = RandomGreedyOptimizer(max_repeats=trials, seed=SEED + draw, parallel=False).search(inputs, output, sizes)
        tree.subtree_reconfigure_(minimize="flops", seed=SEED + draw, **RECONF_OPTS)
        best = _keep(problem, tree, best, max_elements)
        if time.perf_counter() - began >= ROUND_PAYBACK_CALLS * best.flops / FLOP_RATE:
            break
    left = seconds - (time.perf_counter() - began)
    if left >= DEEP_MIN_S:
        opt = ctg.HyperOptimizer(
            methods=deep_methods(left), max_repeats=DEEP_MAX_REPEATS, max_time=left, parallel=False, minimize="flops", reconf_opts=dict(RECONF_OPTS), progbar=False, on_trial_error="ignore",
        )  # fmt: skip
        try:
            best = _keep(problem, opt.search(inputs, output, sizes), best, max_elements)
        except (KeyError, ValueError):  # every trial failed (cotengra then has no best tree): keep steps 1-3
            pass
    return Found(best.path, best.flops, best.largest, True, best.widest, best.sliced)


def _keep(problem: Problem, tree, best: Found | None, max_elements: float) -> Found:
    """The better of ``best`` and cotengra's ``tree`` (as a Found): within ``max_elements`` first, then fewer
    flops, then a smaller largest intermediate."""
    found = _evaluate(problem, [tuple(step) for step in tree.get_path()])
    if best is None or _rank(found, max_elements) < _rank(best, max_elements):
        return found
    return best


def _rank(found: Found, max_elements: float) -> tuple:
    return not found.fits(max_elements), found.flops, found.largest


__all__ = ["improve", "partitioner", "deep_methods", "rust_available", "HYPER_MIN_FLOPS", "RECONF_OPTS", "MAX_ROUNDS"]

"""The hyper tier over the process's cores, and a progress display for planning that takes a while.

``hyper.improve`` runs once per costly network (a deep light-cone class, say). Its result depends on the
network alone (seeded draws, trial counts set by the payback rule, not the clock), so the networks can be
planned in any order, in any process: here they are spread over worker processes (one per core the process may
use, ``os.sched_getaffinity``), costliest first, each network's step-4 searches (one per seed) as tasks of their
own, and the trees are the same as planned one by one. Workers are
forked (cheap: copy-on-write, nothing to import) where the platform allows it, and only for work worth it
(``POOL_MIN_TENSORS``); elsewhere, in a daemonic process, or with ``QHYBRID_PLAN_WORKERS=1``, one by one. Should
a worker die (killed for memory, say), the networks it had not returned are planned here.

Planning that goes on past ``PROGRESS_DELAY_S`` shows a tqdm bar on stderr: what is being planned (how many
networks, how many tensors) and the best total cost so far, each finished network's tree against its quick
path. ``progress``: None (default) shows it only when stderr is a terminal, True always, False never (the
device option ``progress=``).

>>> from .problem import Problem
>>> ring = Problem.of([(i, (i + 1) % 12) for i in range(12)], (), {i: 4 for i in range(12)})
>>> from .problem import _evaluate
>>> found = [_evaluate(ring, [(0, 1)] * 11)]
>>> hyper_tier([ring], found, [0], plan_time=0.0, max_elements=float("inf"), progress=False)
1
>>> found[0].searched
True
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Sequence

from . import hyper
from .problem import Found, Problem

PROGRESS_DELAY_S = 3.0
"""Seconds of planning after which the progress bar appears (tqdm's ``delay``): quicker planning prints nothing."""

PROGRESS_INTERVAL_S = 0.5
"""Least seconds between two redraws of the bar (tqdm's ``mininterval``)."""

POOL_MIN_TENSORS = 1500
"""Tensors (summed over the networks of a call) from which the hyper tier runs in worker processes: about three
400-tensor cones, a second or more of planning, where forking the workers costs tens of milliseconds."""

WORKERS_ENV = "QHYBRID_PLAN_WORKERS"
"""Environment variable capping the planning workers (1: plan in this process only)."""


def plan_workers() -> int:
    """Worker processes the hyper tier may use: the cores this process may run on, capped by
    ``$QHYBRID_PLAN_WORKERS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        cores = os.cpu_count() or 1
    cap = os.environ.get(WORKERS_ENV, "").strip()
    if cap:
        try:
            cores = min(cores, int(cap))
        except ValueError:
            raise ValueError(f"{WORKERS_ENV} must be a whole number of worker processes, got {cap!r}.") from None
    return max(1, cores)


def check_progress(progress):
    """``progress`` as given, if None, True or False (the device option), else a ValueError naming the choices."""
    if progress is None or isinstance(progress, bool):
        return progress
    raise ValueError(f"progress must be None (a bar on a terminal only), True or False, got {progress!r}.")


def _forkable() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def progress_bar(total: int, tensors: int, progress: bool | None):
    """The tqdm bar of one hyper-tier call (on stderr, after ``PROGRESS_DELAY_S``; ``progress`` as the module says)."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=f"planning {total} contraction trees ({tensors} tensors)", unit="tree", file=sys.stderr,
        delay=PROGRESS_DELAY_S, mininterval=PROGRESS_INTERVAL_S, leave=False,
        disable=None if progress is None else not progress,
    )  # fmt: skip


def _log2(flops: float) -> str:
    return f"2^{math.log2(flops):.1f}" if flops > 0 else "0"


def hyper_tier(
    problems: Sequence[Problem], found: list[Found], picked: Sequence[int], plan_time: float, max_elements: float,
    progress: bool | None = None,
) -> int:  # fmt: skip
    """``hyper.improve`` for each network ``picked`` (indices into ``problems`` / ``found``, updated in place),
    each with its share of ``plan_time`` in proportion to its path's flops, costliest first; in worker processes
    where the work is large enough. Returns how many networks were planned."""
    picked = sorted(picked, key=lambda k: -found[k].flops)
    if not picked:
        return 0
    total = sum(found[k].flops for k in picked)
    jobs = [(k, plan_time * found[k].flops / total) for k in picked]
    before = {k: found[k].flops for k in picked}
    tensors = sum(problems[k].n for k in picked)
    workers = min(plan_workers(), len(picked)) if tensors >= POOL_MIN_TENSORS and _forkable() else 1
    with progress_bar(len(picked), tensors, progress) as bar:

        def done(k: int, tree: Found) -> None:
            found[k] = tree
            best = sum(found[j].flops for j in picked)  # finished trees and the quick paths still waiting
            bar.set_postfix_str(f"best {_log2(best)} flops (quick paths {_log2(sum(before.values()))})", refresh=False)
            bar.update()

        finished: set = set()
        if workers > 1:
            try:
                returned = lambda k, tree: finished.add(k) or done(k, tree)  # noqa: E731
                _in_workers(problems, found, jobs, max_elements, workers, returned)
            except (OSError, BrokenProcessPool):  # no process could be started, or a worker died: go on here
                pass
        for k, share in jobs:
            if k not in finished:
                done(k, hyper.improve(problems[k], share, found[k], max_elements))
    return len(picked)


def _in_workers(problems, found, jobs, max_elements, workers, done) -> None:
    """The jobs in ``workers`` forked processes, at most ``workers`` tasks in flight: each network's steps 1-3
    (``hyper.head``, costliest network first), then each of its step-4 searches as a task of its own
    (``hyper.partition_search``, one per seed; put ahead of the heads still waiting, so the long tasks start
    first and the short ones fill in at the end: on L8p4 a network's two searches are most of its planning), merged
    in seed order (``hyper.better``: the tree ``hyper.improve`` gives), then ``hyper.finish`` (the deep search,
    a task too where the network's share leaves time for it)."""
    context = multiprocessing.get_context("fork")
    share, seeds = dict(jobs), hyper.PARTITION_SEEDS
    queue: list = [("head", k) for k, _ in jobs]
    began, heads, searched = {}, {}, {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        running: dict = {}
        while queue or running:
            while queue and len(running) < workers:
                task = queue.pop(0)
                kind, k = task[0], task[1]
                if kind == "head":
                    began[k] = time.perf_counter()
                    future = pool.submit(hyper.head, problems[k], found[k], max_elements)
                elif kind == "seed":
                    future = pool.submit(hyper.partition_search, problems[k], heads[k][1], task[2], max_elements)
                else:
                    future = pool.submit(hyper.finish, problems[k], task[2], task[3], max_elements)
                running[future] = task
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                task = running.pop(future)
                kind, k = task[0], task[1]
                if kind == "finish":
                    done(k, future.result())
                    continue
                if kind == "head":
                    heads[k], searched[k] = future.result(), {}
                    if heads[k][1]:  # step 4: one task per seed, next in line
                        queue[:0] = [("seed", k, seed) for seed in seeds]
                        continue
                else:
                    searched[k][task[2]] = future.result()
                    if len(searched[k]) < len(seeds):
                        continue
                best = heads[k][0]
                for seed in seeds:
                    best = hyper.better(best, searched[k].get(seed), max_elements)
                left = share[k] - (time.perf_counter() - began[k])
                if left >= hyper.DEEP_MIN_S:
                    queue.insert(0, ("finish", k, best, left))
                else:
                    done(k, hyper.finish(problems[k], best, left, max_elements))


__all__ = [
    "hyper_tier", "check_progress", "plan_workers", "progress_bar", "PROGRESS_DELAY_S", "PROGRESS_INTERVAL_S",
    "POOL_MIN_TENSORS",
]  # fmt: skip

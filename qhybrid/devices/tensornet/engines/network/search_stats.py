"""What the contraction-path planner did, counted for tests and diagnostics (``pathfind.STATS``).

>>> stats = reset_stats()
>>> stats.quick, stats is STATS
(0, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SearchStats:
    """What the planner did since the last :func:`reset_stats`."""

    quick: int = 0  # networks given a greedy/sweep/optimal path
    quick_hits: int = 0  # of those, networks whose greedy/sweep path this process had found before
    searches: int = 0  # randomised searches run
    trials: int = 0  # trials those searches reported
    memo_hits: int = 0  # networks that took a remembered searched path
    disk_hits: int = 0  # networks whose path came from the disk store
    disk_writes: int = 0  # paths written to the disk store
    shared: int = 0  # networks that took the path of an isomorphic one planned in the same call
    rescues: int = 0  # further searches of networks whose best path would not fit in memory
    hyper: int = 0  # networks given the hyper tier (hyper.improve)
    hyper_seconds: float = 0.0  # time those took
    time_limits: list[float] = field(default_factory=list)  # max_time each search optimiser was built with


STATS = SearchStats()


def reset_stats() -> SearchStats:
    """Zero :data:`STATS` (in place) and return it."""
    STATS.__init__()
    return STATS


__all__ = ["SearchStats", "STATS", "reset_stats"]

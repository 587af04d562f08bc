"""What a simulation runs with (dtype, device, memory, planning budget, backend) and the plan cache that\nholds one compiled program per circuit structure."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
import torch
from .engines.network.pathfind import DEFAULT_PLAN_TIME


@dataclass(frozen=True)
class SimOptions:
    dtype: torch.dtype
    device: torch.device
    max_memory: float
    optimizer: str = "auto"
    backend: str = "torch"  # what executes contraction plans (backends.get_backend)
    plan_time: float = DEFAULT_PLAN_TIME  # seconds one structure's path searches may take


@dataclass
class CacheInfo:
    hits: int
    misses: int
    size: int


class PlanCache:
    """Compiled programs keyed by circuit structure (never values), least recently used evicted."""

    def __init__(self, maxsize: int = 1024):
        self.maxsize = maxsize
        self._programs: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key, build):
        program = self._programs.get(key)
        if program is not None:
            self.hits += 1
            self._programs.move_to_end(key)
            return program
        self.misses += 1
        program = build()
        self._programs[key] = program
        if len(self._programs) > self.maxsize:
            self._programs.popitem(last=False)
        return program

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self._programs))

    def clear(self) -> None:
        self._programs.clear()
        self.hits = self.misses = 0

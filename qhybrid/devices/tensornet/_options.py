"""What a simulation runs with (dtype, device, memory, planning budget, backend, where paths are kept) and
the plan cache that holds one compiled program per circuit structure."""

from __future__ import annotations

import numbers
import os
from collections import OrderedDict
from dataclasses import dataclass

import torch

from .engines.network.path_cache import PathStore, default_directory
from .engines.network.pathfind import DEFAULT_PLAN_TIME, PathSettings
from .engines.mps.settings import MPSSettings


@dataclass(frozen=True)
class SimOptions:
    dtype: torch.dtype
    device: torch.device
    max_memory: float
    optimizer: str | PathSettings = "auto"  # a method name, or the settings with memory limit and path store
    backend: str = "torch"  # what executes contraction plans (backends.get_backend)
    plan_time: float = DEFAULT_PLAN_TIME  # seconds one structure's path searches may take
    spread_classes: object = False  # cone classes over torch.distributed ranks: True, False or a ProcessGroup
    mps: MPSSettings | None = None  # method="mps": bond cap, cutoff and truncation log (None: exact methods)
    # noise (engines/mixed): "exact" density matrices, or "trajectories" drawn with noise_rng, standard errors
    # appended to noise_log
    noise: str = "exact"
    trajectories: int = 0
    noise_rng: object = None
    noise_log: list | None = None
    spread_slices: object = False  # a sliced contraction's slices over torch.distributed ranks (as spread_classes)


@dataclass
class CacheInfo:
    """Plan cache counts, and ``engines``: the engine choices of the cached programs (``EngineChoice``: what,
    engine, reason, the state vector's and the network's flops and bytes; ``print`` each to read it)."""

    hits: int
    misses: int
    size: int
    engines: tuple = ()


class PlanCache:
    """Compiled programs keyed by circuit structure (never values), least recently used evicted; ``option``: the
    device option that sets ``maxsize``, named where its value is refused."""

    def __init__(self, maxsize: int = 1024, option: str = "plan_cache_size"):
        if isinstance(maxsize, bool) or not isinstance(maxsize, numbers.Integral) or maxsize < 0:
            raise ValueError(f"{option}={maxsize!r}: give how many circuit structures to keep, an integer >= 0.")
        self.maxsize = int(maxsize)
        self._programs: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.stack_limits: dict = {}
        """Per structure (and options): the most variants stacked in one run since a larger stack was refused for
        memory (``_simulate._run_in_stacks``)."""

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
        engines = tuple(c for p in self._programs.values() for c in getattr(p, "engine_choices", ()))
        return CacheInfo(self.hits, self.misses, len(self._programs), engines)

    def clear(self) -> None:
        self._programs.clear()
        self.stack_limits.clear()
        self.hits = self.misses = 0


def checked_torch_device(torch_device) -> torch.device | None:
    """The device option ``torch_device`` as a ``torch.device`` (None: follow the parameters), refused by name
    where it is no device or names CUDA that this torch lacks (torch's own ``AssertionError`` at the first run).

    >>> checked_torch_device("cpu")
    device(type='cpu')
    """
    if torch_device is None:
        return None
    try:
        device = torch.device(torch_device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"torch_device={torch_device!r} is not a torch device ({e}); use 'cpu', 'cuda', "
                         "'cuda:1', ... or None (tensors follow the circuit's parameters).") from None
    if device.type == "meta":  # (no values: every result would be a meta tensor, or a copy would fail)
        raise ValueError(f"torch_device={torch_device!r} holds no values; use 'cpu', 'cuda', ... or None.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"torch_device={torch_device!r}, but this torch sees no CUDA GPU "
                         "(torch.cuda.is_available() is False); use None or 'cpu'.")
    return device


def checked_max_memory(max_memory) -> float | None:
    """The device option ``max_memory`` (bytes; None: a share of what the process can take), refused by name where
    it is no positive number (NaN acted as no limit; a negative one refused every contraction at its first run).

    >>> checked_max_memory(2**30), checked_max_memory(None)
    (1073741824, None)
    """
    if max_memory is None:
        return None
    try:
        ok = float(max_memory) > 0  # (False for NaN)
    except (TypeError, ValueError):
        ok = False
    if not ok or isinstance(max_memory, (bool, str)) or max_memory == float("inf"):
        raise ValueError(f"max_memory={max_memory!r}: give a finite positive number of bytes (or None for a share of "
                         "the memory the process can take).")
    return max_memory


OPTIMIZERS = ("auto", "greedy", "optimal", "cotengra")


def checked_plan_options(optimizer, plan_time) -> float:
    """The device options ``optimizer`` (one of ``OPTIMIZERS``, or ``PathSettings``) and ``plan_time`` (seconds
    >= 0, returned as a float), refused by name where they are neither.

    >>> checked_plan_options("auto", 2)
    2.0
    """
    if not isinstance(optimizer, PathSettings) and optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r} is not known; choose one of {OPTIMIZERS}.")
    try:
        ok = not isinstance(plan_time, (bool, str)) and float(plan_time) >= 0  # (False for NaN)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"plan_time must be a number of seconds >= 0, got {plan_time!r}.")
    return float(plan_time)


def path_store(path_cache: bool | str | os.PathLike) -> PathStore | None:
    """The device option ``path_cache`` as a store: True the default directory, False none, else that folder.

    >>> path_store(False) is None
    True
    """
    if path_cache is True:
        return PathStore(default_directory())
    if path_cache is False:
        return None
    if isinstance(path_cache, (str, os.PathLike)) and str(path_cache):
        return PathStore(path_cache)
    raise ValueError(
        f"path_cache must be True (keep contraction paths in $QHYBRID_CACHE_DIR/paths or ~/.cache/qhybrid/paths), "
        f"False (keep none) or a directory, got {path_cache!r}."
    )


def tensor_device(params) -> torch.device:
    """Where a run's tensors live: an accelerator before the CPU (a CPU tensor beside CUDA parameters is a
    constant such as a ``QubitUnitary`` matrix built with ``torch.tensor``), the CPU when none is a tensor.

    >>> tensor_device([0.5, torch.zeros(1)])
    device(type='cpu')
    """
    for p in params:
        if isinstance(p, torch.Tensor) and p.device.type != "cpu":
            if p.device.type == "meta":  # (no values to simulate: torch's own error named a sparse kernel)
                raise ValueError(
                    f"A gate parameter is a tensor on the meta device (shape {tuple(p.shape)}), which holds no values: "
                    "qhybrid.tensornet simulates CPU or CUDA tensors. Materialise it first (e.g. module.to_empty(device="
                    "'cpu') and initialise it, or torch.empty_like(p, device='cpu'))."
                )
            return p.device
    return torch.device("cpu")

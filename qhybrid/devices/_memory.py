"""The memory a process can still take: the least of the machine's available RAM, what the address-space
limit (``ulimit -v``, ``RLIMIT_AS``) leaves above the process's mapped size, and what its cgroup's memory
limit (a container's, v2 ``memory.max`` or v1 ``memory.limit_in_bytes``) leaves above the cgroup's usage.

The machine's free RAM alone overstates it in a container or under ``ulimit -v``: a plan judged to fit
``max_memory`` then died in the allocator (an 8x8 lattice p=4 step under ``ulimit -v 16000000``: "can't
allocate 2147483648 bytes" after 213 s) where it should be refused, or sliced, before any work.

>>> from qhybrid.devices._memory import available_memory
>>> available_memory() > 0
True
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where cgroup files are read (v2: ``memory.max``, ``memory.current``; v1: under ``memory/``)."""


def available_memory() -> float:
    """Bytes this process can still allocate (see the module docstring)."""
    limits = [float(psutil.virtual_memory().available)]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(float(soft - psutil.Process().memory_info().vms))
    cgroup = _cgroup_room()
    if cgroup is not None:
        limits.append(cgroup)
    return max(min(limits), 0.0)


AVAILABLE_MEMORY_TTL_S = 1.0
"""A reading of ``available_memory`` is reused this long by ``recent_available_memory`` (reading it costs
more than a small circuit's whole step)."""

_RECENT = [0.0, -1.0]  # (bytes, when read)


def recent_available_memory() -> float:
    """``available_memory()``, read at most once every ``AVAILABLE_MEMORY_TTL_S`` seconds."""
    now = time.monotonic()
    if now - _RECENT[1] > AVAILABLE_MEMORY_TTL_S:
        _RECENT[:] = [available_memory(), now]
    return _RECENT[0]


def _cgroup_room() -> float | None:
    """The cgroup memory limit less the cgroup's usage; None where no limit is set or readable."""
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):  # fmt: skip
        try:
            limit = (CGROUP_ROOT / limit_file).read_text().strip()
            usage = (CGROUP_ROOT / usage_file).read_text().strip()
        except OSError:
            continue
        if limit == "max" or not limit.isdigit() or not usage.isdigit() or int(limit) >= 1 << 60:
            return None  # unlimited (v1 writes a huge number for "no limit")
        return float(int(limit) - int(usage))
    return None


__all__ = ["available_memory", "recent_available_memory", "AVAILABLE_MEMORY_TTL_S", "CGROUP_ROOT"]

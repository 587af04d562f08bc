"""glibc's malloc kept from handing state buffers back to the kernel between steps.

A step allocates and frees state-sized tensors (0.1-30 MB) by the dozen. glibc serves an allocation above its
mmap threshold with a fresh ``mmap`` and trims the heap's free top above its trim threshold; both return the
pages to the kernel, so the next step touches them anew: 700-950 page faults a steady Q100p2 step on the 2-core
development VM, and a complex multiply of 3 x 2**14 amplitudes that takes 65 us with warm pages took 460 us in
the step. Raising both thresholds (as ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` would) keeps
those pages in the process: about 0 faults a step, 17-18 -> 14-16 ms (BENCHMARKS.md). The cost: up to
``TRIM_THRESHOLD`` bytes of freed memory stay mapped, and allocations below ``MMAP_THRESHOLD`` come from the
heap. Applied once, when the first qhybrid simulator device is made; not where the process set its own malloc
environment, preloads another allocator's variables, or sets ``QHYBRID_MALLOC_TUNING=0``; glibc only.

>>> tuned = tune_malloc()  # idempotent: the first call decides
>>> tuned in (True, False)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

MMAP_THRESHOLD = 32 << 20
"""Allocations below this come from the heap (glibc's own dynamic threshold stops at 32 MiB too)."""

TRIM_THRESHOLD = 64 << 20
"""Free memory at the heap's top kept mapped up to this many bytes."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX", "LD_PRELOAD")
_done: list = []


def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - musl and others have no such symbol: not glibc
        return libc
    except (OSError, AttributeError):
        return None


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds once per process (see the module notes); whether it did."""
    if _done:
        return _done[0]
    tuned = False
    wanted = os.environ.get("QHYBRID_MALLOC_TUNING", "1") != "0"
    if wanted and not any(os.environ.get(k) for k in _USER_SETTINGS):
        libc = _glibc()
        if libc is not None:
            tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
            )
    _done.append(tuned)
    return tuned


__all__ = ["tune_malloc", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

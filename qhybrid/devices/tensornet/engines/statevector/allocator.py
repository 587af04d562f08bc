"""glibc allocator settings for large state vectors: page faults of fresh state-sized tensors cost more than
the arithmetic on them, so the heap is asked to keep freed memory for reuse (once per process)."""

from __future__ import annotations

LARGE_STATE_BYTES = 8 << 20
"""From this state size on, glibc is asked (once per process) to keep freed memory for reuse."""

MALLOC_MMAP_THRESHOLD = 1 << 27
MALLOC_TRIM_THRESHOLD = 1 << 31
"""glibc serves allocations below the first from its heap and returns heap memory to the system only above
the second. Its defaults (mmap from 128 KiB-32 MiB) give every fresh state-sized tensor its own mapping,
and the page faults of filling it cost more than the arithmetic (measured here: a 4x4 gate on a 32 MiB
state 18.6 ms with the defaults, 8.9 ms with these). States of 128 MiB and more (24 wires) are still mapped
and unmapped one by one: kept in the heap, its fragments grew a 24-wire ``qml.state()`` from 2.1 to 3-4
states of peak memory over repeated calls."""

_TUNED = False


def tune_allocator(state_bytes: int) -> None:
    """Process-wide glibc settings, once, when a state of LARGE_STATE_BYTES is first simulated.

    Opt out with the environment variable ``QHYBRID_MALLOC_TUNING=0`` (e.g. when the process must hand
    freed memory back to the system promptly)."""
    global _TUNED
    if _TUNED or state_bytes < LARGE_STATE_BYTES:
        return
    _TUNED = True
    import os

    if os.environ.get("QHYBRID_MALLOC_TUNING", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    try:
        import ctypes
        import sys

        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, MALLOC_MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, MALLOC_TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
    except Exception:  # not glibc: nothing to tune
        pass

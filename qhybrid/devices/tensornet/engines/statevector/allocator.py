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

LARGE_INTERMEDIATE_MMAP_THRESHOLD = 1 << 30
"""Where a contraction's intermediates exceed ``MALLOC_MMAP_THRESHOLD`` (an 8x8 lattice QAOA p=4 holds
tensors of 256-512 MiB), glibc is asked to serve allocations up to this size from its heap as well: every
such tensor was mapped afresh and faulted in page by page (a 256 MiB copy: 0.20 s, 0.046 s from the heap),
and one cone class's value and gradient took 1.3-1.5x as long (2026-11-27, one thread). Process-wide, once,
and only for contractions that large: the state vectors' fragmentation caveat above then applies to them."""

_TUNED = False
_LARGE = False


def tune_allocator(state_bytes: int) -> None:
    """Process-wide glibc settings, once, when a state of LARGE_STATE_BYTES is first simulated.

    Opt out with the environment variable ``QHYBRID_MALLOC_TUNING=0`` (e.g. when the process must hand
    freed memory back to the system promptly)."""
    global _TUNED
    if _TUNED or state_bytes < LARGE_STATE_BYTES:
        return
    _TUNED = True
    _mallopt(MALLOC_MMAP_THRESHOLD)


def tune_for_intermediates(largest_bytes: float) -> None:
    """``LARGE_INTERMEDIATE_MMAP_THRESHOLD`` (once per process) when a contraction's largest intermediate
    exceeds ``MALLOC_MMAP_THRESHOLD`` bytes; same opt-out as ``tune_allocator``."""
    global _LARGE, _TUNED
    if _LARGE or largest_bytes <= MALLOC_MMAP_THRESHOLD:
        return
    _LARGE = _TUNED = True
    _mallopt(LARGE_INTERMEDIATE_MMAP_THRESHOLD)


def _mallopt(mmap_threshold: int) -> None:
    import os

    if os.environ.get("QHYBRID_MALLOC_TUNING", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    try:
        import ctypes
        import sys

        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, MALLOC_TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
    except Exception:  # not glibc: nothing to tune
        pass

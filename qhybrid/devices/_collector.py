"""Python's cyclic garbage collector paused while a program is built, and restored afterwards.

Building a wide circuit's program allocates millions of small, long-lived objects (cones, networks of
hundreds of operands each, contraction trees, operand position tables), and every 700 allocations the
collector runs; each of its full passes walks every object alive. On Q100 p=4 a first result spent 1.0-1.2 s
of 8.7 s (a second process) in full passes and 0.3 s in younger ones, collecting nearly nothing: the objects
are the program. Paused during the build, the collector runs as usual afterwards (garbage with cycles made
meanwhile is collected then).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the body (nested pauses end with the outermost one).

    >>> with collector_paused():
    ...     gc.isenabled()
    False
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["collector_paused"]

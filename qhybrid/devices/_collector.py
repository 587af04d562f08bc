"""Python's cyclic garbage collector paused while a program is built, and restored afterwards.

Building a wide circuit's program allocates millions of small, long-lived objects (cones, networks of
hundreds of operands each, contraction trees, operand position tables), and every 700 allocations the
collector runs; each of its full passes walks every object alive. On Q100 p=4 a first result spent 1.0-1.2 s
of 8.7 s (a second process) in full passes and 0.3 s in younger ones, collecting nearly nothing: the objects
are the program. Paused during the build, the collector runs as usual afterwards (garbage with cycles made
meanwhile is collected then).

What the build leaves alive is then moved to the oldest generation at once (``gc.freeze`` and
``gc.unfreeze``), so it does not count towards the next full pass: counted, the finished program set off
one more full pass over every object in the step after its build (0.25-0.35 s on Q100 p=4), which again
collected nothing. Cyclic garbage among those objects is still collected, by the next full pass. Skipped
where the process froze objects itself (``gc.get_freeze_count()``): unfreezing would undo that.
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
            settle_long_lived()
            gc.enable()


def settle_long_lived() -> None:
    """Move every object the collector tracks to its oldest generation without counting it as new there
    (``gc.freeze`` then ``gc.unfreeze``: two list splices), unless the process froze objects itself.

    A device calls it when made: what is alive then is mostly the modules torch, PennyLane and qhybrid
    imported, and counted as new it set off a full pass in the first call's circuit building (0.23-0.29 s
    of Q100 p=4's second process, collecting nothing).

    >>> settle_long_lived()
    >>> gc.get_freeze_count()
    0
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


__all__ = ["collector_paused", "settle_long_lived"]

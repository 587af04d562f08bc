"""How much GPU memory a cuTensorNet network may use, and whether it is worth autotuning: pure decisions.

Why the cutensornet backend used ~11x the torch backend's memory on a 22-wire circuit (22 closed
networks): cuquantum-python sizes each network's scratch workspace against its ``memory_limit``
(default 80% of the whole GPU) and takes the *largest* useful size when it may (``WorksizePref.MAX``),
and by default every ``Network`` keeps its scratch and CACHE workspaces allocated between calls
(``release_workspace=False``). One workspace of the largest size per network, all held at once, is what
filled the GPU. The backend now

* passes ``memory_limit`` = :func:`workspace_limit` (the device's ``max_memory``, within a fraction of
  the GPU memory free now), so cuTensorNet sizes its workspace within it;
* refuses, before building anything, a network whose plan needs more than that
  (:func:`check_workspace`), and turns cuTensorNet's own ``MemoryLimitExceeded`` into the same
  :class:`~qhybrid.errors.ContractionTooLargeError` with both sizes;
* releases the scratch workspace after every call (back to torch's caching allocator, where the next
  network picks it up), and the CACHE workspace (the forward's intermediates that gradients need)
  after the backward.

>>> workspace_limit(2**30, free=8 * 2**30)
1073741824
>>> workspace_limit(None, free=8 * 2**30)
6871947673
"""

from __future__ import annotations

from ..engines.network.plan import _fmt_bytes
from ....errors import ContractionTooLargeError

FREE_FRACTION = 0.8
"""Of the GPU memory free (plus torch's cached, unused blocks) when a network is built, the share its
workspace may take: the rest is for operands, results and whatever else runs."""

AUTOTUNE_MIN_FLOPS = 1e9
"""Networks cheaper than this are not autotuned: they run in well under a millisecond on a GPU, and
autotuning (several timed contractions per network) would cost more than it can save."""


def workspace_limit(max_memory: float | None, free: int, cached: int = 0) -> int:
    """Bytes cuTensorNet may use for one network's workspace (``NetworkOptions.memory_limit``).

    ``max_memory``: the device option (None: no limit of its own); ``free``: GPU memory free now;
    ``cached``: memory torch's caching allocator holds but does not use (workspaces come from it).
    """
    limit = FREE_FRACTION * (max(int(free), 0) + max(int(cached), 0))
    if max_memory is not None:
        limit = min(limit, float(max_memory))
    return max(int(limit), 0)


SMALL_WORKSPACE = 32 * 2**20
"""Bytes a network's workspace may always take, however small the network."""

WORKSPACE_HEADROOM = 8
"""A network's workspace limit, in multiples of its estimated need (above ``SMALL_WORKSPACE``): cuTensorNet sizes
a workspace at the largest useful size within its limit, so a limit of 80% of the GPU gave a 16-wire light cone
168 MiB of scratch where torch used 2.7 MiB (H200, 2026-11-27)."""


def network_workspace_limit(limit: int, need: int) -> int:
    """The ``memory_limit`` one network is built with: what its size calls for, within ``limit``.

    >>> network_workspace_limit(2**34, 2**20) == SMALL_WORKSPACE
    True
    >>> network_workspace_limit(2**34, 2**30) == 8 * 2**30
    True
    """
    return min(int(limit), max(SMALL_WORKSPACE, WORKSPACE_HEADROOM * int(need)))


def estimated_workspace(largest_intermediate: int, output_elements: int, itemsize: int) -> int:
    """A lower bound of the workspace a contraction along a plan needs: its largest intermediate lives
    in the workspace (unless it is the result, which cuquantum-python allocates outside)."""
    largest = max(int(largest_intermediate), 0)
    if largest <= int(output_elements):
        return 0  # the largest tensor is the result (or an operand), which lives outside the workspace
    return largest * int(itemsize)


def check_workspace(need: int, limit: int, what: str, max_memory: float | None) -> None:
    """Refuse, before allocating, a contraction whose workspace cannot fit in ``limit`` bytes."""
    if need > limit:
        raise ContractionTooLargeError(
            f"Contracting {what} with cuTensorNet needs a workspace of at least {_fmt_bytes(need)}, above the "
            f"{_fmt_bytes(limit)} it may use ({_limit_reason(max_memory)}). Use fewer wires or a smaller "
            "batch, measure local observables (smaller light cones), free GPU memory, raise the device's "
            "max_memory, or use backend='torch'."
        )


def refuse_from_library(exc: BaseException, what: str, max_memory: float | None) -> ContractionTooLargeError:
    """cuquantum-python's ``MemoryLimitExceeded`` (a ``MemoryError`` with ``requirement`` and ``limit``
    in bytes) as qhybrid's error."""
    need = int(getattr(exc, "requirement", 0))
    limit = int(getattr(exc, "limit", 0))
    return ContractionTooLargeError(
        f"Contracting {what} with cuTensorNet needs a workspace of at least {_fmt_bytes(need)} (cuTensorNet's "
        f"estimate), above the {_fmt_bytes(limit)} it may use ({_limit_reason(max_memory)}). Use fewer "
        "wires or a smaller batch, free GPU memory, raise the device's max_memory, or use backend='torch'."
    )


def _limit_reason(max_memory: float | None) -> str:
    share = f"{FREE_FRACTION:.0%} of the GPU memory free when the network was built"
    if max_memory is None:
        return share
    return f"max_memory={_fmt_bytes(float(max_memory))}, within {share}"


def autotune_iterations(flops: float, configured: int) -> int:
    """Autotuning iterations for a network of ``flops`` (the plan's count): ``configured`` where it pays."""
    return int(configured) if flops >= AUTOTUNE_MIN_FLOPS else 0


__all__ = [
    "workspace_limit", "estimated_workspace", "check_workspace", "refuse_from_library", "autotune_iterations",
    "FREE_FRACTION", "AUTOTUNE_MIN_FLOPS",
]

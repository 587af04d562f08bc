"""One intra-op thread for small CPU state work, scoped to the call and the caller's setting restored.

torch runs an op on its whole intra-op thread team once it is large enough for ``at::parallel_for`` (32768
elements) or, for matrix products, whenever MKL decides to. A small circuit's step is hundreds of such ops
on a few-MiB state (W1: 8 qubits x batch 128 = 32768 amplitudes, 16x16 Kronecker blocks against
[16, 2048] slices): each parallel region costs a fork and a join, and between regions the idle team spins on
the cores the next op needs. On two cores W1's plain qnode step took 10.2 ms at two threads against 7.2 ms at
one (``docs/THREADS.md``). Work up to :data:`SMALL_WORK_AMPLITUDES` amplitudes therefore runs at one thread.

``torch.set_num_threads`` costs well under a microsecond; it is set for the calling thread's ATen/OpenMP/MKL
team only for the duration and restored afterwards, also when the body raises.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch

from .._variant import Variant

SMALL_WORK_AMPLITUDES = 1 << 17
"""State work of at most this many amplitudes (state size times batch, 2 MiB in complex128) runs at one
intra-op thread on the CPU: below it the thread team's fork, join and spin cost more than the split work
saves (W1, 32768 amplitudes: 1.4x faster at one thread than at two); above it the caller's setting stands
(W5, 2**22 amplitudes)."""


@contextmanager
def threads_for(amplitudes: int, device: torch.device) -> Iterator[None]:
    """Run the body at one intra-op thread when ``amplitudes`` of CPU state work are too few to share.

    >>> with threads_for(32768, torch.device("cpu")):
    ...     torch.get_num_threads()
    1
    """
    threads = torch.get_num_threads()
    if threads == 1 or device.type != "cpu" or amplitudes > SMALL_WORK_AMPLITUDES:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def state_work(variants: Sequence[Variant], wires) -> int:
    """Amplitudes of the state vectors that ``variants`` describe (``2**wires`` times the broadcast size,
    summed, counted only up to just past :data:`SMALL_WORK_AMPLITUDES`); wide circuits count as large whichever
    engine runs them.

    >>> import pennylane as qml
    >>> tape = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(1))])
    >>> state_work([Variant.of(tape)] * 3, wires=None)
    12
    """
    total = 0
    seen: dict[int, int] = {}  # per tape object: shifted and stacked variants share their tapes
    for v in variants:
        amplitudes = seen.get(id(v.tape))
        if amplitudes is None:
            n = len(wires) if wires is not None else v.tape.num_wires
            amplitudes = seen[id(v.tape)] = (1 << n) * (v.tape.batch_size or 1)
        total += amplitudes
        if total > SMALL_WORK_AMPLITUDES:
            break
    return total


def _work_device(device, variants: Sequence[Variant]) -> torch.device:
    """Where a device runs ``variants``: its own ``torch_device``, else where their tensors live (an
    accelerator before the CPU)."""
    if getattr(device, "torch_device", None) is not None:
        return torch.device(device.torch_device)
    first = variants[0]
    tensors = first.gather.inputs if first.gather is not None else first.params  # no gather run for this
    return next((t.device for t in tensors if isinstance(t, torch.Tensor) and t.device.type != "cpu"), torch.device("cpu"))


def small_work_threads(simulate: Callable) -> Callable:
    """A device's ``simulate_variants(variants)`` run inside :func:`threads_for` the state work of its
    variants (``state_work`` over the device's ``wires``)."""

    @functools.wraps(simulate)
    def run(device, variants: Sequence[Variant]):
        if not variants:
            return simulate(device, variants)
        with threads_for(state_work(variants, device.wires), _work_device(device, variants)):
            return simulate(device, variants)

    return run


__all__ = ["SMALL_WORK_AMPLITUDES", "small_work_threads", "state_work", "threads_for"]

"""Launchers: the one place where a batch of (tape, parameters) variants meets a device.

The forward pass and the parameter-shift JPC both go through a launcher, so every shifted tape of a
step reaches the device in one call. A device that runs variants natively (``simulate_variants``)
gets them as they are; any other PennyLane device gets tapes with the new parameters bound.
"""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch

from .._variant import Variant


class Launcher:
    """Runs a batch of variants on one device in one call.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> tape = qml.tape.QuantumScript([qml.RX(0.5, 0)], [qml.expval(qml.Z(0))])
    >>> Launcher(dev).run([Variant(tape, [torch.tensor(0.5)])])[0][0]
    tensor(0.8776, dtype=torch.float64)
    """

    def __init__(self, device):
        self.device = device
        self.calls = 0  # device calls made, for tests and benchmarks

    def run(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """One tuple of torch tensors (one per measurement) for each variant, in order."""
        if not variants:
            return []
        self.calls += 1
        if hasattr(self.device, "simulate_variants"):
            return self.device.simulate_variants(variants)
        tapes = [_bind(v) for v in variants]
        results = self.device.execute(tapes)
        return [_as_tuple(r, len(v.tape.measurements)) for r, v in zip(results, variants)]


def _bind(v: Variant) -> qml.tape.QuantumScript:
    current = [p for op in v.tape.operations for p in op.data]
    n = len(current)
    if all(a is b for a, b in zip(v.params[:n], current)):
        return v.tape
    return v.tape.bind_new_parameters(v.params, list(range(len(v.params))))


def _as_tuple(result, n_measurements: int) -> tuple:
    items = (result,) if n_measurements == 1 else tuple(result)
    return tuple(r if isinstance(r, torch.Tensor) else torch.as_tensor(r) for r in items)


__all__ = ["Launcher", "Variant"]

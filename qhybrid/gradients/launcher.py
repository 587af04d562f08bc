"""Launchers: the one place where a batch of (tape, parameters) variants meets a device.

The forward pass and the parameter-shift JPC both go through a launcher, so every shifted tape of a
step reaches the device in one call. A device that runs variants natively (``simulate_variants``)
gets them as they are; any other PennyLane device gets tapes with the new parameters bound.

:class:`MultiDeviceLauncher` (after qailab's QuantumLauncher) shares one batch between several devices
running concurrently, keeping the variants of one circuit structure on one device unless that would
leave the others idle.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import pennylane as qml
import torch

from ..devices._tracking import track_run
from .._variant import Variant


class Launcher:
    """Runs a batch of variants on one device in one call.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> tape = qml.tape.QuantumScript([qml.RX(0.5, 0)], [qml.expval(qml.Z(0))])
    >>> Launcher(dev).run([Variant(tape, [torch.tensor(0.5)])])[0][0]
    tensor(0.8776, dtype=torch.float64)
    """

    def __init__(self, device, device_shots: bool = False):
        self.device = device
        self.device_shots = device_shots
        """Whether the device's own shots (analytic or sampled) override the tapes': a gradient device beside the
        forward device keeps its mode; the forward device follows each tape's shots, as PennyLane's do."""
        self.calls = 0  # device calls made, for tests and benchmarks

    def run(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """One tuple of torch tensors (one per measurement) for each variant, in order."""
        if not variants:
            return []
        self.calls += 1
        if self.device_shots:
            variants = _at_device_shots(variants, self.device)
        if hasattr(self.device, "simulate_variants"):
            if not isinstance(self.device, MultiDeviceLauncher):  # its own launchers record
                track_run(self.device, variants)
            return self.device.simulate_variants(variants)
        tapes = [v.bound_tape() for v in variants]
        results = self.device.execute(tapes)
        return [_as_tuple(r, len(v.tape.measurements)) for r, v in zip(results, variants)]


class MultiDeviceLauncher:
    """Runs a batch of variants on several devices at once (one thread each) and returns results in order.

    Same ``run`` contract as :class:`Launcher`. The batch is cut by circuit structure: each structure's
    variants stay on one device (one job there) unless a structure holds more than a device's fair share,
    in which case it is cut into contiguous chunks, one per least-loaded device. Loads count parameter
    sets (a broadcast variant counts its batch size). Each device's share goes through its own
    :class:`Launcher`, so a device without ``simulate_variants`` works too.

    A ``MultiDeviceLauncher`` also stands in wherever a device is expected for gradients:
    ``qhybrid.qnode(dev, diff_method="parameter-shift", gradient_device=MultiDeviceLauncher([a, b]))``.

    Args:
        devices: the devices, each listed once (make two devices to run two shares on one backend).

    Keyword Args:
        weights: relative speed of each device (default equal); shares are proportional to it.
        max_workers: threads to use (default: one per device).

    >>> import qhybrid
    >>> launcher = MultiDeviceLauncher([qhybrid.device("tensornet", wires=1), qhybrid.device("tensornet", wires=1)])
    >>> tape = qml.tape.QuantumScript([qml.RX(0.5, 0)], [qml.expval(qml.Z(0))])
    >>> [round(r[0].item(), 6) for r in launcher.run([Variant(tape, [torch.tensor(x)]) for x in (0.0, 3.14159265)])]
    [1.0, -1.0]
    """

    def __init__(self, devices: Sequence, *, weights: Sequence[float] | None = None, max_workers: int | None = None):
        devices = list(devices)
        if not devices:
            raise ValueError("MultiDeviceLauncher needs at least one device.")
        ids = [id(d) for d in devices]
        if len(set(ids)) != len(ids):
            twice = next(d for d in devices if ids.count(id(d)) > 1)
            raise ValueError(
                f"Device {getattr(twice, 'name', twice)!r} is listed more than once; one device object runs one "
                "share at a time, so create a second device to run two shares concurrently."
            )
        if weights is None:
            weights = [1.0] * len(devices)
        weights = [float(w) for w in weights]
        if len(weights) != len(devices) or any(not w > 0 for w in weights):
            raise ValueError(f"weights must be {len(devices)} positive numbers, one per device; got {weights}.")
        self.devices = devices
        self.device = devices[0]  # for code that asks a launcher for its (first) device
        self.weights = weights
        self.max_workers = max_workers or len(devices)
        self.launchers = [Launcher(d, device_shots=True) for d in devices]  # (it runs gradients)
        self.calls = 0

    def run(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """One tuple of results per variant, in order, whichever device ran it."""
        if not variants:
            return []
        self.calls += 1
        shares = self.assign(variants)
        active = [(k, idx) for k, idx in enumerate(shares) if idx]
        if len(active) == 1:
            k, idx = active[0]
            outs = [self.launchers[k].run([variants[i] for i in idx])]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(active))) as pool:
                futures = [pool.submit(self.launchers[k].run, [variants[i] for i in idx]) for k, idx in active]
                outs = [f.result() for f in futures]
        results: list = [None] * len(variants)
        for (_, idx), out in zip(active, outs):
            for i, r in zip(idx, out):
                results[i] = r
        return results

    simulate_variants = run  # so the launcher can stand where a device is expected (gradient_device=)

    def assign(self, variants: Sequence[Variant]) -> list[list[int]]:
        """Variant indices per device: whole structures to the least-loaded device, big ones in chunks."""
        groups: dict = {}
        keys: dict[int, tuple] = {}
        for i, v in enumerate(variants):
            key = keys.get(id(v.tape))
            if key is None:
                key = keys[id(v.tape)] = structure_key(v.tape)
            groups.setdefault(key, []).append(i)
        cost = [v.tape.batch_size or 1 for v in variants]
        total = sum(cost)
        wsum = sum(self.weights)
        capacity = [math.ceil(total * w / wsum) for w in self.weights]
        load = [0] * len(self.devices)
        shares: list[list[int]] = [[] for _ in self.devices]
        for members in sorted(groups.values(), key=lambda m: -sum(cost[i] for i in m)):
            rest = list(members)
            while rest:
                k = min(range(len(load)), key=lambda d: (load[d] / self.weights[d], d))
                room = capacity[k] - load[k]
                take, used = [], 0
                for i in rest:
                    if take and used + cost[i] > room:
                        break
                    take.append(i)
                    used += cost[i]
                shares[k].extend(take)
                load[k] += used
                rest = rest[len(take) :]
        return [sorted(s) for s in shares]


def structure_key(tape: qml.tape.QuantumScript) -> tuple:
    """What a circuit is, without parameter values: gates and wires, measurement kinds and observables."""
    ops = tuple((op.name, tuple(op.wires)) for op in tape.operations)
    meas = tuple(
        (type(mp).__name__, tuple(mp.wires), None if mp.obs is None else (mp.obs.name, tuple(mp.obs.wires)))
        for mp in tape.measurements
    )
    return ops, meas, tape.batch_size, bool(tape.shots)


def _at_device_shots(variants: Sequence[Variant], device) -> list[Variant]:
    """An analytic device runs tapes analytically, a sampling device samples tapes that set no shots:
    an exact gradient device beside a sampling forward device (or the reverse) each keep their mode."""
    shots = getattr(device, "shots", None)
    if shots is None:
        return list(variants)
    copies: dict[int, qml.tape.QuantumScript] = {}
    out = []
    for v in variants:
        tape = v.tape
        if (not shots and tape.shots) or (shots and not tape.shots):
            tape = copies.get(id(v.tape))
            if tape is None:
                tape = copies[id(v.tape)] = v.tape.copy(shots=shots)
        out.append(v if tape is v.tape else Variant(tape, v.params))
    return out


def _as_tuple(result, n_measurements: int) -> tuple:
    items = (result,) if n_measurements == 1 else tuple(result)
    return tuple(r if isinstance(r, torch.Tensor) else torch.as_tensor(r) for r in items)


__all__ = ["Launcher", "MultiDeviceLauncher", "Variant", "structure_key"]

"""``qml.Tracker`` records for the device runs qhybrid makes itself (``qhybrid.execute``, QNodes, JPCs).

PennyLane's workflow is tracked by the devices' ``simulator_tracking``; qhybrid's own entry points call
``simulate_variants`` directly, so they record here: one batch per device call, one execution per
variant, and the shots drawn.
"""

from __future__ import annotations

from typing import Sequence

from ._variant import Variant


def track_run(device, variants: Sequence[Variant]) -> None:
    """Record one device call of ``variants`` on the device's active tracker, if any.

    >>> import qhybrid, pennylane as qml
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> with qml.Tracker(dev) as tracker:
    ...     track_run(dev, [])
    >>> tracker.totals["batches"]
    1
    """
    tracker = getattr(device, "tracker", None)
    if tracker is None or not tracker.active:
        return
    shots = sum(int(v.tape.shots.total_shots) for v in variants if v.tape.shots)
    update = {"batches": 1, "executions": len(variants), "simulations": len(variants)}
    if shots:
        update["shots"] = shots
    tracker.update(**update)
    tracker.record()


__all__ = ["track_run"]

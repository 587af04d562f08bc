"""``qml.Tracker`` records for the device runs qhybrid makes itself (``qhybrid.execute``, QNodes, JPCs).

PennyLane's workflow is tracked by PennyLane's ``simulator_tracking`` on each device's ``execute``;
qhybrid's own entry points call ``simulate_variants`` directly, so they record here, with the records
that wrapper makes for the same tapes: a ``batches`` record per device call, then one record per circuit
with its ``simulations``, ``executions`` and ``shots`` (PennyLane's count: one per measurement group,
times the broadcast size) and its ``resources`` and ``errors`` (no ``results``: the record is made
before the run). The settings of a split shot vector
(:class:`~qhybrid.devices._shot_vectors.ShotVectorPart`) are one circuit, as on default.qubit.
"""

from __future__ import annotations

from typing import Sequence

from pennylane.devices.qubit.sampling import get_num_shots_and_executions
from pennylane.tape import QuantumScript

from .._variant import Variant
from ._shot_vectors import vector_setting


def _circuits(variants: Sequence[Variant]) -> list[tuple[QuantumScript, int]]:
    """(tape, shots) per circuit: a later setting of a shot vector adds its shots to the circuit of setting 0
    it belongs to (the n-th part of setting k joins the n-th part of setting 0, whichever order they come in)."""
    circuits: list[list] = []
    firsts: list[int] = []  # positions in ``circuits`` of the setting-0 parts, in order
    joined: dict[int, int] = {}  # setting -> parts of it joined so far
    for v in variants:
        setting = vector_setting(v.tape)
        _, shots = get_num_shots_and_executions(v.tape)
        if not setting:
            if setting == 0:
                firsts.append(len(circuits))
            circuits.append([v.tape, shots])
            continue
        n = joined.get(setting, 0)
        joined[setting] = n + 1
        circuits[firsts[n]][1] += shots
    return [(tape, shots) for tape, shots in circuits]


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
    tracker.update(batches=1)
    tracker.record()
    for tape, shots in _circuits(variants):
        executions, _ = get_num_shots_and_executions(tape)
        specs = tape.specs
        update = {"simulations": 1, "executions": executions, "resources": specs["resources"], "errors": specs["errors"]}
        if tape.shots:
            update["shots"] = shots
        tracker.update(**update)
        tracker.record()


__all__ = ["track_run"]

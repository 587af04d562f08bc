"""``qml.Tracker`` records for the device runs qhybrid makes itself (``qhybrid.execute``, QNodes, JPCs), and
the rule that a shot vector is one execution however a device splits it.

PennyLane's workflow is tracked by the devices' ``simulator_tracking``; qhybrid's own entry points call
``simulate_variants`` directly, so they record here: one batch per device call, one execution per
variant, and the shots drawn. A device that runs a shot vector as one job per setting (qhybrid.aer) marks
the split tapes' shots with :class:`ShotVectorPart`, so both kinds of record count the vector once, as
default.qubit does.
"""

from __future__ import annotations

from functools import wraps
from typing import Sequence

from pennylane.devices.qubit.sampling import get_num_shots_and_executions
from pennylane.measurements import Shots
from pennylane.tape import QuantumScript

from .._variant import Variant


class ShotVectorPart(Shots):
    """The shots of one setting of a shot vector that a device runs as its own job; ``first`` marks the
    setting that stands for the whole vector's execution. A ``Shots`` in every other respect (equal to
    ``Shots(shots)``), and it survives ``tape.copy`` (``Shots(part)`` is ``part``).

    >>> ShotVectorPart(10, first=False) == Shots(10)
    True
    """

    def __new__(cls, shots, first: bool = True):  # Shots.__new__ takes no ``first``
        return shots if isinstance(shots, cls) else object.__new__(cls)

    def __init__(self, shots, first: bool = True):
        if shots is self:  # ``Shots(part)`` hands the part back and Python re-runs __init__ on it
            return
        super().__init__(shots)
        object.__setattr__(self, "first", first)  # Shots freezes itself in __init__


def _continues_a_vector(tape: QuantumScript) -> bool:
    return isinstance(tape.shots, ShotVectorPart) and not tape.shots.first


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
    runs = sum(1 for v in variants if not _continues_a_vector(v.tape))
    update = {"batches": 1, "executions": runs, "simulations": runs}
    if shots:
        update["shots"] = shots
    tracker.update(**update)
    tracker.record()


def track_execute(execute):
    """``Device.execute`` with PennyLane's ``simulator_tracking`` records, except that the later parts of a
    split shot vector add their shots but no execution (use on the undecorated ``execute``)."""

    @wraps(execute)
    def tracked(self, circuits, execution_config=None):
        results = execute(self, circuits, execution_config)
        if self.tracker.active:
            single = isinstance(circuits, QuantumScript)
            batch, batch_results = ((circuits,), (results,)) if single else (circuits, results)
            self.tracker.update(batches=1)
            self.tracker.record()
            for r, c in zip(batch_results, batch):
                executions, shots = get_num_shots_and_executions(c)
                runs = 0 if _continues_a_vector(c) else 1
                update = {"simulations": runs, "executions": executions * runs, "results": r}
                if c.shots:
                    update["shots"] = shots
                self.tracker.update(**update, resources=c.specs["resources"], errors=c.specs["errors"])
                self.tracker.record()
        return results

    return tracked


__all__ = ["ShotVectorPart", "track_execute", "track_run"]

"""Mid-circuit measurements run deferred, each measured wire used again on a wire of its own: where the device has
no spare wire for them, the refusal says so (PennyLane's own names a wire the user never wrote: ``{2}``).

>>> import pennylane as qml
>>> def circuit():
...     m = qml.measure(0)
...     qml.Hadamard(0)
...     return qml.expval(qml.Z(0))
>>> tape = qml.tape.make_qscript(circuit)()
>>> try:
...     spare_wires_for_deferral(tape, device_wires=qml.wires.Wires([0]))
... except qml.wires.WireError as e:
...     print(str(e)[:60])
The circuit's mid-circuit measurements run deferred: each me
"""

from __future__ import annotations

import pennylane as qml
from pennylane.tape import QuantumScript
from pennylane.transforms import defer_measurements
from pennylane.wires import WireError


@qml.transform
def spare_wires_for_deferral(tape: QuantumScript, device_wires=None):
    """``tape`` itself; a ``WireError`` naming what is missing where its deferred form needs more wires than the
    device has."""
    if device_wires is None or not any(isinstance(op, qml.measurements.MidMeasureMP) for op in tape.operations):
        return (tape,), _first
    try:
        (deferred,), _ = defer_measurements(tape, allow_postselect=True)
    except Exception:  # noqa: BLE001 (PennyLane's own transform reports it where it runs)
        return (tape,), _first
    missing = [w for w in deferred.wires if w not in device_wires]
    if missing and all(w in device_wires for w in tape.wires):
        raise WireError(
            f"The circuit's mid-circuit measurements run deferred: each measured wire used again (or reset) after "
            f"its measurement takes a spare wire of the device, and this one has none left ({len(missing)} "
            f"needed beside the circuit's {len(tape.wires)} wires, the device has {len(device_wires)}). Create the "
            f"device with {len(device_wires) + len(missing)} wires, or with wires=None."
        )
    return (tape,), _first


def _first(results):
    return results[0]


__all__ = ["spare_wires_for_deferral"]

"""What a quantum function returns: its measurements in order, and a run's results put back in that shape.

One measurement, a list or tuple of them, or any PennyLane pytree of them (a dict, nested lists), as PennyLane's
QNode takes them; with a shot vector, one such structure per shot entry, in a tuple.

>>> import pennylane as qml
>>> out = {"z": qml.expval(qml.Z(0)), "rest": [qml.probs(wires=[1]), qml.var(qml.X(0))]}
>>> [type(m).__name__ for m in returned_measurements(out)]
['ExpectationMP', 'ProbabilityMP', 'VarianceMP']
>>> shaped_like((1.0, [0.5, 0.5], 0.2), out)
{'z': 1.0, 'rest': [[0.5, 0.5], 0.2]}
"""

from __future__ import annotations

from pennylane import pytrees
from pennylane.measurements import MeasurementProcess


def _is_measurement(obj) -> bool:
    return isinstance(obj, MeasurementProcess)


def _flat_sequence(out) -> bool:
    return isinstance(out, (list, tuple)) and all(isinstance(m, MeasurementProcess) for m in out)


def returned_measurements(out) -> list[MeasurementProcess] | None:
    """The measurements in ``out`` in PennyLane's flattening order, or None where ``out`` holds anything else (or
    no measurement)."""
    if isinstance(out, MeasurementProcess):
        return [out]
    if _flat_sequence(out):
        return list(out) or None
    leaves = pytrees.flatten(out, is_leaf=_is_measurement)[0]
    if leaves and all(isinstance(m, MeasurementProcess) for m in leaves):
        return leaves
    return None


def shaped_like(result, out, partitioned: bool = False):
    """A one-tape ``result`` (the single measurement's value, or one value a measurement) in the structure the
    quantum function returned (``out``); ``partitioned``: ``result`` holds one such result a shot-vector entry."""
    if partitioned:
        return tuple(shaped_like(r, out) for r in result)
    if isinstance(out, MeasurementProcess):
        return result
    if _flat_sequence(out):
        return type(out)((result,) if len(out) == 1 else result)
    leaves, structure = pytrees.flatten(out, is_leaf=_is_measurement)
    return pytrees.unflatten((result,) if len(leaves) == 1 else result, structure)


__all__ = ["returned_measurements", "shaped_like"]

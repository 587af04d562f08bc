"""Controls on |0> written as controls on |1> between X gates, where PennyLane's own binding would lose them.

PennyLane's interfaces put NumPy values into a tape (``bind_new_parameters``) before a device runs it, and its
binding makes a ``ControlledQubitUnitary`` anew with every control value 1: ``ControlledQubitUnitary(U,
control_values=[0])`` ran as a control on |1> under adjoint, silently (default.qubit's adjoint, parameter-shift
and finite differences give the same wrong number). The device's preprocessing writes such a control on |0>
as ``X``, a control on |1>, ``X``, which every binding keeps.

>>> import numpy as np
>>> op = qml.ControlledQubitUnitary(np.eye(2), wires=[0, 1], control_values=[0])
>>> [o.name for o in on_ones([op])]
['PauliX', 'ControlledQubitUnitary', 'PauliX']
"""

from __future__ import annotations

import pennylane as qml
from pennylane.ops.op_math import Adjoint, Controlled, Pow

_WRAPPERS = (Adjoint, Pow)


def on_ones(operations) -> list:
    """``operations`` with every control on |0> whose binding would lose it written between X gates (the same
    list where there is none)."""
    if not any(_loses_zero_controls(op) for op in operations):
        return operations
    out = []
    with qml.QueuingManager.stop_recording():
        for op in operations:
            if not _loses_zero_controls(op):
                out.append(op)
                continue
            zeros = _zero_wires(op)
            flips = [qml.X(w) for w in zeros]
            out += flips + [_all_ones(op)] + flips
    return out


def _controlled(op):
    while isinstance(op, _WRAPPERS):
        op = op.base
    return op if isinstance(op, Controlled) else None


def _loses_zero_controls(op) -> bool:
    inner = _controlled(op)
    if inner is None or all(inner.control_values):
        return False
    try:
        bound = _controlled(qml.ops.functions.bind_new_parameters(op, list(op.data)))
    except Exception:  # noqa: BLE001 (a binding that fails outright loses nothing silently)
        return False
    return bound is None or list(bound.control_values) != list(inner.control_values)


def _zero_wires(op) -> list:
    inner = _controlled(op)
    return [w for w, v in zip(inner.control_wires, inner.control_values) if not v]


def _all_ones(op):
    if isinstance(op, Adjoint):
        return qml.adjoint(_all_ones(op.base))
    if isinstance(op, Pow):
        return qml.pow(_all_ones(op.base), op.z)
    return qml.ctrl(op.base, op.control_wires, work_wires=op.work_wires, work_wire_type=op.work_wire_type)


__all__ = ["on_ones"]

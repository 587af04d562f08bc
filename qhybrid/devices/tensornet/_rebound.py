"""An operator with other data (PennyLane's ``bind_new_parameters``), where PennyLane's binding would lose
something: an ``Evolution``'s generator, a symbolic operator's base, a user's setting kept outside
``hyperparameters``, a ``QubitChannel`` of one Kraus operator."""

from __future__ import annotations

import copy

import pennylane as qml
from pennylane.operation import _UNSET_BATCH_SIZE as _BATCH_UNSET
from pennylane.ops.op_math import Evolution, ScalarSymbolicOp, SymbolicOp

from .._observable_key import Inexact, own_attributes


def rebound(op: qml.operation.Operator, params: list) -> qml.operation.Operator:
    """``op`` with data ``params`` (PennyLane's ``bind_new_parameters``). An ``Evolution``'s data is its parameter
    alone, and PennyLane's binding would rebind its generator's data from the same list (an ``IndexError`` where
    the generator has coefficients): it keeps its generator."""
    if isinstance(op, Evolution) and len(params) == len(op.data) == 1:
        return Evolution(op.base, params[0])
    if isinstance(op, qml.QubitChannel):
        # PennyLane's binding hands a channel of one Kraus operator that matrix alone, read as its rows (an
        # IndexError): the list of Kraus operators instead
        with qml.QueuingManager.stop_recording():
            return qml.QubitChannel(list(params), wires=op.wires, id=op.id)
    if _keeps_own_settings(op):
        # PennyLane's binding makes a new instance from the data and hyperparameters alone: a user's class that keeps
        # a setting in an attribute of its own (``self.axis``) got its default (an RY ran as RX): a copy keeps it
        new = copy.copy(op)
        new.data = tuple(params)
        new._batch_size = new._ndim_params = _BATCH_UNSET
        return new
    try:
        new = qml.ops.functions.bind_new_parameters(op, params)
        if new is not op and getattr(new, "_batch_size", _BATCH_UNSET) is not _BATCH_UNSET:
            # PennyLane's fallback for a class its call cannot remake (MultiRZ: its hyperparameters are no keyword of
            # its own) deep-copies the operator with its batch size: a batch of 3 repeated to 6000 stayed 3
            new._batch_size = new._ndim_params = _BATCH_UNSET
        return new
    except RuntimeError:
        # PennyLane's binding deep-copies the hyperparameters, which a tensor computed from the arguments refuses
        # (``BlockEncode``'s norm of a trainable value, not a graph leaf): a new instance from the data and metadata
        # instead (PennyLane's pytree form, as ``jax`` rebuilds operators), its settings made anew from the new data
        if isinstance(op, qml.ops.op_math.Adjoint):  # (its pytree data is its base, not numbers)
            with qml.QueuingManager.stop_recording():
                return qml.adjoint(rebound(op.base, params))
        if isinstance(op, qml.ops.op_math.Controlled):  # (a control of such an operator: ``ctrl(BlockEncode(A))``)
            return controlled_like(op, rebound(op.base, params))
        data, metadata = op._flatten()
        if len(data) != len(params) or any(isinstance(d, qml.operation.Operator) for d in data):
            raise
        return type(op)._unflatten(tuple(params), metadata)


_pennylane_evolution_binding = qml.ops.functions.bind_new_parameters.dispatch(Evolution)


@qml.ops.functions.bind_new_parameters.register(Evolution)
def _bind_evolution(op: Evolution, params):
    """An ``Evolution``'s one parameter rebound with its generator kept as it is. PennyLane's binding rebinds the
    generator from the parameters after the first, which an evolution's data does not hold: ``qml.evolve(X + 0.5 Z,
    t)`` raised an IndexError, ``qml.evolve(Hermitian(A), t)`` a Hermitian without its matrix. PennyLane reaches it
    itself: its torch interface converts every executed tape's data to numpy by this binding (a plugin device's
    adjoint of such an evolution crashed there)."""
    if len(params) != 1 or len(op.data) != 1:
        return _pennylane_evolution_binding(op, params)
    with qml.QueuingManager.stop_recording():  # (PennyLane's rebinds the generator from the parameters after the
        return Evolution(op.base, params[0])  # first: a Hermitian lost its matrix, a sum its coefficients)


def _bind_symbolic(op, params):
    """PennyLane's binding of a symbolic operator (``qml.ctrl``'s ``Controlled``, ``qml.exp``'s ``Exp``) without its
    deep copy of the base, which it drops: a base holding a tensor computed from the arguments refused the copy (not
    a graph leaf), so PennyLane's QNode with parameter-shift or adjoint on a plugin device crashed on
    ``qml.ctrl(qml.evolve(H, t))`` where it rebinds the tape. The rest of the hyperparameters are copied as before."""
    scalar = isinstance(op, ScalarSymbolicOp)
    new_base = qml.ops.functions.bind_new_parameters(op.base, params[1:] if scalar else params)
    settings = copy.deepcopy({k: v for k, v in op.hyperparameters.items() if k != "base"})
    return op.__class__(new_base, params[0], **settings) if scalar else op.__class__(new_base, **settings)


qml.ops.functions.bind_new_parameters.register(SymbolicOp)(_bind_symbolic)
qml.ops.functions.bind_new_parameters.register(ScalarSymbolicOp)(_bind_symbolic)


def controlled_like(op, base):
    """``base`` under the control of ``op`` (a ``Controlled``): its control wires, values and work wires."""
    with qml.QueuingManager.stop_recording():
        return qml.ctrl(
            base, op.control_wires, control_values=op.control_values,
            work_wires=op.work_wires, work_wire_type=op.work_wire_type,
        )  # fmt: skip


def _keeps_own_settings(op) -> bool:
    try:
        return bool(own_attributes(op))
    except Inexact:
        return True


__all__ = ["rebound", "controlled_like"]

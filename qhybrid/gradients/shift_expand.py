"""Trainable operators without a parameter-shift rule decomposed into ones with rules, before a parameter-shift run.

``qml.pow(qml.RX(t, 0), 3)``, ``qml.prod(qml.RX(t, 0), qml.RY(2 * t, 1))`` or a ``ControlledSequence`` have no
shift rule of their own; PennyLane's parameter-shift decomposes them, and so does this: their parts (``RX(3 t)``)
carry torch tensors made from the user's, so the chain rule back to ``t`` is torch's. Operators whose trainable
parameters all have rules are left as they are, and so are untrainable ones. A conditional operator
(``qml.cond(m, qml.U3)``) runs deferred, as a controlled one: where that has no rule, its parts are conditioned.

>>> import torch
>>> t = torch.tensor(0.3, requires_grad=True)
>>> tape = qml.tape.QuantumScript([qml.pow(qml.RX(t, 0), 3)], [qml.expval(qml.Z(0))])
>>> [op.name for op in expanded_for_shift_rules(tape).operations]
['RX']
"""

from __future__ import annotations

import pennylane as qml
import torch
from pennylane.devices.preprocess import decompose
from pennylane.ops import Conditional, Controlled
from pennylane.tape import QuantumScript

from ..devices.tensornet._structure import decomposes, may_be_non_unitary, settings_repr
from ..errors import GradientError
from .parameter_shift import shift_rule


def _trainable(op) -> list[int]:
    return [k for k, d in enumerate(op.data) if isinstance(d, torch.Tensor) and d.requires_grad]


def _has_rules(op) -> bool:
    """Whether each trainable parameter of ``op`` has a shift rule."""
    try:
        for k in _trainable(op):
            shift_rule(op, k)
    except GradientError:
        return False
    return True


_PARTS_STAY: dict = {}
"""Per kind of operator the device decomposes (name, wires, settings, trainable positions): whether all its parts
may stay (decided once: a template is not decomposed here on every call)."""


def _stays(op, kept) -> bool:
    """Whether ``op`` may stay for the device: no trainable parameter, or each has a shift rule where the device runs
    ``op`` whole (``kept``), or else all the parts it decomposes into stay. What cannot be decomposed stays (the
    shift rule's error then names it). A conditional stays where its operator does (``_conditional_parts``)."""
    if isinstance(op, Conditional):
        return _stays(_deferred(op.base), kept)
    trainable = _trainable(op)
    if not trainable or getattr(type(op), "grad_method", None) == "A" and getattr(type(op), "grad_recipe", None) is None:
        return True  # (a named gate's class says so: no rule is derived here)
    whole = kept(op)
    if whole and _has_rules(op):  # (before asking PennyLane about a decomposition: a controlled gate's test reads
        return True  # its base's matrix to the host)
    batched = op.batch_size is not None  # (a batch of states is a matrix by its shape, not a matrix parameter)
    if may_be_non_unitary(op) or not decomposes(op) or any(op.data[k].is_complex() or op.data[k].ndim - batched > 1 for k in trainable):
        # a trainable matrix (QubitUnitary): its decomposition's angles would give the derivative along unitary
        # directions only, not its entries' (the shift rule's error names it instead)
        return True
    if whole:  # no rule of its own (asked above)
        return False
    key = (type(op), op.name, len(op.wires), settings_repr(op), tuple(trainable))
    hit = _PARTS_STAY.get(key)
    if hit is None:
        hit = _PARTS_STAY[key] = all(_stays(part, kept) for part in op.decomposition())
        if len(_PARTS_STAY) > 4096:
            _PARTS_STAY.clear()
    return hit


def expanded_for_shift_rules(tape: QuantumScript, kept=lambda op: True) -> QuantumScript:
    """``tape`` with every trainable operator that has no shift rule decomposed (``tape`` itself where none);
    ``kept(op)``: whether the device runs ``op`` as it is (else it decomposes it, from its cached preprocessing,
    and ``op`` stays where its parts do)."""
    stays = lambda op: _stays(op, kept)  # noqa: E731
    if all(stays(op) for op in tape.operations):
        return tape
    if any(isinstance(op, Conditional) and not stays(op) for op in tape.operations):
        tape = tape.copy(operations=[p for op in tape.operations for p in _conditional_parts(op, stays)])
    (new,), _ = decompose(tape, stopping_condition=stays, skip_initial_state_prep=False, name="parameter-shift")
    return new


def _conditional_parts(op, stays) -> list:
    """``[op]``, or for a conditional whose operator has no shift rule (``qml.cond(m, qml.U3)``) that operator's
    parts, each under the same condition: PennyLane's ``Conditional`` has no decomposition of its own, and the
    measurement's deferral would otherwise leave a controlled ``U3`` without a rule."""
    if not isinstance(op, Conditional) or stays(op):
        return [op]
    (parts,), _ = decompose(
        QuantumScript([op.base]), stopping_condition=lambda part: stays(_deferred(part)), skip_initial_state_prep=False,
        name="parameter-shift",
    )
    return [Conditional(op.meas_val, part) for part in parts.operations]


_MEASURED_WIRE = "_qhybrid_measured"
"""A wire label no circuit uses: the control of a conditional operator as the measurement's deferral makes it."""


def _deferred(op):
    """``op`` controlled by one more wire, as ``qml.defer_measurements`` runs ``qml.cond(m, op)``: ``U3`` has a shift
    rule of its own, its controlled form none. The generic controlled operator, on the value 0: a condition on
    ``~m`` or on several measurements makes it (``C(Rot)``, no rule) where ``m`` alone makes ``CRot`` (a rule)."""
    with qml.QueuingManager.stop_recording():
        return Controlled(op, control_wires=[_MEASURED_WIRE], control_values=[False])


__all__ = ["expanded_for_shift_rules"]

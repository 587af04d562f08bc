"""Trainable operators without a parameter-shift rule decomposed into ones with rules, before a parameter-shift run.

``qml.pow(qml.RX(t, 0), 3)``, ``qml.prod(qml.RX(t, 0), qml.RY(2 * t, 1))`` or a ``ControlledSequence`` have no
shift rule of their own; PennyLane's parameter-shift decomposes them, and so does this: their parts (``RX(3 t)``)
carry torch tensors made from the user's, so the chain rule back to ``t`` is torch's. Operators whose trainable
parameters all have rules are left as they are, and so are untrainable ones.

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
    shift rule's error then names it)."""
    trainable = _trainable(op)
    if not trainable or getattr(type(op), "grad_method", None) == "A" and getattr(type(op), "grad_recipe", None) is None:
        return True  # (a named gate's class says so: no rule is derived here)
    whole = kept(op)
    if whole and _has_rules(op):  # (before asking PennyLane about a decomposition: a controlled gate's test reads
        return True  # its base's matrix to the host)
    if may_be_non_unitary(op) or not decomposes(op) or any(op.data[k].is_complex() or op.data[k].ndim > 1 for k in trainable):
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
    (new,), _ = decompose(tape, stopping_condition=stays, skip_initial_state_prep=False, name="parameter-shift")
    return new


__all__ = ["expanded_for_shift_rules"]

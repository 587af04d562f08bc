"""``qml.exp(H, c)`` with an imaginary coefficient (PennyLane's own example: ``qml.exp(qml.X(0), -0.5j * x)``) is the
evolution ``exp(-i t H)`` with the real time ``t = i c``: run as ``qml.evolve(H, t)``, whose angle the engines take
(they take no complex angle), with ``t`` computed from ``c`` by torch, so gradients reach ``x``. PennyLane's own
decomposition of it fails on torch tensors (``real_if_close``), and so does its decomposition of an adjoint
evolution: under ``qml.ctrl`` and ``qml.adjoint`` the same holds, and ``qml.adjoint(qml.evolve(H, t))`` runs as
``qml.evolve(H, -t)``. A coefficient with a real part (a non-unitary operator) or a base not known to be Hermitian
is left as it is, and refused by name.

>>> import torch
>>> x = torch.tensor(0.4, requires_grad=True)
>>> (new,), _ = evolutions_from_exponentials(qml.tape.QuantumScript([qml.exp(qml.X(0), -0.5j * x)]))
>>> type(new.operations[0]).__name__, new.operations[0].data
('Evolution', (tensor(0.2000, grad_fn=<SelectBackward0>),))
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
from pennylane.ops.op_math import Adjoint, Controlled, Evolution, Exp
from pennylane.tape import QuantumScript

from .._rebound import controlled_like

IMAGINARY_TOLERANCE = 1e-12
"""A coefficient whose real parts are at most this (relative to its size) is taken as imaginary."""


@qml.transform
def evolutions_from_exponentials(tape: QuantumScript):
    """``tape`` with every ``Exp`` of an imaginary coefficient and a Hermitian base as an ``Evolution`` (under
    ``qml.ctrl`` and ``qml.adjoint`` too), an adjoint evolution as one backwards (the same tape where there is none)."""
    with qml.QueuingManager.stop_recording():
        ops = [_rewritten(op) for op in tape.operations]
    if all(a is b for a, b in zip(ops, tape.operations)):
        return (tape,), _first
    return (tape.copy(operations=ops),), _first


def _rewritten(op):
    """``op`` with an imaginary exponential as an evolution, also under ``qml.ctrl``, and the adjoint of an
    evolution as the evolution backwards (PennyLane decomposes ``qml.adjoint(qml.evolve(P, t))`` through
    ``real_if_close``, which fails on torch tensors); else ``op`` itself."""
    if type(op) is Exp:
        return _evolution(op) if _imaginary_exponential(op) else op
    if isinstance(op, Adjoint):
        base = _evolution(op.base) if type(op.base) is Exp and _imaginary_exponential(op.base) else op.base
        if isinstance(base, Evolution) and len(base.data) == 1:
            return Evolution(base.base, -base.data[0])
        return op
    if isinstance(op, Controlled) and type(op.base) is Exp and _imaginary_exponential(op.base):
        return controlled_like(op, _evolution(op.base))
    return op


@qml.transform
def pauli_rotations_from_evolutions(tape: QuantumScript):
    """``tape`` with every ``Evolution`` of one Pauli word ``c P`` as ``PauliRot(2 c t, P)``, its angle computed by
    torch where ``t`` is a tensor (PennyLane's own decomposition of it fails on torch tensors: ``real_if_close``):
    for devices that decompose evolutions (qhybrid.aer)."""
    if not any(_one_word(op) for op in tape.operations):
        return (tape,), _first
    with qml.QueuingManager.stop_recording():
        ops = [_rotation(op) if _one_word(op) else op for op in tape.operations]
    return (tape.copy(operations=ops),), _first


def _one_word(op) -> bool:
    if not isinstance(op, Evolution) or len(op.data) != 1:
        return False
    rep = op.base.pauli_rep
    return rep is not None and len(rep) == 1 and len(next(iter(rep))) > 0


def _rotation(op: Evolution):
    ((word, coeff),) = op.base.pauli_rep.items()
    wires = list(word.keys())
    return qml.PauliRot(2 * qml.math.real(coeff) * op.data[0], "".join(word[w] for w in wires), wires=wires)


def _imaginary_exponential(op) -> bool:
    if type(op) is not Exp or not _is_complex(op.coeff) or not op.base.is_verified_hermitian:
        return False
    # (one read to the host a call: the check that keeps a non-unitary operator from running as a rotation)
    c = np.asarray(qml.math.unwrap(qml.math.detach(op.coeff)))
    return bool(np.all(np.abs(c.real) <= IMAGINARY_TOLERANCE * np.maximum(1.0, np.abs(c))))


def _evolution(op: Exp) -> Evolution:
    t = qml.math.real(1j * op.coeff)  # exp(c H) = exp(-i t H) for t = i c
    return Evolution(op.base, t)


def _is_complex(c) -> bool:
    return isinstance(c, complex) or "complex" in str(getattr(c, "dtype", ""))


def _first(results):
    return results[0]


__all__ = ["evolutions_from_exponentials", "pauli_rotations_from_evolutions"]

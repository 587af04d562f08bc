"""Expectations and variances of observables that are not Hermitian are refused by name.

A product of non-commuting factors on one wire (``qml.Z(0) @ qml.X(0)``, which is ``1j * Y(0)``) or a sum with a
complex coefficient is not an observable: its expectation is complex. default.qubit returns that complex number;
qhybrid's engines read real expectations, and would silently return the real part (0 for ``1j * Y(0)``).

>>> tape = qml.tape.QuantumScript([qml.RX(0.3, 0)], [qml.expval(qml.Z(0) @ qml.X(0))])
>>> refuse_non_hermitian(tape)
Traceback (most recent call last):
...
qhybrid.errors.UnsupportedOperationError: expval of Z(0) @ X(0) ...
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch
from pennylane.measurements import ExpectationMP, VarianceMP
from pennylane.tape import QuantumScript

from ....errors import UnsupportedOperationError

MATRIX_CHECK_MAX_WIRES = 8
"""Observables without a Pauli form are checked through their matrix up to this many wires (larger ones are
taken as given: a ``Hermitian`` checks its own matrix, a ``SparseHamiltonian`` is not built here)."""


def _first(results):
    return results[0]


def _complex_coefficient(c) -> bool:
    if isinstance(c, (float, int, np.floating, np.integer)):  # (most coefficients: the cheap test first)
        return False
    if isinstance(c, (complex, np.complexfloating)):
        return abs(c.imag) > 1e-12
    if isinstance(c, torch.Tensor):
        # a complex tensor's values decide (rare: a trainable complex coefficient; a host read on a GPU)
        return c.is_complex() and not qml.math.is_abstract(c) and bool((c.imag.abs() > 1e-12).any())
    if isinstance(c, np.ndarray) and np.iscomplexobj(c):
        return bool((np.abs(c.imag) > 1e-12).any())
    return False


def not_hermitian(obs) -> bool:
    """Whether ``obs`` is surely not Hermitian: a Pauli form with a complex coefficient, or (small, no Pauli form) a
    matrix that is not."""
    ps = obs.pauli_rep
    if ps is not None:
        return any(_complex_coefficient(c) for c in ps.values())
    if isinstance(obs, qml.ops.CompositeOp | qml.ops.SymbolicOp) and len(obs.wires) <= MATRIX_CHECK_MAX_WIRES:
        try:
            return not qml.is_hermitian(obs)
        except Exception:  # noqa: BLE001 - no matrix to check: taken as given
            return False
    return False


@qml.transform
def refuse_non_hermitian(tape: QuantumScript):
    """``tape`` unchanged, or ``UnsupportedOperationError`` naming an expectation or variance of an observable that is
    not Hermitian."""
    for mp in tape.measurements:
        if isinstance(mp, (ExpectationMP, VarianceMP)) and mp.obs is not None and not_hermitian(mp.obs):
            kind = "expval" if isinstance(mp, ExpectationMP) else "var"
            form = f" (its Pauli form is {mp.obs.pauli_rep})" if mp.obs.pauli_rep is not None else ""
            raise UnsupportedOperationError(
                f"{kind} of {mp.obs} is not supported: the observable is not Hermitian{form}, so its expectation "
                "is complex and the device reads real ones. Factors on the same wire multiply as matrices "
                "(qml.Z(0) @ qml.X(0) is 1j * Y(0)): measure a Hermitian observable, e.g. the real and imaginary "
                "parts' operators separately."
            )
    return (tape,), _first


__all__ = ["refuse_non_hermitian", "not_hermitian"]

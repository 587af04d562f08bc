"""Parameter-shift for an observable's trainable coefficients (``qml.expval(qml.Hamiltonian(c, ops))``).

An expectation value is affine in each coefficient of a sum, a scaled operator or a product of them (each
coefficient is its own parameter, however often one tensor is passed), so ``d<O>/dc = (<O(c + 1)> - <O(c - 1)>) / 2``
exactly: two runs of the same circuit with the coefficient moved, on any device, shots included. PennyLane's
parameter-shift differentiates them too (``d<H>/dc_k = <O_k>``). Observables of any other form (a ``Hermitian``
matrix, a power), and variances (quadratic in the coefficient through ``O @ O``), are refused by name.

>>> tape = qml.tape.QuantumScript([qml.RX(0.3, 0)], [qml.expval(qml.Hamiltonian([0.5, 1.0], [qml.Z(0), qml.X(0)]))])
>>> coefficient_rule(tape, tape, 2, 1).tolist()
[[0.5, 1.0, 1.0], [-0.5, 1.0, -1.0]]
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

from ..errors import GradientError

_RULE = np.array([[0.5, 1.0, 1.0], [-0.5, 1.0, -1.0]])
"""Rows ``[coefficient, multiplier, shift]``: the central difference of unit step, exact for an affine function."""


def coefficient_rule(tape, linear_tape, j: int, n_ops: int) -> np.ndarray:
    """The rule of ``tape``'s parameter ``j``, the ``(j - n_ops)``-th of its observables' data; ``linear_tape``: the
    tape the shifted runs measure (``tape`` itself unless a variance was rewritten). ``GradientError`` where the
    expectation is not affine in it."""
    at = j - n_ops
    for mp in tape.measurements:
        data = () if mp.obs is None else mp.obs.data
        if at < len(data):
            break
        at -= len(data)
    else:  # (not an observable's parameter)
        raise GradientError(f"parameter {j} of the tape is not an observable's")
    if not isinstance(mp, qml.measurements.ExpectationMP) or linear_tape is not tape:
        where = (
            "a variance (quadratic in it)" if isinstance(mp, qml.measurements.VarianceMP)
            else "an expectation measured beside a variance" if isinstance(mp, qml.measurements.ExpectationMP)
            else f"a {type(mp).__name__}"
        )  # fmt: skip
        raise GradientError(
            f"A trainable coefficient of {mp.obs} in {where} has no parameter-shift rule here; use "
            "diff_method='adjoint' or make it non-trainable."
        )
    if not _affine_in(mp.obs, at):
        raise GradientError(
            f"Trainable parameters of the observable {mp.obs} have no parameter-shift rule (its expectation is "
            "affine only in the coefficients of sums, scaled operators and their products); use diff_method='adjoint' "
            "or make them non-trainable."
        )
    value = mp.obs.data[at]
    if torch.as_tensor(value).ndim > 0:
        raise GradientError(
            f"The coefficient {at} of {mp.obs} has shape {tuple(torch.as_tensor(value).shape)}; parameter-shift "
            "differentiates scalar coefficients only. Use diff_method='adjoint'."
        )
    return _RULE


def _affine_in(obs, at: int) -> bool:
    """Whether ``obs``'s data entry ``at`` is a coefficient of an affine node on every level above it (a constant
    ``Hermitian`` beside it is allowed: its matrix is no coefficient, and not trainable)."""
    if isinstance(obs, qml.ops.SProd):  # (a LinearCombination is a Sum of them: its data are theirs, in order)
        return at == 0 or _affine_in(obs.base, at - 1)
    if isinstance(obs, (qml.ops.Sum, qml.ops.Prod)):
        for part in obs.operands:
            if at < len(part.data):
                return _affine_in(part, at)
            at -= len(part.data)
    return False


__all__ = ["coefficient_rule"]

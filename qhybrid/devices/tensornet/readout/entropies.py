"""Purity, von Neumann entropy and mutual information as functions of a measured reduced density matrix.

Each is a function of the reduced density matrix of its wires, which every path of the device measures
(``qml.density_matrix``, linear in the state, so its gradients come from the adjoint or from shift rules).
The measurement is rewritten as that density matrix, and PennyLane's own ``process_density_matrix`` of the
measurement turns the matrix into the number in torch: values and gradients are the formula default.qubit
uses, on the same matrix. Exact tapes only (as default.qubit).

>>> tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.CNOT([0, 1])], [qml.vn_entropy(wires=[1])])
>>> (new,), post = entropies_from_density_matrices(tape)
>>> type(new.measurements[0]).__name__
'DensityMatrixMP'
"""

from __future__ import annotations

import pennylane as qml
import torch
from pennylane.measurements import MutualInfoMP, PurityMP, VnEntropyMP
from pennylane.tape import QuantumScript
from pennylane.wires import Wires

FROM_DENSITY_MATRIX = (PurityMP, VnEntropyMP, MutualInfoMP)
"""Measurements computed from the reduced density matrix of their wires."""


class _FromDensityMatrices:
    """The postprocessing: each rewritten measurement's number from its density matrix (module-level, so plans
    holding it pickle)."""

    def __init__(self, steps: tuple, single: bool):
        self.steps, self.single = steps, single  # per measurement: (the measurement on wires 0..k-1, k) or None

    def __call__(self, results):
        (res,) = results
        items = (res,) if self.single else res
        out = tuple(r if s is None else _in_precision(s[0].process_density_matrix(r, Wires(range(s[1]))), r)
                    for s, r in zip(self.steps, items))
        return out[0] if self.single else out


def _in_precision(value, rho):
    """``value`` in the density matrix's real precision: PennyLane's purity of a complex64 matrix is float64 (its
    entropies are float32)."""
    if isinstance(value, torch.Tensor) and isinstance(rho, torch.Tensor) and value.is_floating_point():
        return value.to(rho.real.dtype)
    return value


def _first(results):
    return results[0]


@qml.transform
def entropies_from_density_matrices(tape: QuantumScript):
    """``tape`` with each ``purity``, ``vn_entropy`` and ``mutual_info`` measured as the density matrix of its wires,
    and the postprocessing that computes them from it (exact tapes only)."""
    if tape.shots or not any(isinstance(mp, FROM_DENSITY_MATRIX) for mp in tape.measurements):
        return (tape,), _first
    measurements, steps = [], []
    for mp in tape.measurements:
        if not isinstance(mp, FROM_DENSITY_MATRIX):
            measurements.append(mp)
            steps.append(None)
            continue
        wires = mp.wires  # (mutual_info: its two groups, in order)
        # PennyLane's formulas read the measurement's wires as positions in the matrix: renumbered 0..k-1
        steps.append((mp.map_wires({w: k for k, w in enumerate(wires)}), len(wires)))
        measurements.append(qml.density_matrix(wires=wires))
    new = tape.copy(measurements=measurements)
    return (new,), _FromDensityMatrices(tuple(steps), len(measurements) == 1)


__all__ = ["entropies_from_density_matrices", "FROM_DENSITY_MATRIX"]

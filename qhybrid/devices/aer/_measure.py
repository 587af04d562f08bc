"""Measurements on Aer, the shared part: which measurements each mode serves, Pauli labels and
coefficients, observable matrices. The analytic saves are in ``_measure_analytic.py``, the shot-based
measurements in ``_measure_sampled.py``.

Conventions: the device's wire ``k`` (of ``n``) is Qiskit qubit ``n - 1 - k``, so Aer's full states and
full-width Pauli labels are already in PennyLane's order (first wire most significant). Subsystem saves
list their qubits last wire first for the same reason.

Analytic expectations use only full-width Pauli labels (identity on every other wire): Aer 0.18 drops or
misplaces the Pauli of a subsystem ``save_expectation_value`` when the circuit has idle qubits
(Qiskit/qiskit-aer#2442). Hamiltonian coefficients are applied here, not in the circuit, so the circuit
depends on which Pauli words are measured and never on their coefficients.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    CountsMP,
    DensityMatrixMP,
    ExpectationMP,
    MeasurementProcess,
    ProbabilityMP,
    SampleMeasurement,
    SampleMP,
    StateMeasurement,
    StateMP,
    VarianceMP,
)
from pennylane.pauli import PauliWord
from pennylane.wires import Wires
from qiskit.quantum_info import Pauli

from ...errors import UnsupportedOperationError

PROBABILITY_SAMPLING_MAX_WIRES = 20
"""Counts are drawn from exact outcome probabilities over at most this many measured wires; wider
measurements use Aer's own measure instructions."""

ANALYTIC_MEASUREMENTS = (ExpectationMP, VarianceMP, ProbabilityMP, StateMP, DensityMatrixMP)
"""Read from Aer's saves directly; any other ``StateMeasurement`` (entropies, purity, user-defined ones)
is computed by its own ``process_state`` / ``process_density_matrix`` from the saved state."""
SAMPLE_MEASUREMENTS = (ExpectationMP, VarianceMP, ProbabilityMP, SampleMP, CountsMP)
"""Read from the counts directly; any other ``SampleMeasurement`` gets the shots in order through its own
``process_samples``."""


def _on_mid_circuit_values(mp: MeasurementProcess) -> bool:
    return getattr(mp, "mv", None) is not None


def supported_analytic(mp: MeasurementProcess) -> bool:
    return isinstance(mp, StateMeasurement) and not _on_mid_circuit_values(mp)


def supported_sample(mp: MeasurementProcess) -> bool:
    return isinstance(mp, SampleMeasurement) and not isinstance(mp, StateMP) and not _on_mid_circuit_values(mp)


def _generic_state(mp: MeasurementProcess) -> bool:
    return isinstance(mp, StateMeasurement) and not isinstance(mp, ANALYTIC_MEASUREMENTS)


def _ordered_samples(mp: MeasurementProcess) -> bool:
    """Whether ``mp`` needs each shot's outcome in order (else the counts suffice)."""
    return not isinstance(mp, (ExpectationMP, VarianceMP, ProbabilityMP, CountsMP))


def _label(word: PauliWord, wires: Wires) -> str:
    return "".join(word.get(w, "I") for w in wires)


def _real(c) -> float:
    c = qml.math.unwrap(c)
    if hasattr(c, "detach"):
        c = c.detach().cpu().numpy()
    c = np.asarray(c)
    if c.ndim:
        raise UnsupportedOperationError(
            "Broadcast observable coefficients are not supported by qhybrid.aer; measure each set of "
            "coefficients separately."
        )
    return float(np.real(c))


def coefficients(obs, words: Sequence[PauliWord]) -> np.ndarray:
    """The observable's coefficient of each word (0 where it has none)."""
    ps = obs.pauli_rep
    return np.array([_real(ps.get(w, 0.0)) for w in words], dtype=float)


def measured_wires(mp: MeasurementProcess, wires: Wires) -> Wires:
    if mp.obs is not None:
        return mp.obs.wires
    return mp.wires if len(mp.wires) else wires


def _obs_matrix(obs) -> np.ndarray:
    return np.asarray(qml.math.unwrap(qml.matrix(obs, wire_order=obs.wires)), dtype=complex)


def _diag_unitary(obs) -> np.ndarray:
    gates = obs.diagonalizing_gates()
    if not gates:
        return np.eye(2 ** len(obs.wires), dtype=complex)
    return np.asarray(qml.matrix(qml.prod(*reversed(gates)), wire_order=obs.wires), dtype=complex)


# --- analytic ---------------------------------------------------------------------------------

"""Analytic measurements on Aer: what a circuit saves (full-width Pauli expectation values, probabilities,
states, density matrices) and how each PennyLane measurement is read back from the saves. Conventions in
``_measure.py``."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    DensityMatrixMP,
    ExpectationMP,
    MeasurementProcess,
    ProbabilityMP,
    StateMP,
    VarianceMP,
)
from pennylane.devices.qubit.measure import state_diagonalizing_gates
from pennylane.pauli import PauliWord
from pennylane.wires import Wires
from qiskit import QuantumCircuit
from qiskit.quantum_info import Pauli

from ...errors import UnsupportedOperationError
from ._measure import (
    _diag_unitary,
    _generic_state,
    _label,
    _obs_matrix,
    _on_mid_circuit_values,
    coefficients,
    measured_wires,
)


class AnalyticPlan:
    """Save instructions for one tape structure, and readers that turn their data into results.

    ``rows`` handed to :meth:`read` hold, per label, the saved data of each of a variant's parameter
    sets (a broadcast tape has several) stacked on a leading axis.
    """

    def __init__(self, tape: qml.tape.QuantumScript, wires: Wires, *, mixed: bool):
        self.wires = wires
        self.mixed = mixed
        self.words: list[str] = []  # full-width Pauli labels, saved as "w{i}"
        self._word_ix: dict[str, int] = {}
        self.saves: list[tuple[str, str, tuple]] = []  # (kind, label, wires)
        self._save_ix: dict[tuple, str] = {}
        self.readers: list[Callable] = []
        key = []
        for mp in tape.measurements:
            reader, k = self._plan(mp)
            self.readers.append(reader)
            key.append((type(mp).__name__, tuple(mp.wires), k))
        # a global phase shows only in qml.state() of a state vector (or in what a custom measurement
        # computes from it)
        self.needs_phase = not mixed and any(
            (isinstance(mp, StateMP) and not isinstance(mp, DensityMatrixMP)) or _generic_state(mp)
            for mp in tape.measurements
        )
        self.key = ("analytic", mixed, tuple(key))

    # -- planning
    def _word(self, word: PauliWord) -> int:
        """Index into the saved words; -1 for the identity."""
        if not word:
            return -1
        label = _label(word, self.wires)
        ix = self._word_ix.get(label)
        if ix is None:
            ix = self._word_ix[label] = len(self.words)
            self.words.append(label)
        return ix

    def _save(self, kind: str, wires) -> str:
        k = (kind, tuple(wires))
        label = self._save_ix.get(k)
        if label is None:
            label = self._save_ix[k] = f"{kind}{len(self.saves)}"
            self.saves.append((kind, label, tuple(wires)))
        return label

    def _plan(self, mp: MeasurementProcess):
        if isinstance(mp, (ExpectationMP, VarianceMP)):
            obs = mp.obs
            ps = obs.pauli_rep
            if ps is None:
                label = self._save("dm", obs.wires)
                fn = _matrix_expval if isinstance(mp, ExpectationMP) else _matrix_var
                return (lambda rows, m, _l=label, _f=fn: _f(rows[_l], m.obs)), ("matrix", tuple(obs.wires))
            words = list(ps)
            ixs = [self._word(w) for w in words]
            if isinstance(mp, ExpectationMP):
                return (lambda rows, m: _pauli_expval(rows, m.obs, words, ixs)), ("pauli", tuple(words))
            pairs = []
            for i, wi in enumerate(words):
                for j, wj in enumerate(words):
                    prod, phase = wi._matmul(wj)
                    if abs(np.imag(phase)) < 1e-12:  # anticommuting pairs cancel in the symmetric sum
                        pairs.append((i, j, self._word(prod), float(np.real(phase))))
            return (lambda rows, m: _pauli_var(rows, m.obs, words, ixs, pairs)), ("pauli", tuple(words))
        if isinstance(mp, ProbabilityMP):
            if mp.obs is not None:
                label = self._save("dm", mp.obs.wires)
                return (lambda rows, m, _l=label: _rotated_probs(rows[_l], m.obs)), ("obs", tuple(mp.obs.wires))
            label = self._save("probs", measured_wires(mp, self.wires))
            return (lambda rows, m, _l=label: rows[_l]), ()
        if isinstance(mp, DensityMatrixMP):
            label = self._save("dm", measured_wires(mp, self.wires))
            return (lambda rows, m, _l=label: rows[_l]), ()
        if isinstance(mp, StateMP):
            label = self._save("dm" if self.mixed else "state", self.wires)
            return (lambda rows, m, _l=label: rows[_l]), ()
        if _generic_state(mp) and not _on_mid_circuit_values(mp):
            label = self._save("dm" if self.mixed else "state", self.wires)
            # as default.qubit does: the measurement sees wires 0..n-1 (PennyLane's entropies read their
            # wires as positions in the state, whatever the wire order says)
            positions = {w: i for i, w in enumerate(self.wires)}
            order = Wires(range(len(self.wires)))

            def process(rows, m, _l=label):
                m = m.map_wires(positions)
                n = len(order)
                if not self.mixed:  # PennyLane's own path: rotate into the observable's eigenbasis, then read
                    return np.stack(
                        [np.asarray(state_diagonalizing_gates(m, np.reshape(r, (2,) * n))) for r in rows[_l]]
                    )
                gates = m.diagonalizing_gates()
                u = qml.matrix(qml.prod(*reversed(gates)), wire_order=order) if gates else None
                out = []
                for rho in rows[_l]:
                    if u is not None:
                        rho = u @ rho @ u.conj().T
                    out.append(np.asarray(m.process_density_matrix(rho, order)))
                return np.stack(out)

            return process, ()
        raise UnsupportedOperationError(
            f"Measurement {type(mp).__name__} is not supported without shots by qhybrid.aer; supported: "
            "expval, var, probs, state, density_matrix (sample and counts need shots)."
        )

    # -- circuit
    def append_to(self, qc: QuantumCircuit, qubit: Callable) -> None:
        allq = list(range(qc.num_qubits))
        for i, label in enumerate(self.words):
            qc.save_expectation_value(Pauli(label), allq, label=f"w{i}")
        for kind, label, wires in self.saves:
            qubits = [qubit(w) for w in reversed(wires)]
            if kind == "probs":
                qc.save_probabilities(qubits, label=label)
            elif kind == "dm":
                qc.save_density_matrix(qubits, label=label)
            else:
                qc.save_statevector(label=label)

    # -- reading
    def collect(self, datas: Sequence[dict]) -> dict:
        """Stack the data of a variant's parameter sets (one Aer result each) by label."""
        rows = {"words": np.array([[d[f"w{i}"] for i in range(len(self.words))] for d in datas], dtype=float)}
        rows["words"] = rows["words"].reshape(len(datas), len(self.words))
        for kind, label, _ in self.saves:
            rows[label] = np.stack([np.asarray(getattr(d[label], "data", d[label])) for d in datas])
        return rows

    def read(self, rows: dict, tape: qml.tape.QuantumScript) -> list[np.ndarray]:
        return [reader(rows, mp) for reader, mp in zip(self.readers, tape.measurements)]


def _word_values(rows: dict, ixs: Sequence[int]) -> np.ndarray:
    w = rows["words"]
    cols = [np.ones(w.shape[0]) if i < 0 else w[:, i] for i in ixs]
    return np.stack(cols, axis=-1) if cols else np.zeros((w.shape[0], 0))


def _pauli_expval(rows, obs, words, ixs) -> np.ndarray:
    return _word_values(rows, ixs) @ coefficients(obs, words)


def _pauli_var(rows, obs, words, ixs, pairs) -> np.ndarray:
    c = coefficients(obs, words)
    mean = _word_values(rows, ixs) @ c
    square = np.zeros_like(mean)
    for i, j, k, phase in pairs:
        square = square + c[i] * c[j] * phase * _word_values(rows, [k])[:, 0]
    return square - mean**2


def _matrix_expval(rho: np.ndarray, obs) -> np.ndarray:
    h = _obs_matrix(obs)
    return np.real(np.einsum("bij,ji->b", rho, h))


def _matrix_var(rho: np.ndarray, obs) -> np.ndarray:
    h = _obs_matrix(obs)
    mean = np.real(np.einsum("bij,ji->b", rho, h))
    return np.real(np.einsum("bij,ji->b", rho, h @ h)) - mean**2


def _rotated_probs(rho: np.ndarray, obs) -> np.ndarray:
    u = _diag_unitary(obs)
    return np.real(np.einsum("ij,bjk,ik->bi", u, rho, u.conj()))


# --- shots ----------------------------------------------------------------------------------

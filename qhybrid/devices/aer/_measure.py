"""Measurements on Aer: what a circuit must save (analytic) or measure (shots), and how each PennyLane
measurement is read back from the job's data.

Conventions: the device's wire ``k`` (of ``n``) is Qiskit qubit ``n - 1 - k``, so Aer's full states and
full-width Pauli labels are already in PennyLane's order (first wire most significant). Subsystem saves
list their qubits last wire first for the same reason.

Analytic expectations use only full-width Pauli labels (identity on every other wire): Aer 0.18 drops or
misplaces the Pauli of a subsystem ``save_expectation_value`` when the circuit has idle qubits
(Qiskit/qiskit-aer#2442). Hamiltonian coefficients are applied here, not in the circuit, so the circuit
depends on which Pauli words are measured and never on their coefficients.
"""

from __future__ import annotations

from typing import Callable, Sequence

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
from pennylane.devices.qubit.measure import state_diagonalizing_gates
from pennylane.pauli import PauliWord
from pennylane.wires import Wires
from qiskit import QuantumCircuit
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


def _basis_tokens(mp: MeasurementProcess, wires: Wires) -> dict | None:
    """The basis each wire is read in for ``mp``: 'X', 'Y', 'Z' or a matrix observable's token.

    None when the observable's own terms cannot be read from one set of samples (e.g. X(0) + Z(0)).
    """
    obs = mp.obs
    if obs is None:
        return {w: "Z" for w in measured_wires(mp, wires)}
    ps = obs.pauli_rep
    if ps is not None:
        tokens: dict = {}
        for word in ps:
            for w, letter in word.items():
                if tokens.setdefault(w, letter) != letter:
                    return None
        return tokens
    # keyed on the basis change, not the matrix: equal matrices can come with different diagonalizing
    # gates (BasisStateProjector vs StateVectorProjector), and the eigenvalues are read in that basis
    token = ("M", tuple(obs.wires), np.round(_diag_unitary(obs), 14).tobytes())
    return {w: token for w in obs.wires}


def _wire_bases(tape: qml.tape.QuantumScript, wires: Wires) -> tuple[dict, dict] | None:
    """(basis token of each measured wire, an observable of each matrix token), or None when the tape's
    measurements cannot all be read from one set of samples."""
    seen: dict = {}
    owners: dict = {}
    for mp in tape.measurements:
        tokens = _basis_tokens(mp, wires)
        if tokens is None:
            return None
        for w, t in tokens.items():
            if seen.setdefault(w, t) != t:
                return None
            if isinstance(t, tuple):
                owners.setdefault(t, mp.obs)
    return seen, owners


def sampling_groups_conflict(tape: qml.tape.QuantumScript, wires: Wires) -> bool:
    """True when the tape's measurements cannot all be read from one set of samples."""
    return _wire_bases(tape, wires) is None


class SamplePlan:
    """Basis rotations and measurements for one tape structure with shots, and readers for each result.

    Every measured wire is read once per shot; each measurement process reads its own wires from those
    samples (counts per distinct outcome, or the shots in order when a ``qml.sample`` asks for them).

    Two ways to get the samples: Aer's ``measure`` instructions (needed for measurement noise and for
    noisy trajectories), or, with ``from_probabilities``, one exact run that saves the outcome
    probabilities of the measured wires, from which :meth:`draw` takes the shots (multinomial counts,
    or i.i.d. draws when their order matters). The two are the same distribution; the second costs one
    exact simulation instead of Aer's per-shot bookkeeping.
    """

    def __init__(self, tape: qml.tape.QuantumScript, wires: Wires, *, from_probabilities: bool = False):
        bases = _wire_bases(tape, wires)
        if bases is None:
            raise UnsupportedOperationError(
                "These measurements do not commute qubit-wise and cannot be sampled together; run the tape "
                "through the device's preprocessing (qhybrid.execute or a QNode), which splits them."
            )
        tokens, owners = bases
        self.wires = wires
        self.measured = Wires([w for w in wires if w in tokens])
        self.rotations: list = []
        done = set()
        for w in self.measured:
            t = tokens[w]
            if t == "X":
                self.rotations += qml.X(w).diagonalizing_gates()
            elif t == "Y":
                self.rotations += qml.Y(w).diagonalizing_gates()
            elif isinstance(t, tuple) and t not in done:
                done.add(t)
                self.rotations += owners[t].diagonalizing_gates()
        self.memory = any(_ordered_samples(mp) for mp in tape.measurements)
        self._pos = {w: i for i, w in enumerate(self.measured)}
        self.readers = [self._plan(mp) for mp in tape.measurements]
        key_tokens = tuple((w, tokens[w] if isinstance(tokens[w], str) else tokens[w][2]) for w in self.measured)
        key_mps = tuple(
            (type(mp).__name__, tuple(mp.wires), None if mp.obs is None else _obs_key(mp.obs)) for mp in tape.measurements
        )
        self.needs_phase = False
        self.from_probabilities = from_probabilities and len(self.measured) <= PROBABILITY_SAMPLING_MAX_WIRES
        self.key = ("sample", key_tokens, key_mps, self.memory, self.from_probabilities)

    def append_rotations(self, emit: Callable) -> None:
        for op in self.rotations:
            emit(op)

    def append_to(self, qc: QuantumCircuit, qubit: Callable) -> None:
        if self.from_probabilities:
            if len(self.measured):
                qc.save_probabilities([qubit(w) for w in reversed(self.measured)], label="p")
            return
        m = len(self.measured)
        for j, w in enumerate(self.measured):
            qc.measure(qubit(w), m - 1 - j)  # the first measured wire is the outcome's most significant bit

    @property
    def n_clbits(self) -> int:
        return 0 if self.from_probabilities else len(self.measured)

    def draw(self, data: dict, shots: int, rng: np.random.Generator) -> dict:
        """Samples of one parameter set from its saved exact probabilities (``from_probabilities``)."""
        if not len(self.measured):
            return {"idx": np.zeros(1, dtype=np.int64), "cnt": np.array([float(shots)]), "shots": shots}
        p = np.clip(np.asarray(data["p"], dtype=float), 0.0, None)
        p = p / p.sum()
        if self.memory:
            memory = rng.choice(p.size, size=shots, p=p)
            idx, cnt = np.unique(memory, return_counts=True)
            return {"idx": idx, "cnt": cnt.astype(float), "shots": shots, "memory": memory}
        counts = rng.multinomial(shots, p)
        idx = np.flatnonzero(counts)
        return {"idx": idx, "cnt": counts[idx].astype(float), "shots": shots}

    def _sub(self, idx: np.ndarray, wires) -> np.ndarray:
        """Outcome index over ``wires`` (first most significant) from the index over all measured wires."""
        m = len(self.measured)
        sub = np.zeros_like(idx)
        for w in wires:
            sub = (sub << 1) | ((idx >> (m - 1 - self._pos[w])) & 1)
        return sub

    def _plan(self, mp: MeasurementProcess) -> Callable:
        """A reader ``(rows, mp) -> values`` over all parameter sets of one variant."""
        m = len(self.measured)
        if isinstance(mp, (ExpectationMP, VarianceMP)):
            obs = mp.obs
            square = isinstance(mp, VarianceMP)
            if obs.pauli_rep is not None:
                words = list(obs.pauli_rep)
                masks = [[self._pos[w] for w in word] for word in words]

                def value_fn(m_obs, _words=words, _masks=masks):
                    c = coefficients(m_obs, _words)

                    def values(idx):
                        out = np.zeros(idx.shape, dtype=float)
                        for coeff, positions in zip(c, _masks):
                            parity = np.zeros_like(idx)
                            for p in positions:
                                parity ^= (idx >> (m - 1 - p)) & 1
                            out += coeff * (1 - 2 * parity)
                        return out

                    return values

            else:

                def value_fn(m_obs):
                    eig = np.real(np.asarray(qml.math.unwrap(m_obs.eigvals())))
                    return lambda idx: eig[self._sub(idx, m_obs.wires)]

            def moments(rows, mp_):
                values = value_fn(mp_.obs)
                out = []
                for row in rows:
                    v, cnt = values(row["idx"]), row["cnt"]
                    mean = float(cnt @ v) / row["shots"]
                    out.append(float(cnt @ (v * v)) / row["shots"] - mean**2 if square else mean)
                return np.array(out)

            return moments
        if isinstance(mp, ProbabilityMP):

            def probs(rows, mp_):
                w = measured_wires(mp_, self.wires)
                return np.stack(
                    [
                        np.bincount(self._sub(r["idx"], w), weights=r["cnt"], minlength=2 ** len(w)) / r["shots"]
                        for r in rows
                    ]
                )

            return probs
        if isinstance(mp, SampleMeasurement):  # sample, counts and any custom sampled measurement

            generic = not isinstance(mp, (SampleMP, CountsMP))
            positions = {w: i for i, w in enumerate(self.measured)}
            order = Wires(range(m)) if generic else self.measured

            def samples(rows, mp_):
                if generic:  # a custom measurement sees wires 0..m-1, as default.qubit hands them
                    mp_ = mp_.map_wires(positions)
                out = []
                for row in rows:
                    if isinstance(mp_, CountsMP) or row.get("memory") is None:
                        idx = np.repeat(row["idx"], row["cnt"].astype(np.int64))
                    else:
                        idx = row["memory"]
                    bits = (idx[:, None] >> np.arange(m - 1, -1, -1)) & 1
                    out.append(mp_.process_samples(bits, wire_order=order))
                return out if isinstance(mp_, CountsMP) else np.stack([np.asarray(qml.math.unwrap(o)) for o in out])

            return samples
        raise UnsupportedOperationError(
            f"Measurement {type(mp).__name__} is not supported with shots by qhybrid.aer; supported: expval, "
            "var, probs, sample, counts (state and density_matrix need shots=None)."
        )

    def read(self, rows: list[dict], tape: qml.tape.QuantumScript) -> list:
        """One entry per measurement: values stacked over the parameter sets (counts: a list of dicts)."""
        return [reader(rows, mp) for reader, mp in zip(self.readers, tape.measurements)]


def _obs_key(obs) -> tuple:
    ps = obs.pauli_rep
    if ps is not None:
        return ("pauli", tuple(ps))
    return ("matrix", tuple(obs.wires), _obs_matrix(obs).tobytes())


def counts_row(counts: dict, shots: int, memory=None) -> dict:
    """Aer's hex-keyed counts (and per-shot memory) as outcome indices and weights."""
    idx = np.fromiter((int(k, 16) for k in counts), dtype=np.int64, count=len(counts))
    cnt = np.fromiter(counts.values(), dtype=float, count=len(counts))
    row = {"idx": idx, "cnt": cnt, "shots": shots}
    if memory is not None:
        row["memory"] = np.fromiter((int(k, 16) for k in memory), dtype=np.int64, count=len(memory))
    return row


__all__ = [
    "AnalyticPlan",
    "SamplePlan",
    "ANALYTIC_MEASUREMENTS",
    "SAMPLE_MEASUREMENTS",
    "supported_analytic",
    "supported_sample",
    "sampling_groups_conflict",
    "counts_row",
    "PROBABILITY_SAMPLING_MAX_WIRES",
]

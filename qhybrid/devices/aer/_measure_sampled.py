"""Finite-shot measurements on Aer: which basis each wire is measured in, the measure instructions, and how
expectations, variances, probabilities, samples and counts are read back from the counts. Conventions in
``_measure.py``."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    CountsMP,
    ExpectationMP,
    MeasurementProcess,
    ProbabilityMP,
    SampleMeasurement,
    SampleMP,
    VarianceMP,
)
from pennylane.wires import Wires
from qiskit import QuantumCircuit

from ...errors import UnsupportedOperationError
from ._measure import (
    ANALYTIC_MEASUREMENTS,
    PROBABILITY_SAMPLING_MAX_WIRES,
    SAMPLE_MEASUREMENTS,
    _diag_unitary,
    _obs_matrix,
    _ordered_samples,
    coefficients,
    measured_wires,
    supported_analytic,
    supported_sample,
)


ANY_BASIS = "I"
"""The token of a wire an identity observable names: it takes the basis other measurements read the wire in (Z, no
rotation, where none does)."""


def _basis_tokens(mp: MeasurementProcess, wires: Wires) -> dict | None:
    """The basis each wire is read in for ``mp``: 'X', 'Y', 'Z' or a matrix observable's token.

    None when an expectation's terms cannot be read from one set of samples (e.g. X(0) + Z(0): split term by
    term); a variance, samples or counts of such a sum are read in its own eigenbasis.
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
                    if isinstance(mp, ExpectationMP):  # split term by term (split_non_commuting)
                        return None
                    # a variance, samples or counts of the sum cannot be split: read in its own eigenbasis
                    return _matrix_tokens(obs)
        for w in obs.wires:  # an identity's wire: read in whatever basis the others read it (samples of I(1) too)
            tokens.setdefault(w, ANY_BASIS)
        return tokens
    return _matrix_tokens(obs)


def _matrix_tokens(obs) -> dict:
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
            if t == ANY_BASIS:
                seen.setdefault(w, t)
                continue
            if seen.get(w, ANY_BASIS) == ANY_BASIS:
                seen[w] = t
            if seen[w] != t:
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
        self._tokens = tokens
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
            in_eigenbasis = any(isinstance(self._tokens.get(w), tuple) for w in obs.wires)  # (a sum's own basis)
            if obs.pauli_rep is not None and not in_eigenbasis:  # (else its eigenvalues)
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

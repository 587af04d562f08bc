"""Measurement plans: full-width Pauli saves, Pauli variances, sampling groups and shot drawing."""

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
from pennylane.wires import Wires

from qhybrid.devices.aer._measure_analytic import AnalyticPlan
from qhybrid.devices.aer._measure_sampled import SamplePlan, counts_row, sampling_groups_conflict
from qhybrid.errors import UnsupportedOperationError

WIRES = Wires([0, 1, 2, 3])


def test_expectations_are_saved_as_full_width_paulis_without_coefficients():
    tape = qml.tape.QuantumScript([], [qml.expval(0.3 * qml.Z(3) + qml.X(1) @ qml.Y(2)), qml.expval(2.0 * qml.Z(3))])
    plan = AnalyticPlan(tape, WIRES, mixed=False)
    assert plan.words == ["IIIZ", "IXYI"]  # one save per distinct word, identity on every other wire
    other = qml.tape.QuantumScript([], [qml.expval(-1.0 * qml.Z(3) + 5 * qml.X(1) @ qml.Y(2)), qml.expval(qml.Z(3))])
    assert AnalyticPlan(other, WIRES, mixed=False).key == plan.key  # coefficients are read, not compiled


def test_pauli_variance_uses_only_commuting_products():
    obs = 0.5 * qml.Z(0) + 0.7 * qml.X(0) + 0.2 * qml.Z(1)
    tape = qml.tape.QuantumScript([], [qml.var(obs)])
    plan = AnalyticPlan(tape, WIRES, mixed=False)
    assert "YIII" not in plan.words  # Z X = iY cancels against X Z = -iY
    # <Z0> = 0.6, <X0> = 0.8 (pure state in the XZ plane), <Z1> = 1, <Z0 Z1> = 0.6, <X0 Z1> = 0.8
    values = {"ZIII": 0.6, "XIII": 0.8, "IZII": 1.0, "ZZII": 0.6, "XZII": 0.8}
    rows = {"words": np.array([[values[w] for w in plan.words]])}
    mean = 0.5 * 0.6 + 0.7 * 0.8 + 0.2
    square = 0.25 + 0.49 + 0.04 + 2 * (0.5 * 0.2 * 0.6 + 0.7 * 0.2 * 0.8)  # Z0 X0 terms cancel
    (var,) = plan.read(rows, tape)
    assert var[0] == pytest.approx(square - mean**2, abs=1e-12)


def test_sampling_conflicts():
    def conflict(*mps):
        return sampling_groups_conflict(qml.tape.QuantumScript([], list(mps)), WIRES)

    assert not conflict(qml.expval(qml.Z(0)), qml.probs(wires=[0, 1]), qml.expval(qml.X(2) @ qml.Z(1)))
    assert not conflict(qml.expval(qml.Z(0) + 0.5 * qml.Z(0) @ qml.Z(1)))  # one basis: no split needed
    assert conflict(qml.expval(qml.X(0)), qml.expval(qml.Z(0)))
    assert conflict(qml.expval(qml.X(0) + qml.Z(0)))
    assert conflict(qml.expval(qml.Hermitian(np.eye(2), 0)), qml.probs(wires=[0]))
    with pytest.raises(UnsupportedOperationError, match="qubit-wise"):
        SamplePlan(qml.tape.QuantumScript([], [qml.expval(qml.X(0)), qml.expval(qml.Y(0))]), WIRES)


def test_sample_plan_rotates_and_measures_only_measured_wires():
    tape = qml.tape.QuantumScript([], [qml.expval(qml.X(2) @ qml.Y(0)), qml.probs(wires=[3])])
    plan = SamplePlan(tape, WIRES)
    assert list(plan.measured) == [0, 2, 3]
    assert [op.name for op in plan.rotations] == ["PauliZ", "S", "Hadamard", "Hadamard"]


def test_outcome_indices_put_the_first_measured_wire_first():
    tape = qml.tape.QuantumScript([], [qml.probs(wires=[2]), qml.probs(wires=[0, 2]), qml.expval(qml.Z(0) @ qml.Z(2))])
    plan = SamplePlan(tape, WIRES)
    row = counts_row({"0x2": 30, "0x1": 10}, 40)  # '10' (wire 0 reads 1) 30 times, '01' 10 times
    p2, p02, zz = plan.read([row], tape)
    np.testing.assert_allclose(p2[0], [0.75, 0.25])
    np.testing.assert_allclose(p02[0], [0, 0.25, 0.75, 0])
    assert zz[0] == pytest.approx(-1.0)


def test_draw_counts_and_ordered_samples():
    rng = np.random.default_rng(0)
    tape = qml.tape.QuantumScript([], [qml.probs(wires=[0, 1])])
    plan = SamplePlan(tape, WIRES, from_probabilities=True)
    row = plan.draw({"p": np.array([0.5, 0.0, 0.0, 0.5 + 1e-17])}, 1000, rng)
    assert row["cnt"].sum() == 1000 and set(row["idx"]) <= {0, 3}
    sample_plan = SamplePlan(qml.tape.QuantumScript([], [qml.sample(wires=[0])]), WIRES, from_probabilities=True)
    row = sample_plan.draw({"p": np.array([0.25, 0.75])}, 50, rng)
    assert row["memory"].shape == (50,) and row["cnt"].sum() == 50

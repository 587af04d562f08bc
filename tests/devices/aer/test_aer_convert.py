"""Tapes to parameterised Qiskit circuits: wire order, classification, placeholders, matrix circuits."""

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
from pennylane.wires import Wires
from qiskit.quantum_info import Operator

from qhybrid.devices.aer._convert import build_template, is_ready, matrix_key, op_slots, qubit_map, slot_matrices
from qhybrid.devices.aer._measure_analytic import AnalyticPlan
from qhybrid.errors import UnsupportedOperationError

BASIS = frozenset({"rx", "ry", "rz", "cx", "h", "p", "u", "unitary"})


def _template(tape, wires=None):
    wires = Wires(wires if wires is not None else tape.wires)
    slots = op_slots(tape, BASIS)
    mats = slot_matrices(slots, tape, [p for op in tape.operations for p in op.data], 1)[0]
    plan = AnalyticPlan(qml.tape.QuantumScript([], []), wires, mixed=False)
    return build_template(slots, tape, wires, plan, mats), slots


def test_first_wire_is_the_most_significant_qubit():
    q = qubit_map(Wires(["a", "b", "c"]))
    assert [q("a"), q("b"), q("c")] == [2, 1, 0]


def test_circuit_matches_pennylane_unitary_with_bound_placeholders():
    ops = [qml.RX(0.3, "a"), qml.CNOT(["a", "c"]), qml.Rot(0.1, 0.2, 0.3, "b"), qml.CRX(0.7, ["c", "b"]),
           qml.QubitUnitary(qml.matrix(qml.RY(0.4, 0) @ qml.RZ(0.2, 1)), ["b", "a"])]
    tape = qml.tape.QuantumScript(ops)
    t, _ = _template(tape, ["a", "b", "c"])
    flat = {j: np.array([p]) for j, p in enumerate(tape.get_parameters(trainable_only=False)) if np.ndim(p) == 0}
    values = t.values(flat)[:, 0]
    bound = t.circuit.assign_parameters(dict(zip(t.parameters, values)))
    np.testing.assert_allclose(Operator(bound).data, qml.matrix(tape, wire_order=["a", "b", "c"]), atol=1e-12)
    assert len(t.parameters) == 6  # RX, three Rot angles, two CRX half-angles; the unitary is in the circuit


def test_affine_placeholders_point_at_the_flat_parameter_list():
    tape = qml.tape.QuantumScript([qml.RX(0.1, 0), qml.U2(0.2, 0.3, 1)])
    t, slots = _template(tape)
    assert t.index == [0, 1, 2] and [s.kind for s in slots] == ["recipe", "recipe"]


def test_classification_and_the_error_that_names_the_operator():
    tape = qml.tape.QuantumScript([qml.Identity(0), qml.GlobalPhase(0.2), qml.QubitUnitary(np.eye(2), 0), qml.RY(0.1, 0)])
    assert [s.kind for s in op_slots(tape, BASIS)] == ["skip", "phase", "matrix", "recipe"]
    assert not is_ready(qml.IsingXY(0.1, [0, 1]), BASIS)
    with pytest.raises(UnsupportedOperationError, match="IsingXY on wires"):
        op_slots(qml.tape.QuantumScript([qml.IsingXY(0.1, [0, 1])]), BASIS)


def test_broadcast_matrices_give_one_key_per_batch_element():
    u = np.stack([np.eye(2), qml.matrix(qml.X(0))])
    tape = qml.tape.QuantumScript([qml.QubitUnitary(u, 0)])
    slots = op_slots(tape, BASIS)
    mats = slot_matrices(slots, tape, [u], 2)
    assert matrix_key(mats[0]) != matrix_key(mats[1])
    np.testing.assert_array_equal(mats[1][0], u[1])

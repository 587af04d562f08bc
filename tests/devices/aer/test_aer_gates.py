"""The recipe table: every PennyLane gate it names is reproduced exactly by its Qiskit gates."""

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator

from qhybrid.devices.aer._gates import RECIPES, Affine, is_matrix_op, qiskit_gate, steps_for


def _op(name: str, rng):
    if name == "GlobalPhase":
        return qml.GlobalPhase(rng.uniform(-3, 3), wires=[0])
    if name.startswith("Adjoint("):
        return qml.adjoint(getattr(qml, name[len("Adjoint(") : -1])(0))
    cls = getattr(qml, name)
    n_wires = cls.num_wires if isinstance(cls.num_wires, int) else 1
    return cls(*rng.uniform(-3, 3, cls.num_params), wires=range(n_wires))


def _circuit(op) -> QuantumCircuit:
    n = len(op.wires)
    qc = QuantumCircuit(n)
    for step in steps_for(op):
        params = [p.scale * float(op.data[p.index]) + p.offset if isinstance(p, Affine) else p for p in step.params]
        qc.append(qiskit_gate(step.gate, params, len(step.wires)), [n - 1 - w for w in step.wires])
    return qc


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_reproduces_the_gate_exactly(name):
    op = _op(name, np.random.default_rng(7))
    expected = qml.matrix(op, wire_order=range(len(op.wires)))
    np.testing.assert_allclose(Operator(_circuit(op)).data, expected, atol=1e-12)  # global phase included


def test_multicontrolled_x_uses_mcx_only_for_all_ones_controls():
    op = qml.MultiControlledX(wires=[0, 1, 2, 3])
    np.testing.assert_allclose(Operator(_circuit(op)).data, qml.matrix(op, wire_order=range(4)), atol=1e-12)
    assert steps_for(qml.MultiControlledX(wires=[0, 1, 2], control_values=[1, 0])) is None


def test_matrix_ops():
    assert is_matrix_op(qml.QubitUnitary(np.eye(2), 0))
    assert not is_matrix_op(qml.IsingXY(0.1, [0, 1]))  # has a decomposition: decomposed instead
    assert not is_matrix_op(qml.QubitUnitary(np.eye(2**11), range(11)))  # too wide for one unitary


@pytest.mark.parametrize("method", ["statevector", "density_matrix"])
def test_recipes_bound_at_run_time_by_aer(method):
    """Every parameterised recipe, its angles bound through parameter_binds, reproduces the gate on an
    entangled input (Aer 0.18 silently drops run-time angles of cp/crx/cry/crz; recipes must avoid them)."""
    from qiskit.circuit import Parameter
    from qiskit_aer import AerSimulator

    sim = AerSimulator(method=method, runtime_parameter_bind_enable=True)
    basis = set(sim.configuration().basis_gates)
    rng = np.random.default_rng(3)
    for name in sorted(RECIPES):
        op = _op(name, rng)
        steps = steps_for(op)
        if not any(isinstance(p, Affine) for s in steps for p in s.params) or not {s.gate for s in steps} <= basis:
            continue
        n = max(len(op.wires), 2)
        qc = QuantumCircuit(n)
        qc.h(n - 1), qc.cx(n - 1, 0), qc.ry(0.4, 0)  # PennyLane wires 0 and n-1 entangled
        binds = {}
        for step in steps:
            params = []
            for p in step.params:
                if isinstance(p, Affine):
                    theta = Parameter(f"t{len(binds)}")
                    binds[theta] = [p.scale * float(op.data[p.index]) + p.offset]
                    params.append(theta)
                else:
                    params.append(p)
            qc.append(qiskit_gate(step.gate, params, len(step.wires)), [n - 1 - w for w in step.wires])
        qc.save_density_matrix(label="rho")
        rho = sim.run(qc, parameter_binds=[binds]).result().data(0)["rho"].data
        prep = [qml.Hadamard(0), qml.CNOT([0, n - 1]), qml.RY(0.4, n - 1)]
        want = qml.execute([qml.tape.QuantumScript(prep + [op], [qml.density_matrix(range(n))])], qml.device("default.qubit", wires=n))[0]
        np.testing.assert_allclose(rho, want, atol=1e-10, err_msg=name)

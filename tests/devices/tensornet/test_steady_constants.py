"""Steady steps whose circuits hold constants touch the host nowhere (``qhybrid.testing``), on every engine: numpy
and Python number angles, constant gates without a closed form (``PauliRot(0.3)``, ``adjoint(RX(0.3))``), numpy
``QubitUnitary`` / ``DiagonalQubitUnitary`` / ``StatePrep`` / ``Hermitian``, controlled-gate gradients, X/Y words
measured beside constant gates for many steps, the layers' input checks. Each was host data or a host read every
step (found by a hunt over engines, 2026-11-28); values against default.qubit / default.mixed to 1e-10 where the
constants now come from caches."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.testing import describe, host_touches

U = qml.matrix(qml.Rot(0.1, 0.2, 0.3, wires=0) @ qml.Hadamard(0))
V = np.array([0.6, 0.0, 0.0, 0.8], dtype=np.float64)
H = np.array([[1.0, 0.5], [0.5, -1.0]])


def _gates(kind, float32=True):
    def body(w):
        if kind == "numpy angles":
            qml.RX(np.float64(0.3), 0)
            qml.RZ(np.int64(1), 1)
            # (default.mixed computes a float32 angle's matrix in float32: 1e-8 from its exact value)
            qml.RY(np.float32(0.7) if float32 else np.float64(0.7), 2)
        elif kind == "python angles":
            qml.RY(0.7, 1)
            qml.RZ(2, 2)
        elif kind == "constant generic gates":
            qml.PauliRot(0.3, "XY", wires=[0, 2])
            qml.IsingXX(0.3, wires=[1, 2])
            qml.adjoint(qml.RX(0.3, 0))
            qml.MultiRZ(0.25, wires=[0, 1, 2])
        elif kind == "user matrices":
            qml.QubitUnitary(U, wires=0)
            qml.DiagonalQubitUnitary(np.exp(1j * np.array([0.1, 0.4])), wires=1)
        elif kind == "pauli rotations":  # trainable: PennyLane's matrices were made from numpy every call
            qml.PauliRot(w[0], "XYZ", wires=[0, 1, 2])
            qml.MultiRZ(w[1], wires=[0, 2])
            qml.PauliRot(w[2], "YX", wires=[2, 1])
            qml.ctrl(qml.RY(w[0], 0), control=[1, 2])  # several controls: the identity with the gate's block
            qml.ctrl(qml.PauliRot(w[1], "XY", wires=[1, 2]), control=0, control_values=[0])
        elif kind == "controlled gradients":
            qml.CRX(w[0], wires=[0, 1])
            qml.PhaseShift(w[1], 2)
            qml.CRot(w[0], w[1], w[2], wires=[2, 0])
        qml.RY(w[0], 0)
        qml.CNOT([0, 1])
        qml.RX(w[1], 1)
        qml.CNOT([1, 2])
        qml.RY(w[2], 2)

    return body


KINDS = ["numpy angles", "python angles", "constant generic gates", "user matrices", "pauli rotations", "controlled gradients"]
ENGINES = {
    "state vector": lambda: qhybrid.device("tensornet", wires=3),
    "mps": lambda: qhybrid.device("tensornet", wires=3, method="mps", max_bond_dim=8, cutoff=0),  # (a value cutoff reads)
    "density matrix": lambda: qhybrid.device("tensornet", wires=3),
}


def _circuit(kind, engine):
    body = _gates(kind, float32=engine != "density matrix")

    def circuit(w):
        body(w)
        if engine == "density matrix":
            qml.DepolarizingChannel(0.05, wires=1)
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.Z(2))

    return circuit


def _reference(circuit, engine, w):
    """(values, gradient of their sum) by default.qubit, or default.mixed through autograd (its torch interface
    builds some matrices in float32 precision: 1e-8 off on the controlled Pauli rotations)."""
    if engine != "density matrix":
        ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
        b = torch.stack(ref(w))
        return b, torch.autograd.grad(b.sum(), w)[0]
    from pennylane import numpy as pnp

    ref = qml.QNode(circuit, qml.device("default.mixed", wires=3), interface="autograd", diff_method="backprop")
    x = pnp.array(w.detach().numpy(), requires_grad=True)
    values = torch.tensor([float(v) for v in ref(x)], dtype=torch.float64)
    grad = qml.grad(lambda x: pnp.sum(pnp.stack(ref(x))))(x)
    return values, torch.as_tensor(np.asarray(grad), dtype=torch.float64)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("static", [False, True])
def test_constants_make_no_host_data_a_step(kind, engine, method, static):
    if engine == "mps" and kind == "user matrices":
        pytest.skip("the MPS engine takes named gates")
    if method == "parameter-shift" and kind == "controlled gradients" and engine != "state vector":
        pytest.skip("(the same rules as the state vector)")
    circuit = _circuit(kind, engine)
    f = qhybrid.qnode(ENGINES[engine](), diff_method=method, static_structure=static)(circuit)
    w = torch.tensor([0.4, -0.9, 1.3], dtype=torch.float64, requires_grad=True)
    step = lambda: torch.stack(f(w)).sum().backward()  # noqa: E731
    touches = host_touches(step)
    assert not touches, describe(touches)
    a = torch.stack(f(w))
    (ga,) = torch.autograd.grad(a.sum(), w)
    b, gb = _reference(circuit, engine, w)
    assert torch.allclose(a, b, atol=1e-10, rtol=0)
    assert torch.allclose(ga, gb, atol=1e-10, rtol=0)


@pytest.mark.parametrize("method", ["adjoint", "backprop"])
def test_a_numpy_state_and_observable_matrix(method):
    def circuit(w):
        qml.StatePrep(V, wires=[0, 1])
        qml.RY(w[0], 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Hermitian(H, wires=1))

    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method)(circuit)
    w = torch.tensor([0.4], dtype=torch.float64, requires_grad=True)
    touches = host_touches(lambda: f(w).backward())
    assert not touches, describe(touches)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    assert torch.allclose(f(w), ref(w), atol=1e-10, rtol=0)


def test_x_words_beside_constant_gates_keep_their_tables():
    """A new sentence object every step added an entry to the Pauli tables' cache and evicted the tables
    themselves every 32 steps (about 15 host touches then)."""

    def circuit(w):
        qml.RY(w[0], 0)
        qml.RX(w[1], 1)
        qml.ControlledPhaseShift(0.5, [0, 2])
        qml.CNOT([0, 1])
        qml.RY(w[1], 2)
        return qml.expval(qml.Z(2) @ qml.X(0))

    f = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(circuit)
    w = torch.tensor([0.4, -0.9], dtype=torch.float64, requires_grad=True)
    step = lambda: f(w).backward()  # noqa: E731
    for _ in range(3):
        step()
    for i in range(70):
        touches = host_touches(step, warmup=0)
        assert not touches, (i, describe(touches))


def test_the_layers_input_checks_read_nothing():
    from qhybrid.layers import ExpQLayer, GraphQLayer

    layer = ExpQLayer(n_qubits=3, n_layers=1, encoding="amplitude", check_finite=False).double()
    x = torch.rand(4, 8, dtype=torch.float64)
    touches = host_touches(lambda: layer(x).sum().backward())
    assert not touches, describe(touches)
    with pytest.raises(ValueError, match="all-zero feature vector"):
        layer(torch.zeros(2, 8, dtype=torch.float64))

    graph = GraphQLayer([(0, 1), (1, 2), (2, 3)], kind="qaoa").double()
    touches = host_touches(lambda: graph().sum().backward())
    assert not touches, describe(touches)

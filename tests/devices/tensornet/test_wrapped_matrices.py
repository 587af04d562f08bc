"""Matrix data under an adjoint, a power, a control or a product (``qml.adjoint(qml.QubitUnitary(U))``,
``qml.pow(QubitUnitary, 2)``, ``qml.prod(QU, QU)``, ``QuantumPhaseEstimation(QubitUnitary)``) and a scaled gate
with a complex factor (``qml.s_prod(exp(0.3j), Y)``): they were refused as "a complex parameter ... gate angles
must be real", which they are not. Values and gradients (the matrices trainable) against default.qubit's backprop
to 1e-10."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
A = torch.tensor([[0.3, 0.7], [0.2, 0.5]], dtype=torch.float64)
U0 = torch.linalg.matrix_exp(1j * (A + A.T))
D0 = torch.exp(1j * torch.tensor([0.4, -1.1], dtype=torch.float64))

WRAPPED = {
    "adjoint": lambda u, d: qml.adjoint(qml.QubitUnitary(u, wires=1)),
    "power 2": lambda u, d: qml.pow(qml.QubitUnitary(u, wires=1), 2),
    "power -1": lambda u, d: qml.pow(qml.QubitUnitary(u, wires=0), -1),
    "product": lambda u, d: qml.prod(qml.QubitUnitary(u, wires=0), qml.QubitUnitary(u @ u, wires=1)),
    "adjoint diagonal": lambda u, d: qml.adjoint(qml.DiagonalQubitUnitary(d, wires=1)),
    "adjoint control": lambda u, d: qml.adjoint(qml.ControlledQubitUnitary(u, wires=[0, 1])),
    "complex factor": lambda u, d: qml.s_prod(np.exp(0.3j), qml.Y(1)),
}


def _circuit(make):
    def circuit(x, u, d):
        qml.RY(x[0], wires=0)
        qml.RX(x[1], wires=1)
        make(u, d)
        qml.CNOT([0, 1])
        return qml.expval(qml.X(0) @ qml.Z(1) + 0.5 * qml.Y(1)), qml.probs(wires=[1])

    return circuit


def _arguments():
    x = torch.tensor([0.8, 0.3], dtype=torch.float64, requires_grad=True)
    return x, U0.clone().requires_grad_(True), D0.clone().requires_grad_(True)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_wrapped_matrices_run_and_differentiate(name, diff_method):
    circuit = _circuit(WRAPPED[name])
    args, ref_args = _arguments(), _arguments()
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)(*args)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(*ref_args)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=TOL, rtol=0)
    loss, ref_loss = got[0] + 3 * got[1][0], want[0] + 3 * want[1][0]
    grads = torch.autograd.grad(loss, args, allow_unused=True)
    ref_grads = torch.autograd.grad(ref_loss, ref_args, allow_unused=True)
    for g, w in zip(grads, ref_grads):
        if w is None or not w.abs().max() > 0:
            assert g is None or g.abs().max() < TOL
        else:
            torch.testing.assert_close(g, w, atol=TOL, rtol=0)


def test_phase_estimation_of_a_users_matrix():
    """``QuantumPhaseEstimation(QubitUnitary(U))`` controls powers of the matrix (``C(QubitUnitary**k)``)."""

    def circuit(u):
        qml.Hadamard(3)
        qml.QuantumPhaseEstimation(qml.QubitUnitary(u, wires=3), estimation_wires=[0, 1, 2])
        return qml.probs(wires=[0, 1, 2])

    got = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(circuit)(U0)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch")(U0)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)


PRODUCTS = {
    "product": (lambda t: qml.prod(qml.Hadamard(0), qml.RZ(t, wires=0)), lambda t: (qml.RZ(t, wires=0), qml.Hadamard(0))),
    "controlled product": (
        lambda t: qml.ctrl(qml.prod(qml.Hadamard(0), qml.RZ(t, wires=0)), control=1),
        lambda t: (qml.CRZ(t, wires=[1, 0]), qml.CH(wires=[1, 0])),
    ),
    "power of a product": (
        lambda t: qml.pow(qml.prod(qml.CNOT([1, 0]), qml.RZ(t, wires=1)), 1),
        lambda t: (qml.RZ(t, wires=1), qml.CNOT([1, 0])),
    ),
}


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_of_real_and_complex_matrices(name, diff_method):
    """``qml.prod(H, RZ(t))`` as a gate: PennyLane's matrix of a product takes its first factor's dtype under
    torch (the real Hadamard's), which dropped RZ's phase: <X> came back (1 + cos t) / 2 for 1 (default.qubit's
    backprop gives that too). The reference is default.qubit on the factors written out."""
    product, factors = PRODUCTS[name]

    def circuit(t, gate):
        qml.Hadamard(1)
        qml.RY(0.4, wires=0)
        gate(t)
        return qml.expval(qml.X(0) @ qml.Z(1) + qml.Y(0) + qml.X(1))

    def reference(t):
        qml.Hadamard(1)
        qml.RY(0.4, wires=0)
        factors(t)
        return qml.expval(qml.X(0) @ qml.Z(1) + qml.Y(0) + qml.X(1))

    t, u = (torch.tensor(0.8, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)(t, product)
    want = qml.QNode(reference, qml.device("default.qubit", wires=2), interface="torch")(u)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (g,), (h,) = torch.autograd.grad(got, t), torch.autograd.grad(want, u)
    assert h.abs() > 1e-3
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


POWERS = {
    "root of a square": lambda t: qml.pow(qml.pow(qml.RY(t, wires=0), 2), 0.5),
    "float integer power": lambda t: qml.pow(qml.RX(t, wires=1), 3.0),
    "negative float power": lambda t: qml.pow(qml.CRX(t, wires=[0, 1]), -2.0),
}


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
@pytest.mark.parametrize("name", sorted(POWERS))
def test_float_integer_powers_of_trainable_gates(name, diff_method):
    """``RY(t)**1.0`` (what ``pow(pow(RY(t), 2), 0.5)`` decomposes into): PennyLane takes a float power through
    scipy's fractional power, which refused a tensor that requires grad."""
    gate = POWERS[name]

    def circuit(t):
        qml.Hadamard(0)
        qml.RY(0.3, wires=1)
        gate(t)
        return qml.expval(qml.Z(0) + qml.Y(1) + qml.X(0) @ qml.X(1))

    t, u = (torch.tensor(0.7, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)(t)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(u)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (g,), (h,) = torch.autograd.grad(got, t), torch.autograd.grad(want, u)
    assert h.abs() > 1e-3
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_a_control_of_a_block_encoding_of_a_trainable_matrix(diff_method):
    """``qml.ctrl(qml.BlockEncode(A))``, ``A`` trainable: its binding deep-copied the block encoding's norm, a
    tensor computed from ``A`` (not a graph leaf), and crashed under adjoint. PennyLane's BlockEncode detaches
    ``A`` (default.qubit's gradient is zero): the same numbers here."""

    def circuit(a):
        qml.Hadamard(0)
        qml.RY(0.4, wires=2)
        qml.ctrl(qml.BlockEncode(a, wires=[1, 2]), control=0)
        return qml.expval(qml.X(1) + qml.Z(2))

    a, b = (torch.tensor([[0.3, 0.2], [0.1, 0.4]], dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(circuit)(a)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch")(b)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    got.backward()
    want.backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)

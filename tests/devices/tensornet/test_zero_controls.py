"""Controls on |0> of gates with matrix data (``ControlledQubitUnitary(U, control_values=[0])``): PennyLane's
binding makes them anew with every control value 1, which ran them as controls on |1>, silently, wherever new
data went in (a trainable ``U`` under adjoint: -0.0408 for -0.2281; the plugin under adjoint, whose tapes
PennyLane's interfaces rebind before the device sees them). Values and gradients against default.qubit's
backprop to 1e-10."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
A = torch.tensor([[0.3, 0.7], [0.2, 0.5]], dtype=torch.float64)
U0 = torch.linalg.matrix_exp(1j * (A + A.T))


def circuit(x, u):
    qml.RY(x[0], wires=0)
    qml.RY(x[1], wires=2)
    qml.ControlledQubitUnitary(u, wires=[0, 1], control_values=[0])
    qml.ctrl(qml.QubitUnitary(u, wires=1), control=[0, 2], control_values=[0, 1])
    qml.adjoint(qml.ctrl(qml.QubitUnitary(u, wires=2), control=1, control_values=0))
    qml.pow(qml.ctrl(qml.RX(x[0] * 0.7, wires=2), control=[0, 1], control_values=[0, 1]), 2)
    return qml.expval(qml.X(1) @ qml.Z(2)), qml.probs(wires=[0, 2])


def _reference(x_trainable: bool, u_trainable: bool):
    x = torch.tensor([0.8, 0.3], dtype=torch.float64, requires_grad=x_trainable)
    u = U0.clone().requires_grad_(u_trainable)
    return x, u


def _check(node, x_trainable, u_trainable):
    x, u = _reference(x_trainable, u_trainable)
    rx, ru = _reference(x_trainable, u_trainable)
    got = node(x, u)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(rx, ru)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=TOL, rtol=0)
    loss, ref_loss = got[0] + got[1] @ torch.arange(4.0, dtype=torch.float64), want[0] + want[1] @ torch.arange(4.0, dtype=torch.float64)
    wrt = [t for t, on in ((x, x_trainable), (u, u_trainable)) if on]
    ref_wrt = [t for t, on in ((rx, x_trainable), (ru, u_trainable)) if on]
    for g, w in zip(torch.autograd.grad(loss, wrt), torch.autograd.grad(ref_loss, ref_wrt)):
        torch.testing.assert_close(g, w, atol=TOL, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("trainable", [(True, True), (False, True), (True, False)])
def test_controls_on_zero_under_adjoint(static, trainable):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint", static_structure=static)(circuit)
    _check(node, *trainable)


def test_controls_on_zero_under_backprop():
    _check(qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="backprop")(circuit), True, True)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_controls_on_zero_through_pennylanes_qnode(diff_method):
    """PennyLane's interfaces rebind the tape before the device runs it (default.qubit's own adjoint and
    parameter-shift give the wrong number here); the device's preprocessing keeps the controls."""
    node = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=3), interface="torch", diff_method=diff_method)
    _check(node, True, False)

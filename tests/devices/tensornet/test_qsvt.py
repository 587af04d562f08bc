"""QSVT (PennyLane declares no parameters for it, though its data are its parts'): run as its parts' gates, against
default.qubit to 1e-10. As one tensor, its matrix was kept by the rounded repr of its settings (a phase moved by 1e-5
ran the first call's matrix, silently) and trainable phases crashed; ``adjoint(QSVT)`` crashed too (all found by a
fuzzing helper)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _qsvt(a, phi):
    return qml.QSVT(qml.BlockEncode(a, wires=[0, 1]), [qml.PCPhase(phi[i], dim=1, wires=[0, 1]) for i in range(3)])


FORMS = {
    "plain": lambda a, phi: _qsvt(a, phi),
    "adjoint": lambda a, phi: qml.adjoint(_qsvt(a, phi)),
    "controlled": lambda a, phi: qml.ctrl(_qsvt(a, phi), control=2),
    "power": lambda a, phi: qml.pow(_qsvt(a, phi), 2),
}


def _circuit(form):
    def circuit(x, a, phi):
        qml.RY(x, 1)
        qml.Hadamard(0)
        qml.Hadamard(2)
        FORMS[form](a, phi)
        return qml.expval(qml.X(0) @ qml.Z(2))

    return circuit


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("form", list(FORMS))
def test_values_that_change_by_less_than_their_repr_shows(form, diff_method):
    circuit = _circuit(form)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    a0, phi0 = torch.tensor(0.2, dtype=torch.float64), torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64)
    for a, phi in ((a0, phi0), (a0, phi0 + 1e-5), (a0 + 1e-5, phi0), (a0, phi0 + 0.1)):
        x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
        got, want = ours(x, a, phi), ref(x, a, phi)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        torch.testing.assert_close(torch.autograd.grad(got, x)[0], torch.autograd.grad(want, x)[0], atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
@pytest.mark.parametrize("form", ["plain", "adjoint"])
def test_trainable_phases_and_block_encoded_value(form, diff_method):
    circuit = _circuit(form)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    a = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    phi = torch.tensor([0.3, -0.4, 0.8], dtype=torch.float64, requires_grad=True)
    got, want = ours(x, a, phi), ref(x, a, phi)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got, (x, a, phi)), torch.autograd.grad(want, (x, a, phi))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)

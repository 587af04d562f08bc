"""Templates whose decompositions need more than one pass: ``Qubitization`` prepares a state inside its
decomposition, after gates on those wires (decomposed again instead of refused), and ``TrotterProduct`` with a
trainable time (its pieces are evolutions PennyLane cannot rebind); values and gradients against default.qubit."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _pair(body, n, diff_method, via):
    if via == "qnode":
        ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method)(body)
    else:
        ours = qml.QNode(body, qml.device("qhybrid.tensornet", wires=n), interface="torch", diff_method=diff_method)
    return ours, qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch")


@pytest.mark.parametrize("via", ["qnode", "plugin"])
def test_qubitization_prepares_its_state_inside_its_decomposition(via):
    H = qml.dot([0.4, -0.3, 0.25], [qml.Z(0), qml.X(0), qml.Y(0)])

    def body(x):
        qml.RY(x, 0)
        qml.Qubitization(H, control=[1, 2])
        return qml.expval(qml.X(0)), qml.expval(qml.Z(1))

    ours, ref = _pair(body, 3, "adjoint", via)
    x, y = (torch.tensor(0.7, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got, want = ours(x), ref(y)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert max(abs(float(b)) for b in want) > 0.05
    g, h = torch.autograd.grad(sum(got), x)[0], torch.autograd.grad(sum(want), y)[0]
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_a_trotter_product_with_a_trainable_time(diff_method):
    H = qml.dot([0.3, -0.8, 0.5], [qml.X(0) @ qml.X(1), qml.Z(1), qml.Y(0) @ qml.Z(1)])

    def body(t):
        qml.Hadamard(0)
        qml.TrotterProduct(H, t, n=2, order=2)
        return qml.expval(qml.Z(0) @ qml.Y(1))

    ours, ref = _pair(body, 2, diff_method, "qnode")
    t, u = (torch.tensor(0.9, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got, want = ours(t), ref(u)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(got, t)[0], torch.autograd.grad(want, u)[0], atol=TOL, rtol=0)

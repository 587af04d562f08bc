"""Expectations and variances of observables that are not Hermitian are refused by name (they were read as the
real part of a complex number: 0 for ``Z(0) @ X(0)``, which is ``1j * Y(0)``); Hermitian ones built the same ways
still run, against default.qubit."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import UnsupportedOperationError

A = np.array([[1.0, 2.0], [2.0, 3.0]])
B = np.array([[0.0, 1j], [-1j, 5.0]])

NOT_HERMITIAN = {
    "product on one wire": lambda: qml.Z(0) @ qml.X(0),
    "prod of X and Y": lambda: qml.prod(qml.X(0), qml.Y(0)),
    "complex coefficient": lambda: qml.dot([0.5, 1j], [qml.X(0), qml.Y(1)]),
    "complex tensor coefficient": lambda: qml.dot(torch.tensor([0.5, 0.25j]), [qml.X(0), qml.Y(1)]),
    "product of non-commuting matrices": lambda: qml.prod(qml.Hermitian(A, 0), qml.Hermitian(B, 0)),
}

HERMITIAN = {
    "product on two wires": lambda: qml.Z(0) @ qml.X(1),
    "a square": lambda: qml.X(0) @ qml.X(0) + qml.Z(1),
    "complex-typed real coefficients": lambda: qml.dot(torch.tensor([0.5, 0.25], dtype=torch.complex128), [qml.X(0), qml.Y(1)]),
    "matrices on two wires": lambda: qml.prod(qml.Hermitian(A, 0), qml.Hermitian(B, 1)),
}


def _circuit(obs, kind):
    def circuit(x):
        qml.RX(x, 0)
        qml.RY(0.3, 1)
        qml.CNOT([0, 1])
        return (qml.expval if kind == "expval" else qml.var)(obs())

    return circuit


@pytest.mark.parametrize("kind", ["expval", "var"])
@pytest.mark.parametrize("name", list(NOT_HERMITIAN))
def test_a_non_hermitian_observable_is_refused_naming_it(name, kind):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(_circuit(NOT_HERMITIAN[name], kind))
    with pytest.raises(UnsupportedOperationError, match=f"(?s){kind} of .* not Hermitian"):
        f(torch.tensor(0.4, dtype=torch.float64))


def test_the_plugin_refuses_it_too():
    f = qml.QNode(_circuit(NOT_HERMITIAN["product on one wire"], "expval"), qml.device("qhybrid.tensornet", wires=2))
    with pytest.raises(UnsupportedOperationError, match="not Hermitian"):
        f(0.4)


@pytest.mark.parametrize("name", list(HERMITIAN))
def test_hermitian_observables_built_the_same_ways_run(name):
    body = _circuit(HERMITIAN[name], "expval")
    x, y = (torch.tensor(0.4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(body)(x)
    want = qml.QNode(body, qml.device("default.qubit", wires=2), interface="torch")(y)
    torch.testing.assert_close(got, want.real.to(got.dtype), atol=1e-10, rtol=0)
    g, h = torch.autograd.grad(got, x)[0], torch.autograd.grad(want.real, y)[0]
    torch.testing.assert_close(g, h, atol=1e-10, rtol=0)

"""Parameter-shift beside operators that are not unitary (found by fuzzing against default.qubit, 2026-11-28):
a variance's square read its identity term as 1, not the norm (``var(X)`` after a non-unitary matrix: gradient 0
for -0.136), and so did an expectation and variance of one identity observable together; a trainable non-unitary
gate was decomposed by PennyLane into rotations (``ctrl(exp(X, a))``: a different value) or crashed
(``AttributeError`` for ``s_prod``, ``sum``, ``ctrl(prod)``), and a batched ``qml.exp`` crashed in PennyLane's
``has_decomposition``. Values and gradients against default.qubit to 1e-10, or a refusal naming the gate."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import GradientError

TOL = 1e-10
SHRINK = np.diag([1.0, 0.5])


def _compare(circuit, n, x, method="parameter-shift"):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = ours(a), ref(b)
    got = torch.stack(got) if isinstance(got, (tuple, list)) else got
    want = torch.stack(want) if isinstance(want, (tuple, list)) else want
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    weights = torch.linspace(1.0, 2.0, got.numel(), dtype=torch.float64).reshape(got.shape)
    (got * weights).sum().backward()
    (want * weights).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)


@pytest.mark.parametrize(
    "measure",
    [
        lambda: qml.var(qml.X(0)),
        lambda: qml.var(qml.Z(0)),
        lambda: qml.var(qml.X(0) + 0.5 * qml.Identity(1)),
        lambda: qml.var(qml.Y(0) @ qml.X(1)),
        lambda: (qml.expval(2 * qml.Identity(1)), qml.var(2 * qml.Identity(1))),
        lambda: (qml.expval(qml.Z(0)), qml.var(qml.X(1))),
    ],
)
@pytest.mark.parametrize("gate", ["QubitUnitary", "ControlledQubitUnitary", "s_prod"])
@pytest.mark.parametrize("batched", [False, True])
def test_variances_after_a_non_unitary_gate(measure, gate, batched):
    make = {
        "QubitUnitary": lambda: qml.QubitUnitary(SHRINK, wires=0),
        "ControlledQubitUnitary": lambda: qml.ControlledQubitUnitary(np.diag([1.0, 0.4]), wires=[1, 0]),
        "s_prod": lambda: qml.s_prod(1.5, qml.X(0)),
    }[gate]

    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        make()
        qml.CNOT([0, 1])
        return measure()

    x = torch.tensor([[0.37, 1.1], [-0.6, 0.4]] if batched else [0.37, 1.1], dtype=torch.float64)
    _compare(circuit, 2, x.T if batched else x)


@pytest.mark.parametrize(
    "gate",
    [
        lambda a: qml.s_prod(a, qml.X(0)),
        lambda a: qml.sum(qml.s_prod(a, qml.X(0)), qml.Y(1)),
        lambda a: qml.ctrl(qml.exp(qml.X(0), a), control=1),
        lambda a: qml.adjoint(qml.ctrl(qml.exp(qml.X(0), a), control=1)),
    ],
)
def test_a_trainable_non_unitary_gate_is_named(gate):
    def circuit(a):
        qml.Hadamard(1)
        gate(a)
        return qml.expval(qml.Identity(0)), qml.expval(qml.Z(0))

    a = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    got = torch.stack(f(a))
    torch.testing.assert_close(got, torch.stack(ref(a)), atol=TOL, rtol=0)  # (a rotation decomposition gave others)
    with pytest.raises(GradientError, match="not unitary"):
        torch.autograd.grad(got.sum(), a)
    _compare(circuit, 2, a.detach(), method="adjoint")


def test_a_controlled_product_decomposes_for_its_rules():
    def circuit(a):
        qml.Hadamard(1)
        qml.ctrl(qml.prod(qml.RX(a, 0), qml.Hadamard(2)), control=1)
        return qml.expval(qml.Z(0))

    _compare(circuit, 3, torch.tensor(0.37, dtype=torch.float64))


@pytest.mark.parametrize("method", ["adjoint", "backprop"])
def test_a_batched_exponential(method):
    def circuit(a):
        qml.RY(0.3, 0)
        qml.exp(qml.X(0), a)
        return qml.expval(qml.Identity(0)), qml.expval(qml.Z(0))

    _compare(circuit, 1, torch.tensor([0.2, 0.5], dtype=torch.float64), method=method)


@pytest.mark.parametrize("batch", [None, 3])
def test_a_trainable_matrix_is_refused_by_its_shape_batched_or_not(batch):
    """A batch of (unitary) matrices was refused as "not unitary for every value" (found by a fuzzing helper); it is
    a matrix parameter, refused by its shape as a single one is."""

    def circuit(x):
        matrix = qml.math.stack([qml.RY.compute_matrix(t) for t in x]) if batch else qml.RY.compute_matrix(x)
        qml.QubitUnitary(matrix, 0)
        return qml.expval(qml.Z(0))

    x = torch.linspace(0.2, 0.9, batch or 1, dtype=torch.float64)[slice(None) if batch else 0].requires_grad_()
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")(circuit)
    with pytest.raises(GradientError, match=r"QubitUnitary parameter 0 has shape \((3, )?2, 2\); parameter-shift"):
        torch.autograd.grad(f(x).sum(), x)

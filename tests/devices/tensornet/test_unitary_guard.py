"""A user matrix (or an operator used as a gate: a scaled operator, an exponential) that is not unitary
(``readout/identity_terms.py``, ``engines/lightcone/unitary_guard.py``):
default.qubit's numbers (the unnormalised state's ``<psi|O|psi>``, identity terms times the norm) on few wires and
on 20, where the circuit runs as one state vector, or a refusal naming the matrix where that state does not fit;
unitary matrices keep the wide engines."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import ContractionTooLargeError

TOL = 1e-10


def _circuit(n, matrix_op):
    def circuit(w):
        for i in range(n):
            qml.RY(w[i % 3] * (i + 1) / n, i)
        matrix_op()
        for i in range(n - 1):
            qml.CNOT([i, i + 1])
        return (
            qml.expval(qml.Identity(0)),
            qml.expval(qml.Z(0) + 2 * qml.Identity(1)),
            qml.expval(qml.Z(n - 2) @ qml.X(n - 1)),
            qml.expval(qml.dot([0.5, -1.5], [qml.Z(0) @ qml.Z(1), qml.Identity(0)])),
        )

    return circuit


NON_UNITARY = {
    "QubitUnitary": lambda: qml.QubitUnitary(np.array([[1.0, 0.5], [0.0, 0.7]]), wires=0),
    "ControlledQubitUnitary": lambda: qml.ControlledQubitUnitary(np.array([[0.6, 0.0], [0.3, 1.4]]), wires=[1, 0]),
    # operators used as gates that are not unitary, though no matrix is their data (``_structure.may_be_non_unitary``):
    # their identity terms were read as 1, not as the norm (2.25 for s_prod(1.5, X))
    "Exp": lambda: qml.exp(qml.X(0), 0.3),
    "SProd": lambda: qml.s_prod(1.5, qml.X(0)),
    "Prod": lambda: qml.prod(qml.RX(0.2, 1), qml.s_prod(0.5, qml.Z(0))),
}


@pytest.mark.parametrize("n", [3, 20])
@pytest.mark.parametrize("name", sorted(NON_UNITARY))
def test_a_non_unitary_matrix_gives_default_qubits_numbers(name, n):
    circuit = _circuit(n, NON_UNITARY[name])
    dev = qhybrid.device("tensornet", wires=n)
    ours = qhybrid.qnode(dev, diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    w = torch.tensor([0.7, -0.4, 1.2], dtype=torch.float64)
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    got, want = torch.stack(ours(a)), torch.stack(ref(b))
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    assert abs(float(want[0]) - 1.0) > 1e-4  # the state is not normalised: the identity reads its norm
    (got * torch.tensor([1.0, -0.5, 2.0, 0.3])).sum().backward()
    (want * torch.tensor([1.0, -0.5, 2.0, 0.3])).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)
    if n == 20:
        (choice,) = dev.plan_cache_info().engines
        assert choice.engine == "state vector" and f"{name} on wires" in choice.reason and "not unitary" in choice.reason


def test_a_unitary_matrix_keeps_the_wide_engines_and_its_numbers():
    u = qml.matrix(qml.Rot(0.3, -0.2, 0.9, wires=0))
    circuit = _circuit(20, lambda: qml.QubitUnitary(u, wires=0))
    dev = qhybrid.device("tensornet", wires=20)
    w = torch.tensor([0.7, -0.4, 1.2], dtype=torch.float64)
    got = torch.stack(qhybrid.qnode(dev)(circuit)(w))
    assert dev.plan_cache_info().engines[0].engine != "state vector"
    want = torch.stack(qml.QNode(circuit, qml.device("default.qubit", wires=20), interface="torch")(w))
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)


def test_a_non_unitary_matrix_whose_state_does_not_fit_is_refused_naming_it():
    dev = qhybrid.device("tensornet", wires=20, max_memory=1 << 20)
    node = qhybrid.qnode(dev)(_circuit(20, NON_UNITARY["QubitUnitary"]))
    with pytest.raises(ContractionTooLargeError, match=r"QubitUnitary on wires \[0\] is not unitary.*max_memory"):
        node(torch.tensor([0.7, -0.4, 1.2], dtype=torch.float64))


@pytest.mark.parametrize("batch", [None, 2])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("matrix", [[[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.5], [0.0, 0.7]]], ids=["unitary", "non-unitary"])
def test_a_tape_measuring_identity_terms_alone_reads_the_norm(matrix, diff_method, batch):
    """Every measurement an identity (the transform's only measurement the norm's probabilities, which the device
    returns bare, not in a tuple: they were unpacked element by element, so expval(I) read one probability)."""

    def circuit(x):
        qml.RY(x, 1)
        qml.QubitUnitary(np.array(matrix), wires=0)
        qml.RX(0.4 * x, 0)
        return qml.expval(qml.Identity(0)), qml.expval(qml.dot([1.5, 2.0], [qml.Identity(0), qml.Identity(1)]))

    x0 = torch.tensor([1.3, 0.4] if batch else 1.3, dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    x, y = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    got, want = ours(x), ref(y)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    g, h = (torch.autograd.grad(sum(r.sum() for r in out), t, allow_unused=True)[0] for out, t in ((got, x), (want, y)))
    torch.testing.assert_close(torch.zeros_like(x) if g is None else g, torch.zeros_like(y) if h is None else h, atol=TOL, rtol=0)


class _Shrink(qml.operation.Operation):
    """A user's own gate whose matrix is not unitary (no PennyLane class checks it)."""

    num_wires = 1
    num_params = 1
    grad_method = None

    @staticmethod
    def compute_matrix(t):
        c = qml.math.cos(t)
        return qml.math.stack([qml.math.stack([c, 0.3 * c]), qml.math.stack([0.0 * c, 0.8 + 0.0 * c])])


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_a_gate_class_of_the_users_own_is_checked_for_unitarity(diff_method):
    """Only PennyLane's named gates skip the unitarity check (a host read a step): a class of the user's own whose
    matrix is not unitary takes torch's reverse mode, not the adjoint walk, and its gradient is default.qubit's."""

    def circuit(w):
        qml.RY(w[0], 0)
        _Shrink(w[1], wires=0)
        qml.CNOT([0, 1])
        qml.RX(w[2], 1)
        return qml.expval(qml.Z(0)), qml.expval(qml.Z(0) @ qml.X(1))

    w = torch.tensor([0.7, -0.4, 1.2], dtype=torch.float64)
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    got, want = torch.stack(ours(a)), torch.stack(ref(b))
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (got * torch.tensor([1.0, -0.5])).sum().backward()
    (want * torch.tensor([1.0, -0.5])).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)

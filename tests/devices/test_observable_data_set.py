"""An observable whose data are set after it was made (``H.data = ...``) is measured with its new data, on every
call and every gradient method, as PennyLane's backprop path measures it.

PennyLane builds a sum's and a scaled operator's ``pauli_rep`` once, at construction, and keeps it when
``data`` are set; qhybrid reads that sentence, and keyed observables once per object, so such an observable
ran its old coefficients (0.4605 for 0.8290) until the fix this file tests. The references below are
default.qubit on an observable made afresh from the new data (nothing stale in it), to 1e-10."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

WIRES = 3
WORDS = [qml.Z(0) @ qml.Z(1), qml.X(0), qml.Y(1) @ qml.X(2), qml.Z(2)]
KINDS = {
    "Sum (qml.dot)": lambda c: qml.dot(list(c), WORDS),
    "LinearCombination (qml.Hamiltonian)": lambda c: qml.Hamiltonian(list(c), WORDS),
    "SProd": lambda c: c[0] * (qml.X(0) @ qml.Y(1)),
    "Sum of a Hermitian and a scaled word": lambda c: qml.sum(  # data: (the matrix, the scalar)
        qml.Hermitian(np.diag([1.0, -2.0]), wires=2), qml.s_prod(c[-1], qml.Z(0) @ qml.X(1))
    ),
}
"""Observable kinds made from their data (new data: new floats; the Hermitian's matrix kept)."""


def _circuit(obs_of):
    def circuit(x):
        for i in range(WIRES):
            qml.RY(x[i], wires=i)
        qml.CNOT([0, 1])
        qml.CNOT([1, 2])
        qml.RX(x[WIRES], wires=0)
        qml.RZ(0.37, wires=1)
        return qml.expval(obs_of())

    return circuit


def _reference(make, coeffs, x):
    fresh = make(coeffs)
    node = qml.QNode(_circuit(lambda: fresh), qml.device("default.qubit", wires=WIRES), interface="torch")
    x = x.detach().clone().requires_grad_(True)
    value = node(x)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_data_set_between_calls_are_measured(kind, diff_method):
    make = KINDS[kind]
    rng = np.random.default_rng(11)
    H = make(rng.uniform(-1, 1, 4))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=WIRES), diff_method=diff_method)(_circuit(lambda: H))
    x = torch.tensor(rng.uniform(-np.pi, np.pi, WIRES + 1), dtype=torch.float64, requires_grad=True)
    node(x)  # the first data, keyed and cached
    for step in range(3):
        coeffs = tuple(d if isinstance(d, np.ndarray) else rng.uniform(-1, 1) for d in H.data)
        H.data = coeffs
        value = node(x)
        (grad,) = torch.autograd.grad(value, x)
        want_value, want_grad = _reference(make, coeffs, x)
        assert float(value.detach()) == pytest.approx(float(want_value), abs=1e-10), (kind, diff_method, step)
        torch.testing.assert_close(grad, want_grad, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", ["Sum (qml.dot)", "LinearCombination (qml.Hamiltonian)", "SProd"])
def test_data_set_before_the_first_call_are_measured(kind):
    make = KINDS[kind]
    H = make([0.5, -0.3, 0.2, 0.7])
    coeffs = tuple(0.9 - 0.4 * i for i in range(len(H.data)))
    H.data = coeffs  # PennyLane's pauli_rep still holds the first coefficients
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=WIRES))(_circuit(lambda: H))
    x = torch.tensor([0.3, -1.1, 0.8, 0.4], dtype=torch.float64)
    assert float(node(x)) == pytest.approx(float(_reference(make, coeffs, x)[0]), abs=1e-10)


def test_tensor_coefficients_set_as_data_get_their_gradients():
    H = qml.Hamiltonian([0.5, -0.3, 0.2, 0.7], WORDS)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=WIRES), diff_method="adjoint")(_circuit(lambda: H))
    x = torch.tensor([0.3, -1.1, 0.8, 0.4], dtype=torch.float64)
    node(x)
    c = torch.tensor([0.9, 0.1, -0.6, 0.25], dtype=torch.float64, requires_grad=True)
    H.data = tuple(c)
    value = node(x)
    (grad,) = torch.autograd.grad(value, c)
    c_ref = c.detach().clone().requires_grad_(True)
    fresh = qml.Hamiltonian(list(c_ref), WORDS)
    ref = qml.QNode(_circuit(lambda: fresh), qml.device("default.qubit", wires=WIRES), interface="torch")(x)
    (want,) = torch.autograd.grad(ref, c_ref)
    assert float(value) == pytest.approx(float(ref), abs=1e-10)
    torch.testing.assert_close(grad, want, atol=1e-10, rtol=0)


def test_data_set_are_measured_on_many_wires_and_through_the_plugin():
    n = 30  # light cones: the reference is the same device on an observable made afresh
    edges = [(i, (i + 1) % n) for i in range(n)]

    def make(c):
        return qml.dot(list(c), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(g, obs_of):
        for i in range(n):
            qml.Hadamard(i)
        for u, v in edges:
            qml.IsingZZ(g[0], wires=[u, v])
        for i in range(n):
            qml.RX(g[1], wires=i)
        return qml.expval(obs_of())

    rng = np.random.default_rng(5)
    H = make(rng.uniform(-1, 1, n))
    g = torch.tensor([0.4, -0.7], dtype=torch.float64)
    dev = qml.device("qhybrid.tensornet", wires=n)
    plugin = qml.QNode(lambda g: circuit(g, lambda: H), dev, interface="torch")
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(lambda g: circuit(g, lambda: H))
    node(g), plugin(g)
    coeffs = tuple(rng.uniform(-1, 1, n))
    H.data = coeffs
    fresh = make(coeffs)
    want = float(qhybrid.qnode(qhybrid.device("tensornet", wires=n))(lambda g: circuit(g, lambda: fresh))(g))
    assert abs(want - float(qhybrid.qnode(qhybrid.device("tensornet", wires=n))(
        lambda g: circuit(g, lambda: make(rng.uniform(-1, 1, n))))(g))) > 1e-3  # the data matter
    assert float(node(g)) == pytest.approx(want, abs=1e-10)
    assert float(plugin(g)) == pytest.approx(want, abs=1e-10)


class _ScaledZ(qml.operation.Operator):
    """An observable keeping its datum behind a property (not in a ``data`` tuple qhybrid can watch)."""

    num_wires = 1

    def __init__(self, c, wires):
        super().__init__(c, wires=wires)

    @property
    def data(self):
        return (self._c,)

    @data.setter
    def data(self, value):
        self._c = value[0]

    @staticmethod
    def compute_matrix(c):
        return c * np.diag([1.0, -1.0])


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_data_kept_behind_a_property_are_compared_by_value(diff_method):
    H = _ScaledZ(0.5, wires=1)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=WIRES), diff_method=diff_method)(_circuit(lambda: H))
    x = torch.tensor([0.3, -1.1, 0.8, 0.4], dtype=torch.float64, requires_grad=True)
    for c in (0.5, -1.25, 2.0):
        H.data = (c,)
        value = node(x)
        (grad,) = torch.autograd.grad(value, x)
        want_value, want_grad = _reference(lambda d: qml.Hermitian(d[0] * np.diag([1.0, -1.0]), wires=1), (c,), x)
        assert float(value.detach()) == pytest.approx(float(want_value), abs=1e-10)
        torch.testing.assert_close(grad, want_grad, atol=1e-10, rtol=0)

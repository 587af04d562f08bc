"""Gradient transforms through a plain ``qml.qnode`` on qhybrid.tensornet at every ``max_diff`` (issue 41).

Finding 3: since ca06d68 a transform's shifted tapes reached the device with torch parameters at every order;
from max_diff=2 PennyLane also caches results by tape hash, and torch results came back from that cache with
another graph or none: finite-diff Hessians had -g/h on their diagonal (-350175.6 where 0.2248 is right) and a
Hamiltonian's weights got a zero first derivative. At max_diff=1 torch tapes stay (the first derivative under
``create_graph`` is differentiable: ``test_plugin_higher_derivatives``), and a gate whose matrix only NumPy
builds runs there on detached values, its second derivative refused by name.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

from qhybrid.errors import GradientError

NAME = "qhybrid.tensornet"
pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _circuit(x):
    qml.RY(x[0], wires=0)
    qml.RX(x[1], wires=0)
    qml.CNOT([0, 1])
    qml.RY(2 * x[0] + 0.3, wires=1)
    return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(0) @ qml.PauliX(1))


def _loss(f):
    return lambda x: f(x)[0] + 0.7 * f(x)[1]


@pytest.mark.parametrize(
    "diff_method, kwargs, tol",
    [
        ("finite-diff", {"h": 1e-6}, 1e-2),  # h as in PennyLane's test_hessian
        ("parameter-shift", {}, 1e-10),
        ("adjoint", {}, 1e-10),
        ("best", {}, 1e-10),
        ("backprop", {}, 1e-10),
    ],
)
@pytest.mark.parametrize("interface", ["torch", "auto"])
def test_max_diff_2_hessians_match_default_qubit(diff_method, kwargs, tol, interface):
    f = qml.qnode(qml.device(NAME, wires=2), diff_method=diff_method, max_diff=2, interface=interface,
                  gradient_kwargs=kwargs)(_circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(_circuit)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    f(x)[0].backward()  # a first call fills PennyLane's cache, as in PennyLane's own test
    ours = torch.autograd.functional.hessian(_loss(f), x)
    torch.testing.assert_close(ours, torch.autograd.functional.hessian(_loss(ref), x), atol=tol, rtol=0)


@pytest.mark.parametrize("max_diff", [1, 2])
@pytest.mark.parametrize("diff_method", ["finite-diff", "parameter-shift"])
def test_hamiltonian_weight_and_coefficient_gradients(diff_method, max_diff):
    """PennyLane's ``TestTapeExpansion::test_hamiltonian_expansion_analytic``: gave w.grad = [0, 0]."""
    obs = [qml.PauliX(0), qml.PauliX(0) @ qml.PauliZ(1), qml.PauliZ(0) @ qml.PauliZ(1)]

    def circuit(data, weights, coeffs):
        qml.templates.AngleEmbedding(data, wires=[0, 1])
        qml.templates.BasicEntanglerLayers(torch.reshape(weights, [1, -1]), wires=[0, 1])
        return qml.expval(qml.Hamiltonian(coeffs, obs))

    grads = []
    for name, method in ((NAME, diff_method), ("default.qubit", "backprop")):
        f = qml.qnode(qml.device(name, wires=2), diff_method=method, max_diff=max_diff, interface="torch")(circuit)
        d = torch.tensor([0.1, 0.2], dtype=torch.float64)
        w = torch.tensor([0.654, -0.734], dtype=torch.float64, requires_grad=True)
        c = torch.tensor([-0.6543, 0.24, 0.54], dtype=torch.float64, requires_grad=True)
        f(d, w, c).backward()
        grads.append((w.grad, c.grad))
    tol = 1e-6 if diff_method == "finite-diff" else 1e-10
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, atol=tol, rtol=0)
    assert grads[0][0].abs().min() > 0.05


class _NumpyRX(qml.operation.Operation):
    """RX with its matrix built by NumPy (as PennyLane's qnn suite's DummyOp and Strawberry Fields' Kerr), and
    RX's shift rule."""

    num_wires = 1
    num_params = 1
    grad_method = "A"
    parameter_frequencies = [(1,)]

    @staticmethod
    def compute_matrix(*params):  # pylint: disable=arguments-differ
        c, s = np.cos(params[0] / 2), np.sin(params[0] / 2)
        return np.array([[c, -1j * s], [-1j * s, c]])


def test_numpy_matrix_gate_first_derivative_under_create_graph_then_a_refusal():
    """PennyLane's ``test_vjp_is_unwrapped_for_param_shift``: ``Can't call numpy() on Tensor that requires grad``
    before; now the first derivative is answered and its own derivative is refused by name."""

    @qml.qnode(qml.device(NAME, wires=1), interface="torch", diff_method="parameter-shift")
    def circuit(x):
        qml.RY(x[1], wires=0)
        _NumpyRX(x[0], wires=0)
        return qml.expval(qml.PauliZ(0))

    x = torch.tensor([0.1, 0.4], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(circuit(x), x, create_graph=True)
    ref = qml.qnode(qml.device("default.qubit", wires=1), interface="torch", diff_method="backprop")(
        lambda x: (qml.RY(x[1], wires=0), qml.RX(x[0], wires=0), qml.expval(qml.PauliZ(0)))[-1]
    )
    (g_ref,) = torch.autograd.grad(ref(x), x)
    torch.testing.assert_close(g.detach(), g_ref, atol=1e-10, rtol=0)
    with pytest.raises(GradientError, match=r"matrix is built with NumPy.*qml.math.*max_diff=2"):
        torch.autograd.grad(g.sum(), x)

"""Second derivatives through plain PennyLane on qhybrid.tensornet: right, or refused naming max_diff=2 and
backprop; never the silent zeros PennyLane's non-differentiable first derivatives give (issue 20, item 2).

PennyLane hands a device VJP (and a gradient transform's shifted runs at max_diff=1) numpy tapes, so the
first derivative it returns has no derivative of its own: ``torch.autograd.functional.hessian`` read it as 0.
"""

from __future__ import annotations


import numpy as np
import pennylane as qml
import pytest
import torch
from pennylane import numpy as pnp
from pennylane.devices import ExecutionConfig

from qhybrid.errors import GradientError

TOL = 1e-10
NAME = "qhybrid.tensornet"


pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _issue_circuit(x):
    qml.RY(x[0], wires=0)
    qml.RX(x[1], wires=0)
    return qml.expval(qml.PauliZ(0))


def _random_circuit(x):
    """Three wires, every parameter entering more than one gate, two outputs."""
    qml.RX(x[0], 0)
    qml.RY(x[1], 1)
    qml.CNOT([0, 1])
    qml.Rot(x[2], x[0], 0.3, wires=2)
    qml.CRZ(x[1], [2, 0])
    qml.IsingXX(x[2], [1, 2])
    qml.RY(x[0], 2)
    return qml.expval(qml.Z(0) @ qml.X(2)), qml.expval(qml.Y(1))


def _scalar(f):
    def g(x):
        out = f(x)
        return out if not isinstance(out, (tuple, list)) else sum((i + 1.0) * o for i, o in enumerate(out))

    return g


def _hessian(device_name, circuit, x, **kwargs):
    f = qml.qnode(qml.device(device_name, wires=3), interface="torch", **kwargs)(circuit)
    return torch.autograd.functional.hessian(_scalar(f), x)


X = torch.tensor([1.0, 2.0], dtype=torch.float64)
X3 = torch.tensor([0.4, -1.1, 0.8], dtype=torch.float64)


def test_issue_example_default_diff_method_gives_the_hessian():
    ours = _hessian(NAME, _issue_circuit, X)
    expected = torch.tensor([[0.2248, 0.7651], [0.7651, 0.2248]], dtype=torch.float64)
    torch.testing.assert_close(ours, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(ours, _hessian("default.qubit", _issue_circuit, X), atol=TOL, rtol=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"diff_method": "best"},
        {"diff_method": "backprop"},
        {"diff_method": "best", "max_diff": 2},
        {"diff_method": "adjoint", "max_diff": 2},
        {"diff_method": "parameter-shift", "max_diff": 2},
    ],
    ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()) or "default",
)
def test_hessians_match_default_qubit(kwargs):
    ours = _hessian(NAME, _random_circuit, X3, **kwargs)
    ref = _hessian("default.qubit", _random_circuit, X3, diff_method="backprop")
    torch.testing.assert_close(ours, ref, atol=TOL, rtol=0)
    assert ours.abs().sum() > 0.1


def test_device_vjps_refuse_a_second_derivative_naming_the_fix():
    with pytest.raises(GradientError, match=r"max_diff=2.*backprop"):
        _hessian(NAME, _random_circuit, X3, diff_method="adjoint")


def test_parameter_shift_at_max_diff_1_gives_the_hessian():
    """Its shifted tapes reach the device with torch parameters (``convert_to_numpy=False``), so the
    first derivative is differentiable: the Hessian is right (default.qubit's would be zero)."""
    ours = _hessian(NAME, _random_circuit, X3, diff_method="parameter-shift")
    torch.testing.assert_close(ours, _hessian("default.qubit", _random_circuit, X3, diff_method="backprop"), atol=TOL, rtol=0)


def test_adjoint_first_derivatives_still_work_and_are_not_refused():
    f = qml.qnode(qml.device(NAME, wires=3), interface="torch", diff_method="adjoint")(_random_circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(_random_circuit)
    ours = torch.autograd.functional.jacobian(_scalar(f), X3)
    torch.testing.assert_close(ours, torch.autograd.functional.jacobian(_scalar(ref), X3), atol=TOL, rtol=0)
    # the device API called directly (not from a backward pass) answers as before
    dev = qml.device(NAME, wires=1)
    tape = qml.tape.QuantumScript([qml.RX(0.3, 0)], [qml.expval(qml.Z(0))])
    np.testing.assert_allclose(dev.compute_vjp([tape], [1.0])[0][0], -np.sin(0.3), atol=TOL)


def test_autograd_interface_default_gives_the_hessian():
    x = pnp.array([1.0, 2.0], requires_grad=True)
    ours = qml.jacobian(qml.grad(qml.qnode(qml.device(NAME, wires=1))(_issue_circuit)))(x)
    ref = qml.jacobian(qml.grad(qml.qnode(qml.device("default.qubit", wires=1))(_issue_circuit)))(x)
    np.testing.assert_allclose(ours, ref, atol=TOL)


def test_broadcast_hessian_diagonal_blocks():
    """A batch of inputs: the Jacobian of the gradient per sample, through the default diff_method."""
    def circuit(x, w):
        qml.RY(x, 0)
        qml.RX(w, 0)
        return qml.expval(qml.Z(0))

    x = torch.tensor([0.1, 0.5, -0.9], dtype=torch.float64)
    w = torch.tensor(0.7, dtype=torch.float64)
    hessians = []
    for name in (NAME, "default.qubit"):
        f = qml.qnode(qml.device(name, wires=1), interface="torch")(circuit)
        hessians.append(torch.autograd.functional.hessian(lambda x, w: f(x, w).sum(), (x, w)))
    for ours, ref in zip(*hessians):
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)


# --- the execution config behind it ---------------------------------------------------------------


@pytest.mark.parametrize("interface", ["torch", "autograd"])
@pytest.mark.parametrize("method", ["best", "device"])
def test_best_is_backprop_where_backprop_serves_every_order(interface, method):
    config = qml.device(NAME).setup_execution_config(ExecutionConfig(gradient_method=method, interface=interface))
    assert config.gradient_method == "backprop" and config.convert_to_numpy is False


@pytest.mark.parametrize("interface", ["torch", "autograd"])
def test_adjoint_for_higher_orders_runs_as_backprop(interface):
    requested = ExecutionConfig(gradient_method="adjoint", interface=interface, derivative_order=2)
    config = qml.device(NAME).setup_execution_config(requested)
    assert config.gradient_method == "backprop" and not config.use_device_jacobian_product


def test_best_without_a_differentiable_interface_stays_adjoint():
    config = qml.device(NAME).setup_execution_config(ExecutionConfig(gradient_method="best", interface="numpy"))
    assert config.gradient_method == "adjoint" and config.use_device_jacobian_product


def test_a_first_derivative_with_create_graph_is_answered_and_differentiable():
    """``qml.qnn.TorchLayer`` + ``autograd.grad(..., create_graph=True)`` with parameter-shift (PennyLane's qnn
    suite): the first derivative equals default.qubit's, and its own derivative is right too."""

    def circuit(inputs, w0):
        qml.RY(inputs[0], wires=0)
        qml.RX(w0, wires=0)
        qml.CNOT([0, 1])
        qml.RY(inputs[1] * w0, wires=1)
        return qml.expval(qml.Z(1))

    def derivatives(device_name, diff_method):
        qnode = qml.qnode(qml.device(device_name, wires=2), interface="torch", diff_method=diff_method)(circuit)
        torch.manual_seed(3)
        layer = qml.qnn.TorchLayer(qnode, {"w0": 1}).double()
        x = torch.tensor([0.1, 0.7], dtype=torch.float64, requires_grad=True)
        u = layer(x)
        (u_x,) = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), create_graph=True)
        (u_xw,) = torch.autograd.grad(u_x.sum(), layer.w0)
        return u_x.detach(), u_xw

    ours = derivatives(NAME, "parameter-shift")
    torch.testing.assert_close(ours[0], derivatives("default.qubit", "parameter-shift")[0], atol=TOL, rtol=0)
    exact = derivatives("default.qubit", "backprop")
    torch.testing.assert_close(ours[0], exact[0], atol=TOL, rtol=0)
    torch.testing.assert_close(ours[1], exact[1], atol=TOL, rtol=0)

"""A call under ``torch.inference_mode()`` (a validation pass before training) leaves nothing behind that a later
differentiated call cannot use. The tables, plans and traces it made were inference tensors, which autograd refuses
to save: every later call with gradients failed ("Inference tensors cannot be saved for backward"), of that qnode, of
a new qnode on a new device (a process-wide table), of a static trace or a plain replay, of ``ExpQLayer``, and of
PennyLane's QNode on the plugin (found by a fuzzing helper)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
METHODS = ["adjoint", "parameter-shift", "backprop"]


def _circuit(x, y):
    qml.RX(x[0], 0)
    qml.RY(x[1], 1)
    qml.CNOT([0, 1])
    qml.RY(y, 0)
    return qml.expval(qml.Z(0) @ qml.X(1))


def _grad(node, x):
    return torch.autograd.grad(node(x, 0.4), x)[0]


@pytest.fixture
def x():
    return torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)


@pytest.fixture
def want(x):
    return _grad(qml.QNode(_circuit, qml.device("default.qubit", wires=2), interface="torch"), x)


def _qnode(diff_method, static=False):
    return qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(_circuit)


@pytest.mark.parametrize("diff_method", METHODS)
@pytest.mark.parametrize("static", [False, True])
def test_the_same_qnode_differentiates_after_inference(diff_method, static, x, want):
    node = _qnode(diff_method, static)
    with torch.inference_mode():
        for _ in range(3):  # (a plain qnode replays its recording from the third sighting)
            value = node(x, 0.4)
    assert not value.requires_grad
    torch.testing.assert_close(value, node(x, 0.4).detach(), atol=TOL, rtol=0)
    torch.testing.assert_close(_grad(node, x), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", METHODS)
def test_another_qnode_differentiates_after_inference(diff_method, x, want):
    with torch.inference_mode():
        _qnode("adjoint")(x, 0.4)
    torch.testing.assert_close(_grad(_qnode(diff_method), x), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", METHODS)
def test_pennylane_qnode_on_the_plugin_differentiates_after_inference(diff_method, x, want):
    dev = qml.device("qhybrid.tensornet", wires=2)
    options = {"device_vjp": True} if diff_method == "adjoint" else {}
    node = qml.QNode(_circuit, dev, interface="torch", diff_method=diff_method, **options)
    with torch.inference_mode():
        node(x, 0.4)
    torch.testing.assert_close(_grad(node, x), want, atol=TOL, rtol=0)


def test_a_layer_trains_after_inference():
    torch.manual_seed(0)
    layer = qhybrid.ExpQLayer(2, 1, diff_method="parameter-shift").double()
    inputs = torch.rand(4, 2, dtype=torch.float64)
    with torch.inference_mode():
        seen = layer(inputs)
    out = layer(inputs)
    out.sum().backward()
    torch.testing.assert_close(seen, out.detach(), atol=TOL, rtol=0)
    assert layer.weight.grad is not None and bool(layer.weight.grad.abs().sum() > 0)


def test_aer_differentiates_after_inference(x, want):
    node = qhybrid.qnode(qhybrid.device("aer", wires=2), diff_method="parameter-shift")(_circuit)
    with torch.inference_mode():
        node(x, 0.4)
    torch.testing.assert_close(_grad(node, x), want, atol=TOL, rtol=0)

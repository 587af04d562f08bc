"""An empty batch (inputs of shape ``(0, n)``) gives correctly shaped empty results and zero gradients of the
inputs' and weights' shapes, through qhybrid.qnode, qhybrid.execute and the PennyLane plugin, for every
diff_method (issue 20, item 6: it crashed in the state-vector kernels, "cannot reshape tensor of 0 elements")."""

from __future__ import annotations


import pennylane as qml
import pytest
import torch

import qhybrid

N = 3


pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _circuit(x, w):
    qml.AngleEmbedding(x, wires=range(N))
    qml.StronglyEntanglingLayers(w, wires=range(N))
    return qml.expval(qml.Z(0)), qml.probs(wires=[1, 2]), qml.var(qml.X(2))


def _inputs(batch, x_grad=True):
    x = torch.rand(batch, N, dtype=torch.float64, requires_grad=x_grad)
    w = torch.rand(2, N, 3, dtype=torch.float64, requires_grad=True)
    return x, w


def _check(f, x_grad=True):
    """f's results on an empty batch: the shapes of a batch of 3 with 0 in place of 3; zero gradients."""
    full = f(*_inputs(3))
    x, w = _inputs(0, x_grad)
    out = f(x, w)
    assert len(out) == len(full)
    for o, r in zip(out, full):
        assert o.shape == (0, *r.shape[1:]) and o.dtype == r.dtype
    loss = sum(o.sum() for o in out)
    loss.backward()
    assert torch.equal(w.grad, torch.zeros_like(w))
    if x_grad:
        assert x.grad.shape == (0, N)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["best", "adjoint", "parameter-shift", "backprop", None])
def test_qnode(diff_method, static):
    """(``static_structure=True`` with parameter-shift crashed on the empty batch: the rule of a batched gate was
    made from its first element, and a plain qnode replays the same trace now)"""
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method=diff_method, static_structure=static)(_circuit)
    if diff_method is None:
        out = f(*_inputs(0, x_grad=False))
        assert [tuple(o.shape) for o in out] == [(0,), (0, 4), (0,)]
    else:
        _check(f)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_execute_beside_a_non_empty_tape(diff_method):
    dev = qhybrid.device("tensornet", wires=N)
    x, w = _inputs(0)
    x3, _ = _inputs(3)
    tapes = []
    for xx in (x, x3):
        with qml.queuing.AnnotatedQueue() as q:
            _circuit(xx, w)
        tapes.append(qml.tape.QuantumScript.from_queue(q))
    empty, full = qhybrid.execute(tapes, dev, diff_method=diff_method)
    assert [o.shape for o in empty] == [(0,), (0, 4), (0,)] and [o.shape for o in full] == [(3,), (3, 4), (3,)]
    sum(o.sum() for o in empty).backward()
    assert x.grad.shape == (0, N) and torch.equal(w.grad, torch.zeros_like(w))


@pytest.mark.parametrize("diff_method", ["best", "adjoint", "backprop", "parameter-shift"])
def test_plugin(diff_method):
    f = qml.qnode(qml.device("qhybrid.tensornet", wires=N), interface="torch", diff_method=diff_method)(_circuit)
    # PennyLane's own parameter-shift refuses trainable broadcast inputs, empty or not
    _check(f, x_grad=diff_method != "parameter-shift")


def test_plugin_jacobian_of_an_empty_batch():
    dev = qml.device("qhybrid.tensornet", wires=1)
    tape = qml.tape.QuantumScript([qml.RX(torch.zeros(0, dtype=torch.float64), 0), qml.RY(0.3, 0)],
                                  [qml.expval(qml.Z(0))], trainable_params=[1])
    jac = dev.compute_derivatives(tape)
    assert jac.shape == (0,)


def test_torch_layer_and_exp_qlayer():
    @qhybrid.qnode(qhybrid.device("tensornet", wires=N))
    def circuit(inputs, w):
        return _circuit(inputs, w)

    layer = qhybrid.TorchLayer(circuit, {"w": (2, N, 3)}).double()
    x = torch.rand(0, N, dtype=torch.float64, requires_grad=True)
    out = layer(x)
    assert out.shape == (0, 1 + 4 + 1) and layer(torch.rand(3, N, dtype=torch.float64)).shape == (3, 6)
    out.sum().backward()
    assert x.grad.shape == (0, N) and torch.equal(layer.w.grad, torch.zeros_like(layer.w))
    assert qhybrid.ExpQLayer(N)(torch.rand(0, N)).shape == (0, N)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_one_gate_of_the_batch_beside_a_scalar_weight(diff_method):
    """With backprop the empty results were left out of the graph (``backward``: "does not require grad"): the
    stand-in's run without gradients had gathered the parameters first; ExpQLayer left its input out of the graph
    (found by a fuzzing helper)."""

    def circuit(x, w):
        qml.RX(x, 0)
        qml.RY(w, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    x = torch.zeros(0, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    gx, gw = torch.autograd.grad(node(x, w).sum(), (x, w))
    assert gx.shape == (0,) and float(gw) == 0.0
    layer = qhybrid.ExpQLayer(2, 1, diff_method=diff_method).double()
    inputs = torch.zeros(0, 2, dtype=torch.float64, requires_grad=True)
    gx, gw = torch.autograd.grad(layer(inputs).sum(), (inputs, layer.weight))
    assert gx.shape == (0, 2) and torch.equal(gw, torch.zeros_like(layer.weight))


@pytest.mark.parametrize("constant", [False, True])
def test_sliced_arguments_on_the_one_node_path(constant):
    """Found by a helper: ``RY(x[:, 0])`` on an empty batch crashed the one-node path (``index_select`` on a state
    of 0 amplitudes); with a constant gate beside it, from the call that traced it. The empty batch is answered by
    the device's empty-batch results."""

    def circuit(x):
        qml.RY(x[:, 0], 0)
        if constant:
            qml.RY(0.3, 1)
        qml.CNOT([0, 1])
        qml.RX(x[:, 1], 1)
        return qml.expval(qml.Z(1))

    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(circuit)
    for _ in range(3):
        x = torch.zeros((0, 2), dtype=torch.float64, requires_grad=True)
        out = f(x)
        assert out.shape == (0,)
        out.sum().backward()
        assert x.grad.shape == (0, 2)

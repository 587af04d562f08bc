"""A qnode called inside another quantum function (qhybrid's or PennyLane's): its value feeds the caller's gates,
and nothing of its own run is queued into the caller's tape (a qhybrid qnode inside any quantum function raised
"must occur prior to measurements": its tape copies and measurements landed in the caller's queue). Values and
gradients against default.qubit to 1e-10."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid


def _inner(y):
    qml.RX(y, 0)
    qml.IsingZZ(y / 2, wires=[0, 1])
    return qml.expval(qml.Z(0) + 0.5 * qml.X(1))


def _quiet(node):
    """``node`` called with queuing stopped: PennyLane's own QNode queues the measurements its
    ``split_non_commuting`` makes into the caller's queue (PennyLane 0.45), so the reference calls it so."""

    def call(y):
        with qml.QueuingManager.stop_recording():
            return node(y)

    return call


def _outer(x, inner):
    v = inner(x[0])
    qml.RY(v * x[1], 0)
    qml.CNOT([0, 1])
    qml.RX(x[2], 1)
    return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))


@pytest.mark.parametrize("inner_kind", ["qhybrid", "qhybrid static", "pennylane"])
@pytest.mark.parametrize("outer_kind", ["qhybrid", "pennylane"])
@pytest.mark.parametrize("method", ["adjoint", "parameter-shift", "backprop"])
def test_a_qnode_inside_a_quantum_function(inner_kind, outer_kind, method):
    ref_inner = qml.QNode(_inner, qml.device("default.qubit", wires=2), interface="torch")
    if inner_kind == "pennylane":
        inner = _quiet(ref_inner)
    else:
        dev = qhybrid.device("tensornet", wires=2)
        inner = qhybrid.qnode(dev, diff_method="adjoint", static_structure=inner_kind == "qhybrid static")(_inner)
    if outer_kind == "qhybrid":
        outer = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method)(_outer)
    else:
        outer = qml.QNode(_outer, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=method)
    ref = qml.QNode(_outer, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    x = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        a, b = torch.stack(outer(x, inner)), torch.stack(ref(x, _quiet(ref_inner)))
        assert torch.allclose(a, b, atol=1e-10, rtol=0)
        (ga,) = torch.autograd.grad(a[0] - 2 * a[1], x)
        (gb,) = torch.autograd.grad(b[0] - 2 * b[1], x)
        assert torch.allclose(ga, gb, atol=1e-10, rtol=0)
    if outer_kind == "qhybrid":
        assert [op.name for op in outer.tape.operations] == ["RY", "CNOT", "RX"]


def test_a_qnode_inside_a_recording_queues_nothing():
    inner = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(_inner)
    with qml.queuing.AnnotatedQueue() as q:
        value = inner(torch.tensor(0.4, dtype=torch.float64))
    assert q.queue == []
    ref = qml.QNode(_inner, qml.device("default.qubit", wires=2), interface="torch")(torch.tensor(0.4, dtype=torch.float64))
    assert torch.allclose(value, ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("method", ["adjoint", "parameter-shift"])
def test_an_inner_qnode_handed_the_outer_argument_itself(static, method):
    """A static adjoint inner qnode handed the outer's (lazily recorded) argument as it is, or times a number, read it
    as a constant: the value was right and the gradient through the inner qnode was lost, silently (found by a
    fuzzing helper)."""

    def inner_fn(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0))

    def outer_fn(x, p, inner):
        qml.RX(inner(x) * p + inner(x * 2.0), 0)
        return qml.expval(qml.Z(0))

    inner = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint", static_structure=True)(inner_fn)
    outer = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method, static_structure=static)(outer_fn)
    ref_inner = _quiet(qml.QNode(inner_fn, qml.device("default.qubit", wires=2), interface="torch"))
    ref = qml.QNode(outer_fn, qml.device("default.qubit", wires=2), interface="torch")
    for _ in range(2):
        x = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
        p = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
        got, want = outer(x, p, inner), ref(x, p, ref_inner)
        assert torch.allclose(got, want, atol=1e-10, rtol=0)
        g, h = torch.autograd.grad(got, (x, p)), torch.autograd.grad(want, (x, p))
        for a, b in zip(g, h):
            assert torch.allclose(a, b, atol=1e-10, rtol=0)

"""What a qnode returns: a dict, nested lists or tuples of measurements, as PennyLane's QNode takes them (they
were refused), shaped like default.qubit's results, values and gradients to 1e-10; with a device's shot vector,
one such structure per shot entry in a tuple (a list return came back as a list of tuples)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _dict(x):
    qml.RX(x[0], 0)
    qml.RY(2 * x[1], 1)
    qml.CNOT([0, 1])
    return {"z": qml.expval(qml.Z(0)), "p": qml.probs(wires=[0, 1])}


def _nested(x):
    qml.RX(x[0], 0)
    qml.RY(x[1], 1)
    qml.IsingZZ(x[0] * x[1], wires=[0, 1])
    return [qml.expval(qml.Z(0)), [qml.probs(wires=[0]), qml.var(qml.X(1))]]


def _tuple_of_dict(x):
    qml.RY(x[0], 0)
    qml.RX(x[1], 1)
    return qml.expval(qml.Z(0) @ qml.Z(1)), {"x": qml.expval(qml.X(0)), "y": (qml.expval(qml.Y(1)),)}


def _one_in_dict(x):
    qml.RX(x[0], 0)
    qml.RX(x[1], 0)
    return {"only": qml.expval(qml.Z(0))}


def _one_in_list(x):
    qml.RX(x[0] + x[1], 0)
    return [qml.expval(qml.Z(0))]


FUNCTIONS = [_dict, _nested, _tuple_of_dict, _one_in_dict, _one_in_list]


def _structure(tree):
    if isinstance(tree, dict):
        return {k: _structure(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_structure(v) for v in tree)
    return tuple(tree.shape)


def _leaves(tree):
    return torch.utils._pytree.tree_leaves(tree)


@pytest.mark.parametrize("func", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_structured_returns_match_default_qubit(func, method, static, batched):
    gen = torch.Generator().manual_seed(5)
    shape = (3, 2) if batched else (2,)
    x = (torch.rand(shape, generator=gen, dtype=torch.float64) * 3).requires_grad_()
    xt = x.T if batched else x
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method, static_structure=static)(func)
    ref = qml.QNode(func, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    for _ in range(2):  # the static trace's first and later calls
        a, b = ours(xt), ref(xt)
        assert _structure(a) == _structure(b)
        for u, v in zip(_leaves(a), _leaves(b)):
            assert torch.allclose(u, v, atol=TOL, rtol=0)
        weights = [torch.rand(v.shape, generator=gen, dtype=torch.float64) for v in _leaves(b)]
        (ga,) = torch.autograd.grad(sum((w * u).sum() for w, u in zip(weights, _leaves(a))), x)
        (gb,) = torch.autograd.grad(sum((w * v).sum() for w, v in zip(weights, _leaves(b))), x)
        assert torch.allclose(ga, gb, atol=TOL, rtol=0)


@pytest.mark.parametrize("func", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("transformed", [False, True])
def test_a_shot_vector_gives_one_structure_a_shot_entry(func, transformed):
    x = torch.tensor([0.4, 1.1], dtype=torch.float64)
    shots = (100, 300)

    def node(f, dev):
        q = qhybrid.qnode(dev)(f)
        return qml.transforms.merge_rotations(q) if transformed else q

    ours = node(func, qhybrid.device("tensornet", wires=2, shots=shots, seed=7))(x)
    ref = qml.QNode(func, qml.device("default.qubit", wires=2, shots=shots, seed=7), interface="torch")(x)
    assert isinstance(ours, tuple) and len(ours) == 2
    assert _structure(ours) == _structure(ref)

    def flat(x):  # the same measurements returned flat: the same draws, so the same numbers
        tape = qml.tape.make_qscript(func)(x)
        for op in tape.operations:
            qml.apply(op)
        return tuple(qml.apply(m) for m in tape.measurements)

    plain = node(flat, qhybrid.device("tensornet", wires=2, shots=shots, seed=7))(x)
    for entry, plain_entry in zip(ours, plain):
        for u, v in zip(_leaves(entry), plain_entry):
            assert torch.equal(u, v)


@pytest.mark.parametrize(
    "func",
    [
        lambda x: {"z": qml.expval(qml.Z(0)), "n": 3},
        lambda x: [qml.expval(qml.Z(0)), [x]],
        lambda x: {},
        lambda x: x,
    ],
)
def test_returns_without_only_measurements_are_refused(func):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(func)
    with pytest.raises(TypeError, match="must return a measurement"):
        node(torch.tensor(0.3))

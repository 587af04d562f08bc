"""Scalar gate parameters derived from a few leaves (``2 * gamma[l]``, ``-beta[l] / 3``, ``w[i][j]``) are
differentiated at those leaves (gradients/_derived.py): values, gradients and Hessians against default.qubit
(float64, 1e-10), the circuit's node reading the leaves themselves, and chains it must not fold."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.gradients import _derived, _execute
from qhybrid.workflow import _lazy

from tests._autograd_graph import autograd_node_names

EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]
GAMMA = torch.tensor([0.4, -0.9], dtype=torch.float64)
W = torch.tensor([[1.1, 0.3, -0.7], [0.5, -0.2, 0.8]], dtype=torch.float64)


@pytest.fixture
def folds(monkeypatch):
    """Light cones of closed networks (the whole state vector is one node of its own, without ExecuteTapes),
    and a record of each fold."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    # recorded from the real tensors, as ``qhybrid.execute`` and transformed qnodes hand them: a plain qnode
    # records lazily (workflow/_lazy.py) and its parameters are no chains to fold
    monkeypatch.setattr(_lazy, "ENABLED", False)
    got = []

    def fold(sources):
        out = _derived.fold(sources)
        got.append(out)
        return out

    monkeypatch.setattr(_execute, "fold", fold)
    return got


def _circuit(angle):
    """QAOA-like: ``angle(gamma, w, layer, k)`` the k-th gate's angle of a layer."""
    def circuit(gamma, w):
        for q in range(6):
            qml.Hadamard(q)
        for layer in range(2):
            for k, (u, v) in enumerate(EDGES):
                qml.IsingZZ(angle(gamma, w, layer, k), wires=[u, v])
            for q in range(6):
                qml.RX(angle(gamma, w, layer, 10 + q), wires=q)
        return qml.expval(qml.dot([1.0] * len(EDGES), [qml.Z(u) @ qml.Z(v) for u, v in EDGES]))

    return circuit


CHAINS = {
    "2 * gamma[l]": lambda g, w, l, k: 2 * g[l] if k < 10 else g[l] * 0.5,
    "mixed": lambda g, w, l, k: [-g[l] / 3, 1 - g[-1 - l], (g[l] + 0.25) * 2, w[l][k % 3] * 1.5, w[l, (k + 1) % 3]][k % 5],
    "views": lambda g, w, l, k: w.reshape(-1)[(3 * l + k) % 6] * 2.0 if k % 2 else 2 * (0.1 * w)[l][k % 3],
}


def _run(circuit, dev_wires=6):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=dev_wires))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")
    g, w = GAMMA.clone().requires_grad_(), W.clone().requires_grad_()
    value = node(g, w)
    grads = torch.autograd.grad(value, (g, w), allow_unused=True)
    rg, rw = GAMMA.clone().requires_grad_(), W.clone().requires_grad_()
    want = ref(rg, rw)
    want_grads = torch.autograd.grad(want, (rg, rw), allow_unused=True)
    assert torch.allclose(value, want, atol=1e-10)
    for a, b in zip(grads, want_grads):
        if b is None:
            assert a is None or torch.all(a == 0)
        else:
            assert a is not None and torch.allclose(a, b, atol=1e-10), (a, b)
    return value


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_derived_sources_fold_and_match_default_qubit(folds, chain):
    value = _run(_circuit(CHAINS[chain]))
    assert folds and all(f is not None for f in folds)
    # the circuit's node reads the leaves: no select or product per gate between it and them
    names = autograd_node_names(value)
    assert "SelectBackward0" not in names and "MulBackward0" not in names, names


def test_fold_is_differentiable():
    """A second derivative through a fold (``create_graph``): the same Hessian as autograd's own walk."""
    def hessian(folded):
        g = GAMMA.clone().requires_grad_()
        sources = [[2 * g[0], -g[1] / 3, 1 - g[-1], (g[0] + 0.25) * 2][k % 4] for k in range(9)]
        if folded:  # d/ds sum(s^3), as the circuit's node hands it over: with the sources' history
            (grad,) = _derived.fold(sources).grads(3 * torch.stack(sources) ** 2)
        else:
            (grad,) = torch.autograd.grad((torch.stack(sources) ** 3).sum(), g, create_graph=True)
        return torch.stack([torch.autograd.grad(grad[i], g, retain_graph=True)[0] for i in range(2)])

    assert torch.allclose(hessian(True), hessian(False), atol=1e-12)


def test_light_cone_hessian_matches_default_qubit(folds):
    circuit = _circuit(CHAINS["2 * gamma[l]"])
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=6))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")

    def hessian(f):
        g = GAMMA.clone().requires_grad_()
        (grad,) = torch.autograd.grad(f(g, W), g, create_graph=True)
        return torch.stack([torch.autograd.grad(grad[i], g, retain_graph=True)[0] for i in range(2)])

    assert torch.allclose(hessian(node), hessian(ref), atol=1e-10)


@pytest.mark.parametrize(
    "angle",
    [
        lambda g, w, l, k: torch.sin(g[l]) * 2,  # a function of a leaf, not a constant scaling
        lambda g, w, l, k: g[l] * w[l][k % 3],  # a product of two trainable tensors
        lambda g, w, l, k: g[l] * torch.tensor([1.0, 2.0], dtype=torch.float64)[k % 2],  # fine: a constant
    ],
    ids=["sin", "product", "constant-tensor"],
)
def test_other_chains_match_default_qubit(folds, angle):
    """Chains the fold does not take (or takes with a constant read from a tensor) give the same gradients."""
    _run(_circuit(angle))


def test_retained_source_keeps_its_gradient(folds):
    """A source whose own gradient is asked for (``retain_grad``) is not folded: it gets its gradient."""
    kept = []

    def angle(g, w, l, k):
        a = 2 * g[l]
        if not kept:
            a.retain_grad()
            kept.append(a)
        return a

    _run(_circuit(angle))
    assert kept[0].grad is not None
    assert folds and all(f is None for f in folds)


def test_chain_reads_index_and_scale():
    g = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], dtype=torch.float64, requires_grad=True)
    assert _derived._chain(2 * g[1][2])[1:] == (5, 2.0)
    assert _derived._chain(-g[-1, 0] / 4)[1:] == (3, -0.25)
    assert _derived._chain(1 - 3 * g.reshape(-1)[4])[1:] == (4, -3.0)
    assert _derived._chain((g + torch.ones(3, 2, 3, dtype=torch.float64))[0][1][1]) is None  # a broadcast
    assert _derived._chain(g[0] @ g[1]) is None


def test_shared_intermediate_not_folded(folds):
    """Sources read from one non-leaf (``gamma * 1``): the caller may differentiate with respect to it, so
    the node keeps the sources as its inputs and ``autograd.grad`` with respect to that tensor works."""
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=6))(_circuit(CHAINS["2 * gamma[l]"]))
    leaf = GAMMA.clone().requires_grad_()
    mid = leaf * 1
    (grad,) = torch.autograd.grad(node(mid, W), mid)
    (want,) = torch.autograd.grad(node(leaf, W), leaf)
    assert torch.allclose(grad, want, atol=1e-12)
    assert folds[0] is None and folds[1] is not None

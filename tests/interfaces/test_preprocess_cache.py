"""The preprocessing cache's two ways to its gather maps: parameters handed through untouched (no probes)
and decomposed templates (probed), each against default.qubit on later calls with other values."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.interfaces import _preprocess


@pytest.fixture
def spied(monkeypatch):
    calls = []
    real = _preprocess._index_maps

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_preprocess, "_index_maps", spy)
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    return calls


def _both(circuit, wires):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=wires))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch")
    return ours, ref


def _check(ours, ref, *args):
    a = [x.clone().requires_grad_() for x in args]
    b = [x.clone().requires_grad_() for x in args]
    va, vb = torch.stack(list(ours(*a))), torch.stack(list(ref(*b)))
    (va * torch.arange(1.0, 1 + va.shape[0]).reshape(-1, *[1] * (va.ndim - 1))).sum().backward()
    (vb * torch.arange(1.0, 1 + vb.shape[0]).reshape(-1, *[1] * (vb.ndim - 1))).sum().backward()
    np.testing.assert_allclose(va.detach().numpy(), vb.detach().numpy(), atol=1e-10)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), atol=1e-10)


def test_parameters_handed_through_need_no_probes(spied):
    def circuit(x, w):
        qml.RX(x[0], 0)
        qml.RY(w, 1)  # a batched parameter: read whole, in its own shape
        qml.CRZ(x[1], [0, 1])
        qml.IsingZZ(x[2], [1, 2])
        return qml.expval(qml.Z(0) @ qml.Z(2)), qml.expval(qml.X(1))

    ours, ref = _both(circuit, 3)
    rng = np.random.default_rng(3)
    for _ in range(3):  # the first call fills the cache; the later ones gather from it
        x, w = torch.tensor(rng.uniform(-3, 3, 3)), torch.tensor(rng.uniform(-3, 3, 4))
        _check(ours, ref, x, w)
    assert not spied


def test_decomposed_templates_are_probed(spied):
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(3))
        return qml.expval(qml.Z(0) @ qml.Y(2)), qml.expval(qml.X(1))

    ours, ref = _both(circuit, 3)
    rng = np.random.default_rng(4)
    for _ in range(3):
        _check(ours, ref, torch.tensor(rng.uniform(-3, 3, (2, 3, 3))))
    assert len(spied) == 1

"""Many scalar (or batched) gate parameters differentiated as one packed leaf (gradients/_packed.py): values
and gradients against default.qubit, float64 at 1e-10, and that packing did (or did not) happen."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.gradients import _packed, adjoint_tn

EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]


@pytest.fixture
def packs(monkeypatch):
    """Light cones of closed networks (the adjoint JPC differentiates gather sources), and a record of
    whether each forward packed its sources."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    got = []

    def pack(variants, sources):
        out = _packed.pack(variants, sources)
        got.append(out is not None)
        return out

    monkeypatch.setattr(adjoint_tn, "pack", pack)
    return got


def _qaoa(scale):
    """A QAOA as users write it: one scalar tensor per gate (``scale(angle, k)``)."""
    def circuit(gamma, beta):
        for w in range(6):
            qml.Hadamard(w)
        for layer in range(2):
            for k, (u, v) in enumerate(EDGES):
                qml.IsingZZ(scale(gamma[..., layer], k), wires=[u, v])
            for w in range(6):
                qml.RX(2 * beta[..., layer], wires=w)
                qml.RY(scale(beta[..., layer], w) * 0.5, wires=w)
        # coefficients 1 (no observable data: the tape's parameters are then all the gates' tensors)
        return qml.expval(qml.dot([1.0] * len(EDGES), [qml.Z(u) @ qml.Z(v) for u, v in EDGES]))

    return circuit


def _compare(circuit, gamma, beta, batched=False):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=6))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")
    g, b = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
    value = node(g, b)
    grads = torch.autograd.grad(value.sum(), (g, b))
    rg, rb = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
    want = ref(rg, rb)
    want_grads = torch.autograd.grad(want.sum(), (rg, rb))
    assert value.shape == want.shape
    assert torch.allclose(value, want, atol=1e-10)
    for a, w in zip(grads, want_grads):
        assert a.shape == w.shape and torch.allclose(a, w, atol=1e-10)


def test_scalar_sources_packed_match_default_qubit(packs):
    """Every gate's angle its own scalar tensor (``2 * gamma[l] * (1 + k / 10)``): packed into one leaf."""
    circuit = _qaoa(lambda angle, k: 2 * angle * (1 + 0.1 * k))
    _compare(circuit, torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([1.1, 0.3], dtype=torch.float64))
    assert packs and all(packs)


def test_batched_sources_packed_match_default_qubit(packs):
    """Each gate's angle a ``[3]`` batch column: the sources are packed end to end, the values broadcast."""
    circuit = _qaoa(lambda angle, k: angle * (1 + 0.1 * k))
    gamma = torch.tensor([[0.4, -0.9], [0.1, 0.2], [-1.3, 0.7]], dtype=torch.float64)
    beta = torch.tensor([[1.1, 0.3], [0.5, -0.2], [0.9, 1.4]], dtype=torch.float64)
    _compare(circuit, gamma, beta, batched=True)
    assert packs and all(packs)


def test_few_or_mixed_sources_not_packed(packs, monkeypatch):
    """Fewer sources than PACK_MIN_SOURCES, or sources of two dtypes, are differentiated leaf by leaf."""
    monkeypatch.setattr(_packed, "PACK_MIN_SOURCES", 10**6)
    circuit = _qaoa(lambda angle, k: 2 * angle * (1 + 0.1 * k))
    _compare(circuit, torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([1.1, 0.3], dtype=torch.float64))
    assert packs and not any(packs)
    monkeypatch.setattr(_packed, "PACK_MIN_SOURCES", 8)
    packs.clear()
    mixed = _qaoa(lambda angle, k: (2 * angle * (1 + 0.1 * k)).float() if k == 0 else 2 * angle * (1 + 0.1 * k))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=6))(mixed)
    ref = qml.QNode(_qaoa(lambda angle, k: 2 * angle * (1 + 0.1 * k)), qml.device("default.qubit"), interface="torch")
    g = torch.tensor([0.4, -0.9], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.1, 0.3], dtype=torch.float64, requires_grad=True)
    value = node(g, b)
    (grad,) = torch.autograd.grad(value, (b,))
    rb = b.detach().clone().requires_grad_()
    want = ref(g.detach(), rb)
    (want_grad,) = torch.autograd.grad(want, (rb,))
    assert packs and not any(packs)
    assert abs(float(value) - float(want)) < 1e-6  # one gate at float32
    assert torch.allclose(grad, want_grad, atol=1e-6)

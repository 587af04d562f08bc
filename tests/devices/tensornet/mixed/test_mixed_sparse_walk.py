"""The Pauli walk's sparse start (``engines.mixed.sparse_walk``) against default.mixed: shallow circuits that stay
sparse to the end (every channel kind, a Kraus list, trainable noise strengths, batched data), float32, and
second derivatives; the walk is checked to have stayed sparse."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mixed import sparse_walk

TOL = 1e-10


@pytest.fixture
def starts(monkeypatch):
    """Every sparse start built, to read how far it went; the cut-off raised so small circuits stay sparse (a
    12-wire two-layer SEL does at the default one, its 4**12 too many to compare with default.mixed here)."""
    monkeypatch.setattr(sparse_walk, "SPARSE_WALK_MAX_FRACTION", 1.0)
    built = []
    original = sparse_walk.SparseStart.__init__

    def init(self, walk, ops, *args):
        original(self, walk, ops, *args)
        built.append((self.steps, len(ops)))

    monkeypatch.setattr(sparse_walk.SparseStart, "__init__", init)
    return built


def _noisy_sel(n, kraus):
    def circuit(x, w, p):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        for q in range(n):
            qml.DepolarizingChannel(0.01, wires=q)
        for layer in range(2):
            qml.StronglyEntanglingLayers(w[layer : layer + 1], wires=range(n))
            qml.AmplitudeDamping(p, wires=layer)  # non-unital: the identity gains weight on the way back
            qml.RX(w[layer, 0, 0], wires=n - 1)
            qml.PhaseDamping(p, wires=1)
            qml.QubitChannel(kraus, wires=2)
            qml.Hadamard(0)
            qml.DepolarizingChannel(p, wires=0)
        return [qml.expval(qml.Z(i)) for i in range(n)] + [qml.expval(qml.X(0) @ qml.Y(n - 1))]

    return circuit


def _kraus():
    g = 0.2  # a generalized amplitude damping, as a Kraus list
    return [torch.tensor([[1, 0], [0, (1 - g) ** 0.5]], dtype=torch.complex128),
            torch.tensor([[0, g**0.5], [0, 0]], dtype=torch.complex128)]


def _compare_with_default_mixed(seed, p, tol, rtol=0, **device_options):
    """Values and gradients (data, weights, noise strength) of the 5-wire noisy SEL, batch 16, against default.mixed."""
    n = 5
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(16, n, dtype=torch.float64, generator=g).requires_grad_(True)
    w = torch.rand(2, n, 3, dtype=torch.float64, generator=g).requires_grad_(True)
    p = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    circuit = _noisy_sel(n, _kraus())
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, **device_options), diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=n), interface="torch")
    a, b = torch.stack(ours(x, w, p)), torch.stack(ref(x, w, p))
    torch.testing.assert_close(a, b.to(a.dtype), atol=tol, rtol=rtol)
    for ga, gb in zip(torch.autograd.grad(a.sin().sum(), [x, w, p]), torch.autograd.grad(b.sin().sum(), [x, w, p])):
        torch.testing.assert_close(ga, gb.to(ga.dtype), atol=tol, rtol=rtol)


@pytest.mark.parametrize("dtype, tol, rtol", [(torch.complex128, TOL, 0), (torch.complex64, 2e-5, 1e-5)])
def test_shallow_noisy_batch_stays_sparse_and_matches_default_mixed(dtype, tol, rtol, starts):
    _compare_with_default_mixed(4, 0.07, tol, rtol, dtype=dtype)
    assert starts and all(steps == total for steps, total in starts), f"the walk went dense: {starts}"


def test_second_derivatives_through_the_sparse_walk(starts):
    n = 3
    x = torch.rand(6, n, dtype=torch.float64)
    w = torch.rand(2, n, 3, dtype=torch.float64)
    p = torch.tensor(0.1, dtype=torch.float64)
    circuit = _noisy_sel(n, _kraus())
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=n), interface="torch")

    def loss(node):
        return lambda w, p: torch.stack(node(x, w, p)).sum()

    h_ours = torch.autograd.functional.hessian(loss(ours), (w, p))
    h_ref = torch.autograd.functional.hessian(loss(ref), (w, p))
    assert starts
    for row_a, row_b in zip(h_ours, h_ref):
        for ha, hb in zip(row_a, row_b):
            torch.testing.assert_close(ha, hb, atol=TOL, rtol=0)


def test_end_contraction_recomputed_in_chunks_when_memory_is_short(starts, monkeypatch):
    """A max_memory below the end's kept products: the strings are contracted in chunks, each recomputed in the
    backward (torch.utils.checkpoint); values and gradients unchanged."""
    monkeypatch.setattr(sparse_walk, "SPARSE_EXPVAL_CHUNK", 64)
    chunks = []
    original = sparse_walk.checkpoint
    monkeypatch.setattr(sparse_walk, "checkpoint", lambda *a, **k: chunks.append(1) or original(*a, **k))
    _compare_with_default_mixed(5, 0.03, TOL, max_memory=3e5)
    assert len(chunks) > 1 and starts and all(steps == total for steps, total in starts)

"""Batched expectation values by the observables' walk back (``engines.mixed.heisenberg``) against default.mixed:
values and gradients in the data, the gates and the noise strengths; the walk is checked to have run."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mixed import heisenberg, program

from _noisy import apply_spec, first_params, random_spec

TOL = 1e-10
N = 3


@pytest.fixture
def walks(monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return heisenberg.heisenberg_expvals(*args, **kwargs)

    monkeypatch.setattr(program, "heisenberg_expvals", counted)
    return calls


@pytest.mark.parametrize("seed", [11, 12])
def test_walk_back_matches_default_mixed(seed, walks):
    ops = random_spec(seed, N)
    params = first_params(ops)
    leaves = [p for p in params if p is not None]
    x = torch.rand(9, N, dtype=torch.float64, requires_grad=True)
    h = qml.Hamiltonian([0.4, -1.1], [qml.Z(0) @ qml.Y(2), qml.X(1)])

    def circuit(params, x):
        apply_spec(ops, params, x)
        for w in range(N):
            qml.DepolarizingChannel(0.05, w)  # noise right after the embedding stays in the product stage
        apply_spec(ops, params)
        return qml.expval(h), qml.expval(qml.Z(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=N), interface="torch")
    a, b = torch.stack(ours(params, x)), torch.stack(ref(params, x))
    assert walks, "the batch did not take the Heisenberg walk"
    torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    for g, r in zip(torch.autograd.grad(a.cos().sum(), [x, *leaves]), torch.autograd.grad(b.cos().sum(), [x, *leaves])):
        finite = ~torch.isnan(r)  # default.mixed differentiates sqrt(0) (nan) where the derivative is 0
        torch.testing.assert_close(g[finite], r[finite], atol=TOL, rtol=0)


def test_small_batches_and_other_measurements_walk_forward(walks):
    dev = qhybrid.device("tensornet", wires=2)
    x = torch.rand(3, 2, dtype=torch.float64)
    tape = qml.tape.QuantumScript(
        [qml.RY(x[:, 0], 0), qml.BitFlip(0.1, 0), qml.CNOT([0, 1])], [qml.expval(qml.Z(1)), qml.probs(wires=[0])]
    )
    dev.execute(tape)
    assert not walks


def _dense_walk_circuit(n):
    def circuit(x, w, p):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        for q in range(n):
            qml.DepolarizingChannel(p, wires=q)
        return [qml.expval(qml.Z(q)) for q in range(n)]

    return circuit


def test_observables_walk_in_checkpointed_chunks_when_memory_is_short(monkeypatch):
    """A max_memory below the whole walk's (but above one observable's) walks the observables in chunks under
    torch.utils.checkpoint; values and gradients (data, gates, noise strength) as default.mixed's."""
    from qhybrid.devices.tensornet.engines.mixed import sparse_walk

    monkeypatch.setattr(sparse_walk, "SPARSE_WALK_MAX_FRACTION", 0.0)  # dense from the first step
    chunks = []
    original = heisenberg.checkpoint
    monkeypatch.setattr(heisenberg, "checkpoint", lambda *a, **k: chunks.append(k["stop"] - k["first"]) or original(*a, **k))
    n = 4
    x = torch.rand(8, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)
    p = torch.tensor(0.05, dtype=torch.float64, requires_grad=True)
    circuit = _dense_walk_circuit(n)
    # the Clifford tables (24 B x 4**4 x 2 rings) and about 2 observables' walk with their kept steps
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=24 * 256 * 2 + 2 * 16 * 256 * 8),
                         diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=n), interface="torch")
    a, b = torch.stack(ours(x, w, p)), torch.stack(ref(x, w, p))
    assert len(chunks) > 1 and max(chunks) < n, f"the observables did not walk in chunks: {chunks}"
    torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    for g, r in zip(torch.autograd.grad(a.sin().sum(), [x, w, p]), torch.autograd.grad(b.sin().sum(), [x, w, p])):
        torch.testing.assert_close(g, r, atol=TOL, rtol=0)


def test_a_walk_that_does_not_fit_is_refused_before_it_runs(monkeypatch):
    from qhybrid.devices.tensornet.engines.mixed import pauli, sparse_walk
    from qhybrid.errors import ContractionTooLargeError

    monkeypatch.setattr(sparse_walk, "SPARSE_WALK_MAX_FRACTION", 0.0)
    monkeypatch.setattr(pauli.PauliWalk, "apply", lambda *a: pytest.fail("the dense walk ran"))
    n = 4
    x = torch.rand(8, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)
    circuit = _dense_walk_circuit(n)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=24 * 256 * 2 + 1000), diff_method="backprop")(circuit)
    with pytest.raises(ContractionTooLargeError, match=r"Pauli-basis Heisenberg walk .*4\*\*4 x 1 observable"):
        ours(x, w, torch.tensor(0.05, dtype=torch.float64))

"""Wide Pauli sentences: measured word by word when each word's light cone is much cheaper than their
united one (a 30-node QAOA Hamiltonian used to be refused, and a 40-node one failed on a 52-index
contraction step); paths that would not fit in memory get a further search before any refusal."""

from __future__ import annotations

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.network import pathfind as _pathfind
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan, plan_networks
from qhybrid.errors import ContractionTooLargeError

TOL = 1e-10


def _qaoa(n: int, seed: int = 1):
    edges = list(nx.random_regular_graph(3, n, seed=seed).edges())
    coeffs = [0.5 + 0.1 * k for k in range(len(edges))]

    def circuit(gamma, beta):
        for w in range(n):
            qml.Hadamard(w)
        for u, v in edges:
            qml.IsingZZ(2 * gamma, wires=[u, v])
        for w in range(n):
            qml.RX(2 * beta, wires=w)
        return qml.expval(qml.Hamiltonian(coeffs, [qml.Z(u) @ qml.Z(v) for u, v in edges]))

    return edges, coeffs, circuit


def _cone_reference(edges, coeffs, gamma, beta):
    """<Z_u Z_v> of p=1 QAOA needs only the IsingZZ gates touching u or v (the others commute with the
    observable and cancel) and RX on u, v: a circuit of at most six qubits per term, on default.qubit."""
    dev = qml.device("default.qubit")
    total = 0.0
    for (u, v), c in zip(edges, coeffs):
        near = [e for e in edges if u in e or v in e]
        wires = sorted({w for e in near for w in e})

        @qml.qnode(dev, interface="torch")
        def term(g, b):
            for w in wires:
                qml.Hadamard(w)
            for a, z in near:
                qml.IsingZZ(2 * g, wires=[a, z])
            qml.RX(2 * b, wires=u)
            qml.RX(2 * b, wires=v)
            return qml.expval(qml.Z(u) @ qml.Z(v))

        total = total + c * term(gamma, beta)
    return total


@pytest.mark.parametrize("n", [30, 40])
def test_wide_qaoa_hamiltonian_matches_light_cone_reference(n):
    edges, coeffs, circuit = _qaoa(n)
    g = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)(g, b)
    dg, db = torch.autograd.grad(got, (g, b))
    g2, b2 = g.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ref = _cone_reference(edges, coeffs, g2, b2)
    rg, rb = torch.autograd.grad(ref, (g2, b2))
    torch.testing.assert_close(got, ref, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.stack([dg, db]), torch.stack([rg, rb]), atol=TOL, rtol=0)


class _Net:
    def __init__(self, inputs, output, sizes):
        self.inputs, self.output, self.sizes, self.positions = inputs, output, sizes, None


def _chain(n=12, d=4):
    """A chain of matrices: contracted along the chain, no intermediate is above d * d."""
    return _Net([(i, i + 1) for i in range(n)], (0, n), {i: d for i in range(n + 1)})


def test_a_path_too_large_for_memory_is_searched_further(monkeypatch):
    """The quick path (made bad on purpose: every other tensor first, outer products) would be refused
    by the memory guard; the rescue search finds a path that fits, and the result is exact."""
    net = _chain()
    bad = [(0, 2)] + [(0, 1)] * (len(net.inputs) - 2)  # an outer product first, then along the rest
    monkeypatch.setattr(_pathfind, "_greedy", lambda problem: bad)
    monkeypatch.setattr(_pathfind, "SWEEP_MIN_TENSORS", 10**9)
    monkeypatch.setattr(_pathfind, "RESCUE_TIME_S", 0.3)
    _pathfind.clear_memo()
    stats = _pathfind.reset_stats()
    greedy = plan_networks([net], "greedy", plan_time=0)[0]
    assert greedy.largest_intermediate > 64  # the memory guard would refuse it
    plan = plan_networks([net], _pathfind.PathSettings("auto", max_elements=64), plan_time=0.01)[0]
    assert stats.rescues == 1 and plan.largest_intermediate <= 64
    ops = [torch.rand(4, 4, dtype=torch.float64) for _ in net.inputs]
    torch.testing.assert_close(plan.contract(ops), torch.linalg.multi_dot(ops), atol=TOL, rtol=0)


def test_a_network_too_large_anyway_is_refused_by_the_memory_guard():
    wide = _Net([tuple(range(60))], tuple(range(60)), {i: 2 for i in range(60)})
    plan = ContractionPlan(wide.inputs, wide.output, wide.sizes)
    with pytest.raises(ContractionTooLargeError, match="max_memory"):
        plan.check_memory(16, 2**30, "a 60-index tensor")

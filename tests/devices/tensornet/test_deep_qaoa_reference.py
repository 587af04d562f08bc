"""Deep QAOA (issue 26's Q100 p=3 and 8x8 grid p=3) against an independent reference: a brute-force
light-cone state vector on PennyLane's default.qubit.

For ``<Z_u Z_v>`` after p layers only the nodes within graph distance p of the edge matter: every gate on
wires outside the term's reverse light cone at its time cancels, so the circuit restricted to that
neighbourhood (every gate among its nodes kept) gives the same value and gradient. Edges whose neighbourhood
has at most 20 nodes fit default.qubit; the device runs the full 100- and 64-wire circuits, by the engine
its cost model chooses and forced onto closed networks (the class trees of the deep cones).
"""

import functools

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import whole

P = 3
GAMMA = [0.15, 0.32, 0.5]
BETA = [-0.4, -0.25, -0.1]


def _circuit(nodes, edges, measured):
    def circuit(gamma, beta):
        for i in nodes:
            qml.Hadamard(i)
        for layer in range(len(gamma)):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in nodes:
                qml.RX(2 * beta[layer], wires=i)
        return qml.expval(qml.dot([1.0] * len(measured), [qml.Z(u) @ qml.Z(v) for u, v in measured]))

    return circuit


def _reference(graph, edge):
    """Value and gradient of ``<Z_u Z_v>`` from the state vector of the edge's distance-P neighbourhood."""
    near = sorted(nx.multi_source_dijkstra_path_length(graph, set(edge), cutoff=P))
    inner = [(u, v) for u, v in graph.edges() if u in near and v in near]
    node = qml.QNode(_circuit(near, inner, [edge]), qml.device("default.qubit", wires=near), diff_method="adjoint")
    gamma, beta = torch.tensor(GAMMA, requires_grad=True), torch.tensor(BETA, requires_grad=True)
    value = node(gamma, beta)
    return float(value.detach()), *torch.autograd.grad(value, (gamma, beta))


def _q100():
    g = nx.random_regular_graph(3, 100, seed=1)
    return nx.relabel_nodes(g, {v: int(v) for v in g.nodes()})


def _grid8():
    g = nx.grid_2d_graph(8, 8)
    return nx.relabel_nodes(g, {v: i for i, v in enumerate(g.nodes())})


def _small_cone_edges(graph, count=3, max_nodes=20):
    """The edges of the smallest distance-P neighbourhoods (ties in edge order), at most ``max_nodes`` each."""
    sizes = [(len(nx.multi_source_dijkstra_path_length(graph, {u, v}, cutoff=P)), k) for k, (u, v) in enumerate(graph.edges())]
    edges = list(graph.edges())
    chosen = [edges[k] for size, k in sorted(sizes) if size <= max_nodes][:count]
    assert len(chosen) == count
    return chosen


@functools.cache
def _expected(graph):
    """The measured edges of ``graph()`` and their summed reference value and gradients (shared by both
    engines' runs: the 20-wire references are most of the test's time)."""
    g = graph()
    measured = _small_cone_edges(g, count=2 if g.number_of_nodes() > 64 else 3)
    refs = [_reference(g, e) for e in measured]
    return measured, (sum(r[0] for r in refs), sum(r[1] for r in refs), sum(r[2] for r in refs))


@pytest.mark.xdist_group("deep_qaoa_reference")  # one worker: the references are computed once
@pytest.mark.parametrize("engine", ["chosen", "closed"])
@pytest.mark.parametrize("graph", [_q100, _grid8], ids=["Q100p3", "L8p3"])
def test_deep_qaoa_matches_light_cone_state_vectors(graph, engine, monkeypatch):
    if engine == "closed":  # every cone class a closed network, no whole-circuit network
        monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
        monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    g = graph()
    measured, want = _expected(graph)
    gamma, beta = torch.tensor(GAMMA, requires_grad=True), torch.tensor(BETA, requires_grad=True)
    dev = qhybrid.device("tensornet", wires=g.number_of_nodes())
    value = qhybrid.qnode(dev)(_circuit(sorted(g.nodes()), list(g.edges()), measured))(gamma, beta)
    got = (float(value.detach()), *torch.autograd.grad(value, (gamma, beta)))
    assert abs(got[0] - want[0]) < 1e-10
    assert torch.allclose(got[1], want[1], atol=1e-10) and torch.allclose(got[2], want[2], atol=1e-10)
    assert want[1].abs().max() > 1e-3  # a gradient that says something
    if engine == "closed":
        assert any(c.engine == "closed network" for c in dev.plan_cache_info().engines)

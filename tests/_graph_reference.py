"""Independent references for GraphQLayer: the circuits written with PennyLane's own QAOA layers (cost
Hamiltonian ``sum_e w_e Z_u Z_v`` through ``qml.qaoa.cost_layer``) or gate by gate, one sample at a time, on
``default.qubit`` with torch backprop."""

from __future__ import annotations

import networkx as nx
import pennylane as qml
import torch

REF_DEVICE = qml.device("default.qubit")


def random_graph(n: int, p: float, seed: int) -> list[tuple[int, int]]:
    """A connected-ish random graph with at least one edge, as an edge list in networkx order."""
    g = nx.gnp_random_graph(n, p, seed=seed)
    edges = list(g.edges())
    return edges or [(0, 1)]


def qaoa_reference(edges, n, gamma, beta, w, output):
    """``output`` of one sample (``w``: ``(E,)``)."""

    @qml.qnode(REF_DEVICE, interface="torch", diff_method="backprop")
    def circuit():
        cost = qml.dot([w[e] for e in range(len(edges))], [qml.Z(u) @ qml.Z(v) for u, v in edges])
        mixer = qml.dot([1.0] * n, [qml.X(i) for i in range(n)])
        for i in range(n):
            qml.Hadamard(i)
        for l in range(len(gamma)):
            qml.qaoa.cost_layer(gamma[l], cost)
            qml.qaoa.mixer_layer(beta[l], mixer)
        return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges]

    zz = torch.stack(list(circuit()))
    return (w * zz).sum() if output == "cost" else zz


def qgnn_reference(edges, n, coupling, rotation, w, x, output):
    """``output`` of one sample (``w``: ``(E,)``, ``x``: ``(N, F)``)."""
    gates = (qml.RY, qml.RZ)

    @qml.qnode(REF_DEVICE, interface="torch", diff_method="backprop")
    def circuit():
        for f in range(x.shape[1]):
            for v in range(n):
                gates[f % 2](x[v, f], wires=v)
        for l in range(coupling.shape[0]):
            for e, (u, v) in enumerate(edges):
                qml.IsingZZ(coupling[l, e, 0] * w[e], wires=[u, v])
            for e, (u, v) in enumerate(edges):
                qml.IsingXX(coupling[l, e, 1] * w[e], wires=[u, v])
            for v in range(n):
                qml.RY(rotation[l, v, 0], wires=v)
                qml.RZ(rotation[l, v, 1], wires=v)
        if output == "edges":
            return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges]
        return [qml.expval(qml.Z(v)) for v in range(n)]

    return torch.stack(list(circuit()))


def reference(layer, w, x=None):
    """The layer's output for a batch ``w`` ``(B, E)`` (and ``x`` ``(B, N, F)``), sample by sample."""
    edges, n = layer.graph.edges, layer.graph.n_nodes
    rows = []
    for b in range(w.shape[0]):
        if layer.kind == "qaoa":
            rows.append(qaoa_reference(edges, n, layer.gamma, layer.beta, w[b], layer.output))
        else:
            rows.append(qgnn_reference(edges, n, layer.coupling, layer.rotation, w[b], x[b], layer.output))
    return torch.stack(rows)

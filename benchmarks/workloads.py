"""The benchmark workloads of WORKLOADS.md, each as ``step()`` closures for qhybrid and for every peer.

A step is one forward + backward: gradients for all weights, and for the inputs x where a system
supports it. ``make(workload, system, dtype)`` returns the closure (warm-up is the runner's job) or
None where that system cannot run that workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pennylane as qml
import torch

import qhybrid


@dataclass(frozen=True)
class Workload:
    id: str
    kind: str  # "sel" | "ladder" | "qaoa" | "hea"
    n_qubits: int
    batch: int | None = None
    layers: int = 4
    hamiltonian: bool = False
    diff: str = "adjoint"  # qhybrid's method; "parameter-shift" for W4
    graph_seed: int = 7  # qaoa: networkx.random_regular_graph(3, n_qubits, seed=graph_seed)


WORKLOADS = {
    "W1": Workload("W1", "sel", 8, 128, 4),
    "W2": Workload("W2", "sel", 16, 32, 4),
    "W3": Workload("W3", "ladder", 64),
    "W3b": Workload("W3b", "ladder", 64, hamiltonian=True),
    "W4": Workload("W4", "sel", 8, 1, 4, diff="parameter-shift"),
    "W5": Workload("W5", "sel", 12, 1024, 6),
    "G16": Workload("G16", "qaoa", 16, None, 2),  # MaxCut QAOA p=2 on a 16-node 3-regular graph
    "Q100p1": Workload("Q100p1", "qaoa", 100, None, 1, graph_seed=1),
    "Q100p2": Workload("Q100p2", "qaoa", 100, None, 2, graph_seed=1),
    "Q100p3": Workload("Q100p3", "qaoa", 100, None, 3, graph_seed=1),
    "HEA50": Workload("HEA50", "hea", 50, None, 3),  # brickwork RY/CNOT, 50 local expvals
}

# system name -> (device factory, diff_method, torch interface differentiates x too)
PEERS = {
    "default.qubit backprop": ("default.qubit", "backprop"),
    "default.qubit adjoint": ("default.qubit", "adjoint"),
    "default.qubit parameter-shift": ("default.qubit", "parameter-shift"),
    "lightning.qubit adjoint": ("lightning.qubit", "adjoint"),
    "lightning.qubit parameter-shift": ("lightning.qubit", "parameter-shift"),
    "default.tensor mps": ("default.tensor", "best"),
}

PEERS_FOR = {
    "W1": ["default.qubit backprop", "lightning.qubit adjoint"],
    "W2": ["default.qubit backprop", "lightning.qubit adjoint"],
    "W3": ["default.tensor mps"],
    "W3b": ["default.tensor mps"],
    "W4": ["lightning.qubit parameter-shift", "default.qubit parameter-shift"],
    "W5": ["default.qubit backprop", "lightning.qubit adjoint"],
    "G16": ["default.qubit backprop", "lightning.qubit adjoint"],
    "Q100p1": [],
    "Q100p2": [],
    "Q100p3": [],
    "HEA50": ["default.tensor mps"],
}
"""The peers each workload is compared with (the first is the one its target names)."""


def _real(dtype):
    return torch.float64 if dtype == torch.complex128 else torch.float32


def sel_function(n: int, measure_all: bool = True) -> Callable:
    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    return circuit


def ladder_layers(theta, n: int) -> None:
    """W3's gates: two layers of RY on every wire, then CNOT(i, i + 1) down the wires."""
    for layer in range(2):
        for i in range(n):
            qml.RY(theta[layer, i], wires=i)
        for i in range(n - 1):
            qml.CNOT(wires=[i, i + 1])


def ladder_function(n: int, hamiltonian: bool) -> Callable:
    def circuit(theta):
        ladder_layers(theta, n)
        if hamiltonian:
            return qml.expval(qml.sum(*[qml.Z(i) for i in range(n)]))
        return qml.expval(qml.Z(n // 2))

    return circuit


QAOA_GRAPH_SEED = 7


def qaoa_graph(n: int, seed: int = QAOA_GRAPH_SEED):
    import networkx as nx

    return nx.random_regular_graph(3, n, seed=seed)


def qaoa_edges(wl: Workload) -> list[tuple[int, int]]:
    """The workload's graph edges as plain int pairs, in networkx order (every system uses this order)."""
    return [(int(u), int(v)) for u, v in qaoa_graph(wl.n_qubits, wl.graph_seed).edges()]


def hea_function(n: int, layers: int, *, ring: bool = False, outputs: Callable | None = None) -> Callable:
    """HEA50: ``layers`` x [RY on every qubit, CNOT(i, i+1) for even i, then for odd i (``ring``: and
    CNOT(n-1, 0))]; <Z_i> for all i, or what ``outputs()`` returns."""

    def circuit(theta):
        for layer in range(layers):
            for i in range(n):
                qml.RY(theta[layer, i], wires=i)
            for start in (0, 1):
                for i in range(start, n - 1, 2):
                    qml.CNOT(wires=[i, i + 1])
            if ring:
                qml.CNOT(wires=[n - 1, 0])
        return outputs() if outputs is not None else [qml.expval(qml.Z(i)) for i in range(n)]

    return circuit


def qaoa_function(edges, n: int, *, separate: bool = False) -> Callable:
    """The peers' QAOA as a PennyLane user writes it: one expval of the cost Hamiltonian (``separate``: one
    ``expval(Z_u Z_v)`` per edge instead)."""
    cost = qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(len(gamma)):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in range(n):
                qml.RX(2 * beta[layer], wires=i)
        if separate:
            return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges]
        return qml.expval(cost)

    return circuit


def _qaoa_step(wl: Workload, system: str, dev, real):
    """G16: gradient of the MaxCut cost for gamma, beta (p = wl.layers)."""
    g = qaoa_graph(wl.n_qubits, wl.graph_seed)
    gen = torch.Generator().manual_seed(7)
    gamma = (torch.rand(wl.layers, generator=gen, dtype=torch.float64).to(real)).requires_grad_(True)
    beta = (torch.rand(wl.layers, generator=gen, dtype=torch.float64).to(real)).requires_grad_(True)
    if system == "qhybrid":
        layer = qhybrid.GraphQLayer(g, wl.layers, output="cost", device=dev, diff_method=wl.diff).to(real)
        with torch.no_grad():
            layer.gamma.copy_(gamma)
            layer.beta.copy_(beta)

        def step():
            cost = layer()
            cost.backward()
            layer.zero_grad()
            return cost.detach()

        step.device = dev
        return step
    circuit = qml.QNode(qaoa_function(list(g.edges()), wl.n_qubits), dev, interface="torch", diff_method=PEERS[system][1])

    def step():
        cost = circuit(gamma, beta)
        cost.backward()
        gamma.grad = beta.grad = None
        return cost.detach()

    step.device = dev
    return step


def _device(system: str, n: int, dtype):
    if system == "qhybrid":
        return qhybrid.device("tensornet", wires=n, dtype=dtype)
    name, _ = PEERS[system]
    if name == "default.tensor":
        return qml.device("default.tensor", wires=n, method="mps")
    if name == "lightning.qubit":
        return qml.device(name, wires=n, c_dtype=dtype.__repr__().split(".")[-1] if False else _np_c(dtype))
    return qml.device(name, wires=n)


def _np_c(dtype):
    import numpy as np

    return np.complex128 if dtype == torch.complex128 else np.complex64


def make(workload: str, system: str, dtype=torch.complex128, *, batch: int | None = None, n_qubits: int | None = None):
    """A ``step()`` closure (forward + backward) or None where ``system`` cannot run ``workload``."""
    wl = WORKLOADS[workload]
    n = n_qubits or wl.n_qubits
    B = batch if batch is not None else wl.batch
    real = _real(dtype)
    gen = torch.Generator().manual_seed(7)
    dev = _device(system, n, dtype)
    if system == "qhybrid":
        wrap = lambda f: qhybrid.qnode(dev, diff_method=wl.diff)(f)  # noqa: E731
    else:
        wrap = lambda f: qml.QNode(f, dev, interface="torch", diff_method=PEERS[system][1])  # noqa: E731
    if wl.kind == "qaoa":
        return _qaoa_step(wl, system, dev, real)
    if wl.kind == "hea":
        circuit = wrap(hea_function(n, wl.layers))
        theta = (torch.rand(wl.layers, n, generator=gen, dtype=torch.float64).to(real) * 3).requires_grad_(True)

        def step():
            loss = torch.stack(list(circuit(theta))).sum()
            loss.backward()
            theta.grad = None
            return loss.detach()

        step.device = dev
        return step
    if wl.kind == "sel":
        circuit = wrap(sel_function(n))
        x = torch.rand(B, n, generator=gen, dtype=torch.float64).to(real) * 3
        w = torch.rand(wl.layers, n, 3, generator=gen, dtype=torch.float64).to(real) * 3
        # x is trainable where the system can differentiate broadcast inputs (qhybrid, backprop, adjoint)
        x_grad = not system.endswith("parameter-shift") and wl.diff != "parameter-shift"
        x.requires_grad_(x_grad)
        w.requires_grad_(True)

        def step():
            out = circuit(x, w)
            loss = torch.stack(list(out)).sum()
            loss.backward()
            w.grad = None
            x.grad = None
            return loss.detach()

        step.device = dev
        return step
    circuit = wrap(ladder_function(n, wl.hamiltonian))
    theta = (torch.rand(2, n, generator=gen, dtype=torch.float64).to(real) * 3).requires_grad_(True)

    def step():
        out = circuit(theta)
        out.backward()
        theta.grad = None
        return out.detach()

    step.device = dev
    return step


# --- deep QAOA rows (WORKLOADS.md, 2026-11-25): a graph and a depth each, run by benchmarks/deep.py ---
def lattice_edges(side: int) -> list[tuple[int, int]]:
    """The ``side`` x ``side`` square lattice (``networkx.grid_2d_graph``), nodes numbered row by row."""
    import networkx as nx

    g = nx.grid_2d_graph(side, side)
    label = {v: i for i, v in enumerate(g.nodes())}
    return [(label[u], label[v]) for u, v in g.edges()]


def deep_qaoa(workload: str) -> tuple[int, list[tuple[int, int]], int]:
    """(nodes, edges, p) of Q100p3, Q100p4, Q200p3, L8p3, L8p4 (Q: ``random_regular_graph(3, n, seed=1)``)."""
    n, p = {"Q100p3": (100, 3), "Q100p4": (100, 4), "Q200p3": (200, 3), "L8p3": (64, 3), "L8p4": (64, 4)}[workload]
    if workload.startswith("L"):
        return n, lattice_edges(8), p
    return n, [(int(u), int(v)) for u, v in qaoa_graph(n, seed=1).edges()], p


def qaoa_problem(name: str) -> tuple[int, list[tuple[int, int]], int]:
    """(nodes, edges, p) of a QAOA workload: a ``WORKLOADS`` row (G16, Q100p1, Q100p2), a deep row
    (``deep_qaoa``), or ``Q<n>p<p>`` on ``random_regular_graph(3, n, seed=1)`` (Q1000p2)."""
    if name in WORKLOADS:
        wl = WORKLOADS[name]
        return wl.n_qubits, qaoa_edges(wl), wl.layers
    if name in ("Q100p3", "Q100p4", "Q200p3", "L8p3", "L8p4"):
        return deep_qaoa(name)
    n, p = (int(v) for v in name[1:].split("p"))
    return n, [(int(u), int(v)) for u, v in qaoa_graph(n, seed=1).edges()], p


# --- 24-wire hardware-efficient circuits (HEA24x8, SEL24x4 of WORKLOADS.md; issue 26) -----------------------

WIDE_STATE_OUTPUTS = ("local", "zz-chain", "global")
"""(a) ``<Z_i>`` for every wire (loss: their sum), (b) one expval of ``sum_i Z_i Z_{i+1}``, (c) one ``<Z...Z>``."""


def _wide_outputs(n: int, outputs: str):
    if outputs == "local":
        return [qml.expval(qml.Z(i)) for i in range(n)]
    if outputs == "zz-chain":
        return qml.expval(qml.sum(*[qml.Z(i) @ qml.Z(i + 1) for i in range(n - 1)]))
    if outputs == "global":
        return qml.expval(qml.prod(*[qml.Z(i) for i in range(n)]))
    raise ValueError(f"outputs must be one of {WIDE_STATE_OUTPUTS}, got {outputs!r}")


def hea_ring_function(n: int, layers: int, outputs: str) -> Callable:
    """HEA24x8: ``layers`` x [RY(theta) on every qubit, CNOT brickwork: even pairs, then odd pairs and (n-1, 0)]."""
    return hea_function(n, layers, ring=True, outputs=lambda: _wide_outputs(n, outputs))


def sel_wide_function(n: int, outputs: str) -> Callable:
    """SEL24x4: ``AngleEmbedding`` of x, then ``StronglyEntanglingLayers`` weights (L, n, 3)."""

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return _wide_outputs(n, outputs)

    return circuit


def make_wide_state(kind: str, outputs: str, system: str, *, n: int = 24, layers: int | None = None, seed: int = 0):
    """A ``step()`` (value and gradient of the outputs' sum) of HEA24x8 (``kind="hea"``, 8 layers) or SEL24x4
    (``kind="sel"``, 4 layers) on ``system``: ``"qhybrid"`` (adjoint) or a PEERS name."""
    gen = torch.Generator().manual_seed(seed)
    dev = _device(system, n, torch.complex128)
    diff = "adjoint" if system == "qhybrid" else PEERS[system][1]
    wrap = (lambda f: qhybrid.qnode(dev, diff_method=diff)(f)) if system == "qhybrid" else (
        lambda f: qml.QNode(f, dev, interface="torch", diff_method=diff))
    if kind == "hea":
        circuit = wrap(hea_ring_function(n, layers or 8, outputs))
        args = [(torch.rand(layers or 8, n, generator=gen, dtype=torch.float64) * 3).requires_grad_(True)]
    elif kind == "sel":
        circuit = wrap(sel_wide_function(n, outputs))
        args = [torch.rand(n, generator=gen, dtype=torch.float64) * 3,
                (torch.rand(layers or 4, n, 3, generator=gen, dtype=torch.float64) * 3).requires_grad_(True)]
    else:
        raise ValueError(f"kind must be 'hea' or 'sel', got {kind!r}")

    def step():
        out = circuit(*args)
        loss = torch.stack(list(out)).sum() if isinstance(out, (list, tuple)) else out
        loss.backward()
        grads = [a.grad.clone() for a in args if a.requires_grad]
        for a in args:
            a.grad = None
        return loss.detach(), grads

    step.device = dev
    return step

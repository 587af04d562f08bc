"""Cone-class members that read the same inputs run once, found from the gather plan (``shared.member_groups``)
without looking at values; rows equal only by value are never merged that way, and a capture runs every row.
Values and gradients against the light-cone reference (``_lightcone_reference``) to 1e-10."""

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone import shared, stacked_node
from qhybrid.testing import host_touches
from _lightcone_reference import expval, qaoa_blocks

N = 30
EDGES = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, N, seed=3).edges()]
H = qml.dot([1.0] * len(EDGES), [qml.Z(u) @ qml.Z(v) for u, v in EDGES])  # (weights would be data: not static)
WEIGHTED = qml.Hamiltonian([0.5 + 0.01 * k for k in range(len(EDGES))], [qml.Z(u) @ qml.Z(v) for u, v in EDGES])


def test_member_groups_come_from_the_sources_alone():
    sources = torch.tensor([4, 4, 5, 6])  # parameters 0 and 1 read the same input element
    first, inverse = shared.member_groups(sources, torch.tensor([[0, 2], [1, 2], [2, 3], [0, 2]]), "cpu")
    assert first.tolist() == [0, 2] and inverse.tolist() == [0, 0, 1, 0]
    assert shared.member_groups(sources, torch.tensor([[0, 2], [2, 3]]), "cpu") is None  # none shared


def _shared_runs(monkeypatch) -> list:
    """Records a run of shared rows: a class's ``_Shared`` node, or a stack of classes (``stacked``) whose rows
    serve several members each."""
    runs = []
    forward = shared._Shared.forward
    monkeypatch.setattr(shared._Shared, "forward", lambda *a: runs.append(1) or forward(*a))
    stacked_forward = stacked_node.StackedNode.forward
    monkeypatch.setattr(stacked_node.StackedNode, "forward",
                        lambda ctx, plan, *a: (plan.shares and runs.append(1)) or stacked_forward(ctx, plan, *a))
    return runs


def _static(per_edge: bool):
    @qhybrid.qnode(qhybrid.device("tensornet", wires=N), static_structure=True)
    def circuit(g, b):
        for i in range(N):
            qml.Hadamard(i)
        for k, (u, v) in enumerate(EDGES):
            qml.IsingZZ(g[k] if per_edge else g[0], wires=[u, v])
        for i in range(N):
            qml.RX(b[0], wires=i)
        return qml.expval(H)

    return circuit


def _check(value, grads, g, b, per_edge):
    gg, bb = g.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    # the reference's IsingZZ(2 gamma): gamma = g / 2 (one gamma per edge where the circuit has one)
    if per_edge:
        blocks = [[qml.Hadamard(i) for i in range(N)], [qml.IsingZZ(gg[k], wires=e) for k, e in enumerate(EDGES)],
                  [qml.RX(bb[0], wires=i) for i in range(N)]]  # fmt: skip
    else:
        blocks = qaoa_blocks(EDGES, N, gg / 2, bb / 2)
    ref = expval(blocks, H)
    ref_grads = torch.autograd.grad(ref, [gg, bb])
    torch.testing.assert_close(value.detach(), ref.detach(), atol=1e-10, rtol=0)
    for x, y in zip(grads, ref_grads):
        torch.testing.assert_close(x, y, atol=1e-10, rtol=0)


@pytest.mark.parametrize("per_edge", [False, True])
def test_static_qnode_shares_rows_by_its_gather_and_matches_the_reference(per_edge, monkeypatch):
    """One angle for every edge: members run once each (``_Shared``), found without a ``unique``. An angle per
    edge, all equal in value: rows equal only by value are not merged (the plan cannot know them), still exact."""
    runs = _shared_runs(monkeypatch)
    circuit = _static(per_edge)
    g = torch.full((len(EDGES) if per_edge else 1,), 0.7, dtype=torch.float64, requires_grad=True)
    b = torch.tensor([-0.45], dtype=torch.float64, requires_grad=True)
    step = lambda: circuit(g, b)  # noqa: E731
    touches = host_touches(lambda: step().backward(), warmup=1)
    assert not touches, touches
    runs.clear()
    value = step()
    _check(value, torch.autograd.grad(value, [g, b]), g, b, per_edge)
    assert bool(runs) == (not per_edge)


@pytest.mark.parametrize("lazy", [False, True])
def test_a_capture_runs_every_row_of_a_plain_qnode(monkeypatch, lazy):
    """Recorded from the tensors themselves (``lazy=False``) a qnode's shared rows are found by values; while a
    CUDA graph is captured nothing may wait for them, so every member runs its own row (faked here on the CPU).
    Recorded lazily (a plain qnode's default) the rows are shared by where they are read from, which needs no
    value: the shared rows run once even while capturing. The same numbers either way, no ``unique``."""
    from qhybrid.workflow import _lazy

    monkeypatch.setattr(_lazy, "ENABLED", lazy)
    monkeypatch.setattr(shared, "capturing", lambda t: True)
    runs = _shared_runs(monkeypatch)

    dev = qhybrid.device("tensornet", wires=N)

    @qhybrid.qnode(dev)
    def circuit(gamma, beta):
        qaoa_blocks(EDGES, N, gamma, beta)  # the gates queue themselves
        return qml.expval(WEIGHTED)

    gamma = torch.tensor([0.35], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([-0.2], dtype=torch.float64, requires_grad=True)
    touches = host_touches(lambda: circuit(gamma, beta).backward(), warmup=1)
    assert "light cones" in {e.engine for e in dev.plan_cache_info().engines}
    assert not touches, touches  # the weights too: made once per device
    value = circuit(gamma, beta)
    grads = torch.autograd.grad(value, [gamma, beta])
    g, b = gamma.detach().clone().requires_grad_(), beta.detach().clone().requires_grad_()
    ref = expval(qaoa_blocks(EDGES, N, g, b), WEIGHTED)
    ref_grads = torch.autograd.grad(ref, [g, b])
    torch.testing.assert_close(value.detach(), ref.detach(), atol=1e-10, rtol=0)
    for x, y in zip(grads, ref_grads):
        torch.testing.assert_close(x, y, atol=1e-10, rtol=0)
    assert bool(runs) is lazy

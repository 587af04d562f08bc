"""State-vector cone classes run as the rows of ONE stacked state (``lightcone/stacked*.py``): values, gradients and
Hessians against default.qubit to 1e-10, with shared rows (QAOA), rows of their own (an angle per edge), classes of
several widths and kinds (constant and parametrised product states, constant diagonal gates, identity padding),
and the stack against each class's own bound node."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from benchmarks.workloads import qaoa_function
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import stacked, stacked_node
from qhybrid.devices.tensornet.engines.statevector import phase_factors
from qhybrid.devices.tensornet.engines.lightcone.stacked import pack

TOL = 1e-10


@pytest.fixture
def stacks(monkeypatch):
    """Light cones from 9 wires; records every stack run (its plan)."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 8)
    plans = []
    forward = stacked_node.StackedNode.forward
    monkeypatch.setattr(stacked_node.StackedNode, "forward", lambda ctx, plan, *a: plans.append(plan) or forward(ctx, plan, *a))
    return plans


def _compare(ours, ref, args, hessian=True):
    for _ in range(2):  # the first call plans; the second is a steady step
        xs = [a.detach().clone().requires_grad_() for a in args]
        got = ours(*xs)
        grads = torch.autograd.grad(got, xs)
    args = [a.detach().clone().requires_grad_() for a in args]
    want = ref(*args)
    torch.testing.assert_close(got, want.to(got.dtype), atol=TOL, rtol=0)
    for g, h in zip(grads, torch.autograd.grad(want, args)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)
    if hessian:
        hs = []
        for f in (ours, ref):
            xs = [a.detach().clone().requires_grad_() for a in args]
            (g,) = torch.autograd.grad(f(*xs), xs[0], create_graph=True)
            hs.append(torch.autograd.grad((g * torch.linspace(1, 2, g.numel(), dtype=g.dtype)).sum(), xs))
        for a, b in zip(*hs):
            torch.testing.assert_close(a, b, atol=1e-9, rtol=0)


def _pair(body, n):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    return ours, ref


def test_qaoa_classes_run_as_one_stack_with_shared_rows(stacks, monkeypatch):
    """A plain qnode's QAOA p=1 on a 3-regular graph (classes of 4, 5 and 6 wires): every class in one stack, one
    row a class."""
    monkeypatch.setattr(stacked, "STACK_MAX_WASTE", 4.0)  # 4 wires padded to 6 in the same stack
    n = 14
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=4).edges()]
    ours, ref = _pair(qaoa_function(edges, n), n)
    gamma = torch.tensor([0.3], dtype=torch.float64)
    beta = torch.tensor([-0.45], dtype=torch.float64)
    _compare(ours, ref, (gamma, beta))
    assert stacks and stacks[-1].shares
    assert len({id(p) for p in stacks}) == 1 and len(stacks[-1].classes) > 1  # one plan, several classes
    assert all(len(run) == 2 for run, _ in stacks[-1].runs)  # ZZ runs as products over the wire halves


@pytest.mark.parametrize("most", [None, 1])
def test_a_run_whose_gates_read_one_angle_takes_its_phases_from_a_table(stacks, monkeypatch, most):
    """QAOA as users write it (every ZZ of a layer reads ``2 * gamma[l]``): each cost run's phases are its few values'
    ``exp(i theta c)`` gathered (``PHASE_TABLE_MAX_VALUES``), with values, gradients and Hessians those of
    default.qubit; a layer whose edges alternate two angles, and a bound of one value (``most=1``), keep the whole
    ``exp(i L)``."""
    if most is not None:
        monkeypatch.setattr(phase_factors, "PHASE_TABLE_MAX_VALUES", most)
    monkeypatch.setattr(stacked, "STACK_MAX_WASTE", 4.0)
    n = 14
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=7).edges()]
    ours, ref = _pair(qaoa_function(edges, n), n)
    _compare(ours, ref, (torch.tensor([0.37], dtype=torch.float64), torch.tensor([0.29], dtype=torch.float64)))
    shared = [sh for plan in stacks for sh in plan.shared]
    assert shared and all((sh is None) == (most == 1) for sh in shared)
    for sh in shared:
        if sh is not None:  # row s's angle D times, its values, and codes into them
            positions, values, codes, weights = sh
            assert positions.shape == values.shape and codes.max() < values.size and len(set(values)) > 1
            assert weights.shape == (codes.shape[0], 2 * codes.shape[1], 1)

    def two_angles(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for k, (u, v) in enumerate(edges):
            qml.IsingZZ(2 * gamma[k % 2], wires=[u, v])
        for i in range(n):
            qml.RX(2 * beta[0], wires=i)
        return qml.expval(qml.sum(*[qml.Z(u) @ qml.Z(v) for u, v in edges]))

    stacks.clear()
    ours, ref = _pair(two_angles, n)
    _compare(ours, ref, (torch.tensor([0.37, -0.81], dtype=torch.float64), torch.tensor([0.29], dtype=torch.float64)))
    assert stacks and any(sh is None for plan in stacks for sh in plan.shared)


def test_a_run_table_factors_only_where_every_column_is_a_product():
    """``phase_factors.factored``: Z-type columns (a sign or bit per wire) split exactly over the wire halves and
    rebuild the table bit for bit; one column that is no such product keeps the whole table dense."""
    n = 5
    x = np.arange(1 << n)
    bit = lambda w: (x >> (n - 1 - w)) & 1  # noqa: E731
    z = lambda w: 1 - 2 * bit(w)  # noqa: E731
    columns = [-0.5 * z(0) * z(3), 0.5 * z(4), bit(1) * bit(2), -0.5 * z(0) * z(1) * z(2) * z(4), np.zeros(1 << n)]
    table = np.stack([np.stack(columns), np.stack(columns[::-1])])  # [S=2, G=5, 32]
    U, V = phase_factors.factored(table, n)
    assert np.array_equal(np.einsum("sgi,sgj->sgij", U, V).reshape(table.shape), table)
    mixed = table.copy()
    mixed[1, 2] = 0.5 * z(0) + 0.5 * z(4)  # a sum, not a product: rank 2 over the halves
    (dense,) = phase_factors.factored(mixed, n)
    assert dense is mixed


def test_an_angle_per_edge_gives_every_member_a_row(stacks):
    """Each ZZ its own angle, a Hamiltonian with weights and single-Z terms: classes of several widths, no row
    shared, rows padded to the widest class (identity factors, zero table rows)."""
    n = 12
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=2).edges()]
    H = qml.Hamiltonian([0.5 + 0.1 * k for k in range(len(edges))] + [0.3, -0.7],
                        [qml.Z(u) @ qml.Z(v) for u, v in edges] + [qml.Z(0), qml.Z(5)])

    def body(g, b):
        for i in range(n):
            qml.Hadamard(i)
        for k, (u, v) in enumerate(edges):
            qml.IsingZZ(g[k], wires=[u, v])
        for i in range(n):
            qml.RX(b[i % 3], wires=i)
        return qml.expval(H)

    ours, ref = _pair(body, n)
    g = torch.linspace(0.1, 1.3, len(edges), dtype=torch.float64)
    b = torch.tensor([-0.3, 0.5, 0.9], dtype=torch.float64)
    _compare(ours, ref, (g, b))
    assert stacks and not stacks[-1].shares and stacks[-1].S > len(stacks[-1].classes)


def test_parametrised_products_constant_diagonals_and_gates(stacks):
    """An RY layer on |0> (the product state's factors are gates), CZ (a constant diagonal), Hadamards between
    layers (constant factors), RY / RX mixers; Z and ZZ words: classes of several kinds, each kind its stack."""
    n = 10

    def body(x, w):
        for i in range(n):
            qml.RY(x[i], wires=i)
        for i in range(0, n - 1, 2):
            qml.CZ([i, i + 1])
        for i in range(n - 1):
            qml.IsingZZ(w[0] * (i + 1), wires=[i, i + 1])
        for i in range(n):
            qml.RX(w[1], wires=i) if i % 3 else qml.Hadamard(i)
        for i in range(1, n - 1, 2):
            qml.CRZ(w[2], wires=[i, i + 1])
        for i in range(n):
            qml.RY(w[3] + 0.1 * i, wires=i)
        return qml.expval(qml.sum(*[qml.Z(i) @ qml.Z(i + 1) for i in range(n - 1)], 0.5 * qml.Z(3)))

    ours, ref = _pair(body, n)
    x = torch.linspace(0.2, 2.1, n, dtype=torch.float64)
    w = torch.tensor([0.35, -0.8, 0.6, 0.25], dtype=torch.float64)
    _compare(ours, ref, (x, w))
    assert stacks


def test_the_stack_equals_each_class_on_its_own(stacks, monkeypatch):
    """QAOA p=2 on 40 nodes (classes of 10 to 14 wires, too wide for default.qubit here): the stack against each
    class run alone (``bound_class``, tested against default.qubit)."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", None)  # the device's own choice: cones at 40 wires
    n = 40
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=5).edges()]
    ours, _ = _pair(qaoa_function(edges, n), n)
    args = (torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([0.25, 0.6], dtype=torch.float64))
    got = {}
    for enabled in (True, False):
        monkeypatch.setattr(stacked, "ENABLED", enabled)
        for _ in range(2):
            xs = [a.clone().requires_grad_() for a in args]
            v = ours(*xs)
            got[enabled] = (v, *torch.autograd.grad(v, xs))
    assert stacks
    for a, b in zip(got[True], got[False]):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_packing_keeps_the_padding_bounded(monkeypatch):
    monkeypatch.setattr(stacked, "STACK_MAX_WASTE", 2.0)
    assert pack([(14, 1), (13, 1), (13, 1), (12, 1), (12, 1), (10, 1)]) == [[0, 1, 2, 3, 4], [5]]
    monkeypatch.setattr(stacked, "STACK_MAX_AMPLITUDES", 1 << 15)
    assert pack([(14, 1), (14, 1), (13, 2)]) == [[0, 1], [2]]
    assert pack([(16, 1), (14, 1), (14, 3)]) == [[1]]  # too wide alone, or too many rows: as before


def test_joined_takes_one_stack_output_as_it_is_and_cats_anything_else():
    out = torch.arange(5, dtype=torch.float64)
    parts = [p.view(1, -1, 1) for p in out.split([2, 3])]
    assert stacked.joined(parts).data_ptr() == out.data_ptr()  # the stack's output itself, no copy
    assert stacked.joined(parts[::-1]).flatten().tolist() == [2, 3, 4, 0, 1]  # out of order: a cat
    z = torch.arange(5, dtype=torch.float64).to(torch.complex128)  # real views of a complex tensor share its base: not taken
    parts = [p.view(1, -1, 1) for p in z.real.split([2, 3])]
    got = stacked.joined(parts)
    assert got.dtype == torch.float64 and got.flatten().tolist() == [0, 1, 2, 3, 4]

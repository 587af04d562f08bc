"""A cone class priced for one member but run with many rows stacked (a parameter-shift's shifted rows, the
terms of a class) runs in parts of rows whose stacked state fits ``max_memory`` (``lightcone/program.py``,
``statevector/cost.rows_that_fit``), where it was refused although each row fits (found by a fuzzing helper,
2026-11-29: a 20-wire ring's parameter-shift gradient under 1 MiB, "needs about 1.4 MiB"). Reference:
default.qubit, to 1e-10."""

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone import program as cone_program


@pytest.fixture
def parts(monkeypatch):
    """(rows asked, rows run at once) of every stacked run split in parts."""
    seen = []
    real = cone_program.rows_that_fit

    def spy(*args):
        rows = real(*args)
        if rows < args[1]:
            seen.append((args[1], rows))
        return rows

    monkeypatch.setattr(cone_program, "rows_that_fit", spy)
    return seen


def _check(circuit, n, args, diff_method, max_memory):
    ours_node = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=max_memory), diff_method=diff_method)
    ours = ours_node(circuit)(*args)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")(*args)
    ours, ref = torch.stack(list(ours)) if isinstance(ours, (list, tuple)) else ours, (
        torch.stack(list(ref)) if isinstance(ref, (list, tuple)) else ref)
    torch.testing.assert_close(ours.detach(), ref.detach(), atol=1e-10, rtol=0)
    for a, b in zip(torch.autograd.grad(ours.sum(), args), torch.autograd.grad(ref.sum(), args)):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_a_parameter_shift_gradient_runs_its_rows_in_parts(parts):
    n = 14

    def circuit(g, b):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(2):
            for i in range(n):
                qml.IsingZZ(g[layer * n + i], wires=[i, (i + 1) % n])
            for i in range(n):
                qml.RX(b[layer], wires=i)
        return qml.expval(qml.sum(*[qml.Z(i) @ qml.Z((i + 1) % n) for i in range(n)]))

    gen = torch.Generator().manual_seed(3)
    args = (torch.rand(2 * n, generator=gen, dtype=torch.float64, requires_grad=True),
            torch.rand(2, generator=gen, dtype=torch.float64, requires_grad=True))
    _check(circuit, n, args, "parameter-shift", 2**18)
    assert parts, "the shifted rows fit at once: the test no longer reaches the split"


def test_the_terms_of_a_class_run_in_parts_under_a_small_max_memory(parts):
    edges = list(nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4)).edges())
    n = 16

    def circuit(g, b, c):
        for i in range(n):
            qml.Hadamard(i)
        for k, (u, v) in enumerate(edges):
            qml.IsingZZ(g[k], wires=[u, v])
        qml.CRX(0.37, wires=[3, 11])
        qml.PauliRot(c[0], "XY", wires=[1, 9])
        for i in range(n):
            qml.RX(2 * b[0], wires=i)
        return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges]

    gen = torch.Generator().manual_seed(0)
    args = tuple(torch.rand(k, generator=gen, dtype=torch.float64, requires_grad=True) for k in (len(edges), 1, 1))
    _check(circuit, n, args, "adjoint", 2**16)  # (refused before: "needs about 156.0 KiB")
    assert parts, "the class's rows fit at once: the test no longer reaches the split"

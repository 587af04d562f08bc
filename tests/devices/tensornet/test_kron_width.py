"""Kronecker blocks as a GPU plans them (``kron_blocks``: six wires where the CPU takes four), run on the CPU: the
same programs with the CPU's width set to the GPU's give default.qubit's values and gradients to 1e-10, on the
state-vector program (batched, stacked by parameter-shift), the bound path (QAOA's mixers), cone stacks and random
circuits; and how a run of wires is cut into blocks."""

from __future__ import annotations

import contextlib

import networkx as nx
import pennylane as qml
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import stacked_plan
from qhybrid.devices.tensornet.engines.statevector import kron_blocks
from qhybrid.devices.tensornet.engines.statevector.kron_blocks import kron_groups, kron_max_wires

from _circuits import build_tape, circuits, flat, grads, loss_of, reference

TOL = 1e-10


@contextlib.contextmanager
def gpu_width():
    """The CPU plans with the GPU's block width (hypothesis runs many examples in one test: no fixture)."""
    cpu = kron_blocks.KRON_MAX_WIRES
    kron_blocks.KRON_MAX_WIRES = kron_blocks.KRON_MAX_WIRES_CUDA
    try:
        yield kron_blocks.KRON_MAX_WIRES
    finally:
        kron_blocks.KRON_MAX_WIRES = cpu


def test_the_gpu_plans_wider_blocks_than_the_cpu():
    assert kron_max_wires("cpu") == 4 and kron_max_wires(torch.device("cuda")) == 6 == kron_blocks.KRON_MAX_WIRES_CUDA


@pytest.mark.parametrize(
    "wires, width, groups",
    [
        (list(range(8)), 6, [[0, 1, 2, 3], [4, 5, 6, 7]]),  # not 6 + 2: as few blocks, as even as they can be
        (list(range(12)), 6, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]),
        (list(range(16)), 6, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]]),
        ([0, 1, 2, 4, 5, 9], 4, [[0, 1, 2], [4, 5], [9]]),  # runs of adjacent wires only
        (list(range(5)), 4, [[0, 1, 2], [3, 4]]),
        ([], 4, []),
    ],
)
def test_a_run_of_wires_is_cut_into_as_few_even_blocks_as_the_width_allows(wires, width, groups):
    assert kron_groups(wires, width) == groups


@settings(max_examples=200, deadline=None)
@given(wires=st.sets(st.integers(0, 40)).map(sorted), width=st.integers(1, 8))
def test_blocks_cover_the_wires_in_adjacent_groups_of_at_most_the_width(wires, width):
    groups = kron_groups(wires, width)
    assert [w for g in groups for w in g] == wires
    for g in groups:
        assert 1 <= len(g) <= width and g == list(range(g[0], g[0] + len(g)))
    sizes = [len(g) for g in groups]
    runs = sum(1 for i, w in enumerate(wires) if i == 0 or wires[i - 1] + 1 != w)
    assert len(groups) >= runs and (not sizes or max(sizes) - min(sizes) <= max(width - 1, 0))


def _sel(n, layers):
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    return f


def _check(f, make_args, n, diff_method="adjoint", **device):
    args = make_args()
    ref_args = tuple(a.detach().clone().requires_grad_() for a in args)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n, **device), diff_method=diff_method)(f)(*args)
    want = qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch")(*ref_args)
    got, want = torch.stack(list(got)) if isinstance(got, (list, tuple)) else got, torch.stack(list(want)) if isinstance(want, (list, tuple)) else want
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    weights = torch.linspace(0.5, 1.5, got.numel(), dtype=got.dtype).reshape(got.shape)
    for g, h in zip(torch.autograd.grad((got * weights).sum(), args), torch.autograd.grad((want * weights).sum(), ref_args)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("n, layers, batch", [(12, 2, 3), (7, 2, 4), (13, 1, None)])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_state_vector_programs_with_the_gpus_blocks_match_default_qubit(n, layers, batch, diff_method):
    def args():
        g = torch.Generator().manual_seed(n)
        x = torch.rand(*((batch,) if batch else ()), n, generator=g, dtype=torch.float64) * 3
        return x.requires_grad_(), (torch.rand(layers, n, 3, generator=g, dtype=torch.float64) * 6).requires_grad_()

    with gpu_width():
        _check(_sel(n, layers), args, n, diff_method)


def _qaoa(n, edges):
    def f(gamma, beta):
        for w in range(n):
            qml.Hadamard(w)
        for layer in range(2):
            for u, v in edges:
                qml.IsingZZ(gamma[layer], wires=[u, v])
            for w in range(n):
                qml.RX(beta[layer], wires=w)
        return qml.expval(qml.sum(*(qml.Z(u) @ qml.Z(v) for u, v in edges)))

    def args():
        return (torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True),
                torch.tensor([-0.4, 0.2], dtype=torch.float64, requires_grad=True))

    return f, args


def test_qaoa_mixers_in_the_gpus_blocks_match_default_qubit():
    n = 16
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=7).edges()]
    with gpu_width():
        _check(*_qaoa(n, edges), n)


def _layered(n):
    """Brickwork: rotation layers on every wire between ZZ layers, so each ZZ word's cone carries layers of
    single-qubit gates on several adjacent wires (the blocks)."""

    def f(x, w):
        for layer in range(4):
            for i in range(n):
                qml.RY(x[i], wires=i) if layer == 0 else qml.RX(w[layer] + 0.1 * i, wires=i)
            for i in range(layer % 2, n - 1, 2):
                qml.IsingZZ(w[0] * (i + 1), wires=[i, i + 1])
        return qml.expval(qml.sum(*[qml.Z(i) @ qml.Z(i + 1) for i in range(n - 1)], 0.5 * qml.Z(3)))

    def args():
        return (torch.linspace(0.2, 2.1, n, dtype=torch.float64).requires_grad_(),
                torch.tensor([0.35, -0.8, 0.6, 0.25], dtype=torch.float64, requires_grad=True))

    return f, args


def test_cone_stacks_with_the_gpus_blocks_match_default_qubit(monkeypatch):
    """Light cones from 9 wires (a 12-wire circuit takes cones), their classes stacked together."""
    n = 12
    seen = []
    blocks = stacked_plan._blocks

    def spy(wires, width):
        out = blocks(wires, width)
        seen.extend(k for _, k in out)
        return out

    monkeypatch.setattr(stacked_plan, "_blocks", spy)
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 8)
    with gpu_width():
        _check(*_layered(n), n)
    assert seen and max(seen) > 4  # the stack planned blocks wider than the CPU's


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=circuits(max_wires=7, max_gates=16))
def test_random_circuits_with_the_gpus_blocks_match_default_qubit(spec):
    ref, ref_leaves = reference(spec, spec.n_wires)
    with gpu_width():
        dev = qhybrid.device("tensornet", wires=spec.n_wires)
        tape, leaves = build_tape(spec)
        (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
        for x, y in zip(flat(res), flat(ref)):
            torch.testing.assert_close(x, y, atol=TOL, rtol=0)
        for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
            torch.testing.assert_close(g, h, atol=TOL, rtol=0)

"""Diagonal runs on the one-node (bound) path: a QAOA-like step (IsingZZ cost layers, RX mixers) and every
diagonal angle gate (RZ, PhaseShift, U1, CRZ, ControlledPhaseShift, IsingZZ, MultiRZ, Z-word PauliRot) with
constant diagonal gates inside the runs, gathered from several inputs, batched or not, against default.qubit
(values and gradients to 1e-10 in float64, 1e-4 in float32); a step records one autograd node."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from _autograd_graph import autograd_node_names

N = 4
EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]


def _qaoa(gamma, beta):
    for i in range(N):
        qml.Hadamard(i)
    for layer in range(gamma.shape[-1]):
        for u, v in EDGES:
            qml.IsingZZ(gamma[..., layer], wires=[u, v])
        for i in range(N):
            qml.RX(beta[..., layer], wires=i)
    return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in EDGES]


def _every_diagonal(x, w):
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.RZ(w[0], wires=0)
    qml.PhaseShift(w[1], wires=1)
    qml.CRZ(w[2], wires=[2, 0])
    qml.CZ(wires=[1, 3])
    qml.ControlledPhaseShift(w[3], wires=[3, 1])
    qml.IsingZZ(x[..., 0], wires=[0, 3])
    qml.MultiRZ(w[4], wires=[0, 1, 3])
    qml.PauliRot(w[5], "ZIZ", wires=[1, 2, 3])
    qml.U1(x[..., 1], wires=2)
    qml.S(wires=0)
    qml.CNOT(wires=[0, 1])
    qml.RY(w[6], wires=1)
    qml.IsingZZ(w[7], wires=[1, 2])
    qml.T(wires=2)
    qml.RZ(x[..., 2], wires=3)
    return [qml.expval(qml.Z(i)) for i in range(N)] + [qml.expval(qml.X(1) @ qml.Y(2))]


def _stack(r):
    return torch.stack(list(r), -1) if isinstance(r, (list, tuple)) else r


def _check(body, make_args, dtype, tol, static=False):
    dev = qhybrid.device("tensornet", wires=N, dtype=dtype)
    ours = qhybrid.qnode(dev, diff_method="adjoint", static_structure=static)(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    for call in range(3):  # the first call traces; later ones take the bound path
        args = make_args(call)
        got = _stack(ours(*args))
        want = _stack(ref(*[a.detach().double().requires_grad_(a.requires_grad) for a in args]))
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=0)
        if call:
            names = autograd_node_names(got.sum())
            assert "BoundNodeBackward" in names and "ExecuteTapesBackward" not in names, names
        cot = torch.linspace(-1, 2, got.numel(), dtype=got.dtype).reshape(got.shape)
        wrt = [a for a in args if a.requires_grad]
        ref_args = [a.detach().double().requires_grad_(a.requires_grad) for a in args]
        want = _stack(ref(*ref_args))
        mine = torch.autograd.grad((got * cot).sum(), wrt)
        theirs = torch.autograd.grad((want * cot.double()).sum(), [a for a in ref_args if a.requires_grad])
        for a, b in zip(mine, theirs):
            assert a.dtype == got.dtype
            torch.testing.assert_close(a.double(), b, atol=tol, rtol=0)


@pytest.mark.parametrize("dtype,tol", [(torch.complex128, 1e-10), (torch.complex64, 1e-4)])
@pytest.mark.parametrize("batch", [None, 3])
def test_qaoa_step_on_the_bound_path(dtype, tol, batch):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    gen = torch.Generator().manual_seed(11)
    shape = (2,) if batch is None else (batch, 2)

    def args(call):
        g = (torch.rand(shape, generator=gen, dtype=torch.float64) * 3).to(real).requires_grad_(True)
        b = (torch.rand(2, generator=gen, dtype=torch.float64) * 3).to(real).requires_grad_(True)
        return g, b

    _check(_qaoa, args, dtype, tol)


@pytest.mark.parametrize("dtype,tol", [(torch.complex128, 1e-10), (torch.complex64, 1e-4)])
@pytest.mark.parametrize("batch", [None, 4])
@pytest.mark.parametrize("grads", ["both", "x", "w"])
def test_every_diagonal_gate_on_the_bound_path(dtype, tol, batch, grads):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    gen = torch.Generator().manual_seed(5)
    shape = (N,) if batch is None else (batch, N)

    def args(call):
        x = (torch.rand(shape, generator=gen, dtype=torch.float64) * 6).to(real).requires_grad_(grads != "w")
        w = (torch.rand(8, generator=gen, dtype=torch.float64) * 6).to(real).requires_grad_(grads != "x")
        return x, w

    _check(_every_diagonal, args, dtype, tol)


@pytest.mark.parametrize("most", [64, 0])
def test_a_run_whose_gates_read_one_angle_takes_its_phases_from_a_table(monkeypatch, most):
    """Every IsingZZ of a QAOA layer reads ``gamma[l]``: the run's phases are its summed table's few values'
    ``exp(i theta c)`` (``diagonal.shared_values``), values and gradients those of default.qubit; with no room
    for values (``most=0``) the whole ``exp(i L)``, the same figures. Runs with several angles, constant gates or a
    batch never take it (``test_every_diagonal_gate_on_the_bound_path``, ``test_qaoa_step_on_the_bound_path``)."""
    from qhybrid.devices.tensornet.engines.statevector import diagonal, phase_factors

    monkeypatch.setattr(phase_factors, "PHASE_TABLE_MAX_VALUES", most)
    taken = []
    phases = diagonal.phases
    monkeypatch.setattr(diagonal, "phases", lambda run, ts, *a: taken.append(a[-1] is not None) or phases(run, ts, *a))
    gen = torch.Generator().manual_seed(3)

    def args(call):
        return tuple(torch.rand(2, generator=gen, dtype=torch.float64).requires_grad_() for _ in range(2))

    _check(_qaoa, args, torch.complex128, 1e-10)
    assert taken and all(t == (most > 0) for t in taken)
    if most:
        run = diagonal.DiagonalRun(3)
        for wires in ((0, 1), (1, 2), (0, 2)):
            run.add(0, "angle", qml.IsingZZ(0.3, wires=wires), wires)
        values, codes = diagonal.shared_values(run.finish(), torch.complex128, "cpu")
        assert values.tolist() == [-1.5, 0.5] and codes.view(-1).tolist() == [0, 1, 1, 1, 1, 1, 1, 0]


def test_a_qaoa_step_records_one_node_and_runs_no_general_path(monkeypatch):
    """A static-structure QAOA step: the graph between the inputs and the loss is BoundNode alone, and the
    general path's ExecuteTapes never runs on a repeat call."""
    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint", static_structure=True)(_qaoa)
    g = torch.rand(2, dtype=torch.float64, requires_grad=True)
    b = torch.rand(2, dtype=torch.float64, requires_grad=True)
    qn(g, b)
    from qhybrid.gradients import _execute

    general = []
    apply = _execute.ExecuteTapes.apply
    monkeypatch.setattr(_execute.ExecuteTapes, "apply", lambda *a: general.append(1) or apply(*a))
    loss = torch.stack(qn(g, b)).sum()
    assert sorted(autograd_node_names(loss)) == ["AccumulateGrad", "AccumulateGrad", "BoundNodeBackward",
                                                 "StackBackward0", "SumBackward0"]
    loss.backward()
    assert general == [] and g.grad is not None and b.grad is not None


def test_bound_and_general_paths_agree_on_diagonal_runs(monkeypatch):
    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint")(_every_diagonal)
    x = torch.rand(3, N, dtype=torch.float64, requires_grad=True)
    w = torch.rand(8, dtype=torch.float64, requires_grad=True)
    qn(x, w)
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(_bound, "ENABLED", enabled)
        out = _stack(qn(x, w))
        results.append((out, *torch.autograd.grad(out.sum(), (x, w))))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)

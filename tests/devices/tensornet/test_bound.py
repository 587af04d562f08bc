"""The bound program (``engines/statevector/bound.py`` + ``gate_grads.py``, reached through
``devices/tensornet/_bound.py``): gate matrices built inside one autograd node and chained back to the
inputs by hand, against default.qubit on circuits with every gate kind that has a shift rule, constant
gates between them, unsorted and non-adjacent wires, batched angles on one- and two-qubit gates, partial
``requires_grad``, state-reading measurements, float32 and Hessians."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from _autograd_graph import autograd_node_names

N = 4
TOL = 1e-10


def _all_kinds(x, w):
    col = (lambda k: x[..., k])
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.Hadamard(2)
    qml.StronglyEntanglingLayers(w[:2], wires=range(N))
    qml.CRX(w[2, 0, 0], wires=[2, 0])
    qml.CRY(w[2, 0, 1], wires=[1, 3])
    qml.CRZ(w[2, 0, 2], wires=[0, 1])
    qml.IsingZZ(w[2, 1, 1], wires=[3, 0])
    qml.PhaseShift(w[2, 1, 2], wires=1)
    qml.U1(w[2, 2, 0], wires=0)
    qml.RX(col(0), wires=2)
    qml.S(1)
    qml.CRot(w[2, 2, 1], w[2, 2, 2], w[2, 3, 0], wires=[3, 1])
    qml.ControlledPhaseShift(w[2, 3, 1], wires=[2, 0])
    qml.CRX(col(1), wires=[0, 3])
    qml.RZ(w[2, 3, 2], wires=3)
    qml.RY(col(2), wires=1)
    qml.Toffoli(wires=[0, 1, 2])
    qml.Rot(w[0, 0, 0], w[0, 1, 0], w[1, 1, 1], wires=0)


def _dense_kinds(x, w):
    """_all_kinds without its diagonal gates (those form diagonal runs, engines/statevector/diagonal.py): the
    bound program without a diagonal step."""
    col = (lambda k: x[..., k])
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.Hadamard(2)
    qml.StronglyEntanglingLayers(w[:2], wires=range(N))
    qml.CRX(w[2, 0, 0], wires=[2, 0])
    qml.CRY(w[2, 0, 1], wires=[1, 3])
    qml.RX(col(0), wires=2)
    qml.CRot(w[2, 2, 1], w[2, 2, 2], w[2, 3, 0], wires=[3, 1])
    qml.CRX(col(1), wires=[0, 3])
    qml.RY(col(2), wires=1)
    qml.Toffoli(wires=[0, 1, 2])
    qml.Rot(w[0, 0, 0], w[0, 1, 0], w[1, 1, 1], wires=0)


def _z_dense(x, w):
    _dense_kinds(x, w)
    return [qml.expval(qml.Z(i)) for i in range(N)] + [qml.expval(qml.Z(0) @ qml.Z(3))]


def _probs_dense(x, w):
    _dense_kinds(x, w)
    return qml.probs(wires=[3, 1])


def _z(x, w):
    _all_kinds(x, w)
    return [qml.expval(qml.Z(i)) for i in range(N)] + [qml.expval(qml.Z(0) @ qml.Z(3))]


def _probs(x, w):
    _all_kinds(x, w)
    return qml.probs(wires=[3, 1])


def _pair(body, dtype=torch.complex128):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N, dtype=dtype), diff_method="adjoint")(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    return ours, ref


def _stack(r):
    return torch.stack(list(r), -1) if isinstance(r, (list, tuple)) else r




@pytest.mark.parametrize("body", [_z, _probs, _z_dense, _probs_dense])
@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("grads", ["both", "x", "w"])
def test_matches_default_qubit(body, batch, grads):
    torch.manual_seed(7)
    ours, ref = _pair(body)
    shape = (N,) if batch is None else (batch, N)
    for call in range(3):  # the first call traces; later ones take the bound path
        x = (torch.rand(*shape, dtype=torch.float64) * 3).requires_grad_(grads in ("both", "x"))
        w = (torch.rand(3, N, 3, dtype=torch.float64) * 6).requires_grad_(grads in ("both", "w"))
        got, want = _stack(ours(x, w)), _stack(ref(x, w))
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        if call:  # diagonal runs included: every later call is one bound node
            assert "BoundNodeBackward" in autograd_node_names(got)
        wrt = [t for t in (x, w) if t.requires_grad]
        cot = torch.linspace(-1, 2, got.numel(), dtype=got.dtype).reshape(got.shape)
        for a, b in zip(torch.autograd.grad((got * cot).sum(), wrt), torch.autograd.grad((want * cot).sum(), wrt)):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_bound_and_general_paths_agree(monkeypatch):
    """The same repeat call with the bound path switched off: identical numbers."""
    ours, _ = _pair(_z)
    x = torch.rand(4, N, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, N, 3, dtype=torch.float64, requires_grad=True)
    ours(x, w)
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(_bound, "ENABLED", enabled)
        out = _stack(ours(x, w))
        results.append((out, *torch.autograd.grad(out.sum(), (x, w))))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_float32_inputs_on_a_complex64_device():
    torch.manual_seed(3)
    ours, ref = _pair(_z, torch.complex64)
    for _ in range(2):
        x = torch.rand(3, N, requires_grad=True)
        w = torch.rand(3, N, 3, requires_grad=True)
        got = _stack(ours(x, w))
        assert got.dtype == torch.float32
        gx, gw = torch.autograd.grad(got.sum(), (x, w))
        assert gx.dtype == gw.dtype == torch.float32
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    want = _stack(ref(xd, wd))
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=0)
    hx, hw = torch.autograd.grad(want.sum(), (xd, wd))
    torch.testing.assert_close(gx.double(), hx, atol=2e-4, rtol=0)
    torch.testing.assert_close(gw.double(), hw, atol=2e-4, rtol=0)


def test_hessian_through_the_bound_node():
    ours, ref = _pair(_z)
    x = torch.rand(2, N, dtype=torch.float64)
    w = torch.rand(3, N, 3, dtype=torch.float64, requires_grad=True)
    ours(x, w)
    hs = []
    for f in (ours, ref):
        (g,) = torch.autograd.grad(_stack(f(x, w)).sum(), w, create_graph=True)
        hs.append(torch.autograd.grad((g * torch.arange(g.numel()).reshape(g.shape)).sum(), w)[0])
    torch.testing.assert_close(hs[0], hs[1], atol=TOL, rtol=0)


def test_weights_shared_by_views_are_not_counted_twice():
    """``w`` and a view of it both as arguments: each gets its own gradient, as under default.qubit."""

    def body(w, w0):
        qml.RX(w[0], wires=0)
        qml.RY(w0[0], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.Z(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=2), interface="torch")
    w = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        got = ours(w, w[1:])
    want = ref(w, w[1:])
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(got, w)[0], torch.autograd.grad(want, w)[0], atol=TOL, rtol=0)

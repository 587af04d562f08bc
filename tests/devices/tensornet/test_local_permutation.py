"""Monomial gates on wide circuits as permutations of their own wires (``kernels.apply_local_permutation``)
against PennyLane default.qubit: the circuits are small, with ``MONOMIAL_TABLE_MAX_WIRES`` lowered so that
they take the wide circuits' path (no ``2**n`` index tables). Values, adjoint gradients (states kept and
recomputed), broadcast inputs, Hessians (torch reverse mode through the slice copies), the gathered-inputs
path (later calls), parameter-shift stacks and ``qml.state()``."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.statevector import adjoint as _sv_adjoint
from qhybrid.devices.tensornet.engines.statevector import program as _statevector

TOL = 1e-10
N = 5


@pytest.fixture(autouse=True)
def _wide_path(monkeypatch):
    monkeypatch.setattr(_statevector, "MONOMIAL_TABLE_MAX_WIRES", 0)
    monkeypatch.setattr(_statevector, "LOCAL_PERMUTATION_MAX_WIRES", 3)


def _ops(theta, x):
    qml.AngleEmbedding(x, wires=range(N))
    for layer in range(2):
        for i in range(N):
            qml.RY(theta[layer, i], wires=i)
        qml.CNOT([0, 1])
        qml.CNOT([1, 2])  # composes with the one before (span 3)
        qml.CNOT([3, 1])  # reversed wires
        qml.Toffoli([4, 0, 2])  # non-adjacent: slice copies
        qml.SWAP([1, 4])
        qml.Y(3)  # a monomial with phases
        qml.ISWAP([2, 3])
        qml.CZ([2, 0])
        qml.RX(theta[layer, 0], 0)


def _expvals(theta, x):
    _ops(theta, x)
    return [qml.expval(qml.Z(i)) for i in range(N)] + [qml.expval(qml.X(1) @ qml.Y(3))]


def _pair(fn, diff_method="adjoint"):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method=diff_method)(fn)
    ref = qml.QNode(fn, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    return ours, ref


def _weighted(out):
    out = torch.stack(list(out))
    return (out * torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))).sum()


@pytest.mark.parametrize("keep_states", [True, False])
@pytest.mark.parametrize("batch", [None, 3])
def test_values_and_adjoint_gradients_match_default_qubit(keep_states, batch, monkeypatch):
    if not keep_states:
        monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    theta = torch.rand(2, N, dtype=torch.float64, requires_grad=True)
    x = torch.rand(*((batch,) if batch else ()), N, dtype=torch.float64, requires_grad=True)
    ours, ref = _pair(_expvals)
    want = torch.stack(ref(theta, x))
    want_grads = torch.autograd.grad(_weighted(ref(theta, x)), [theta, x])
    for _ in range(3):  # later calls take the gathered-inputs (bound) path
        got = torch.stack(ours(theta, x))
        assert torch.allclose(got, want, atol=TOL, rtol=0)
        for g, r in zip(torch.autograd.grad(_weighted(ours(theta, x)), [theta, x]), want_grads):
            assert torch.allclose(g, r, atol=TOL, rtol=0)


def test_hessian_matches_default_qubit():
    theta = torch.rand(2, N, dtype=torch.float64)
    x = torch.rand(N, dtype=torch.float64)
    ours, ref = _pair(_expvals)
    got = torch.autograd.functional.hessian(lambda t: _weighted(ours(t, x)), theta)
    want = torch.autograd.functional.hessian(lambda t: _weighted(ref(t, x)), theta)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


def test_parameter_shift_stack_matches_default_qubit():
    def one(theta, x):
        _ops(theta, x)
        return qml.expval(qml.Z(0) @ qml.X(2))

    theta = torch.rand(2, N, dtype=torch.float64, requires_grad=True)
    x = torch.rand(N, dtype=torch.float64)
    ours, ref = _pair(one, "parameter-shift")
    (got,) = torch.autograd.grad(ours(theta, x), theta)
    (want,) = torch.autograd.grad(ref(theta, x), theta)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


def test_state_matches_default_qubit():
    def state(theta, x):
        _ops(theta, x)
        return qml.state()

    theta, x = torch.rand(2, N, dtype=torch.float64), torch.rand(N, dtype=torch.float64)
    ours, ref = _pair(state)
    assert torch.allclose(ours(theta, x), ref(theta, x).to(torch.complex128), atol=TOL, rtol=0)

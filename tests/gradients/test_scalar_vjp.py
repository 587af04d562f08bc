"""The adjoint JPC's cotangents folded into one scalar (``adjoint_tn._as_scalar``): Jacobians, weighted sums
of several outputs and second derivatives against default.qubit, float64 at 1e-10."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.gradients import adjoint_tn


def _circuit(x):
    rng = np.random.default_rng(7)
    for layer in range(2):
        for w in range(4):
            qml.RX(x[(layer * 4 + w) % len(x)], wires=w)
            qml.RZ(float(rng.uniform(0, 2)), wires=w)
        for w in range(3):
            qml.CNOT([w, w + 1])
        qml.IsingZZ(x[layer], wires=[0, 3])
    return qml.expval(qml.Z(0) @ qml.Z(2)), qml.expval(qml.X(1)), qml.probs(wires=[1, 3])


def _both():
    mine = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(_circuit)
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=4), interface="torch", diff_method="backprop")
    return mine, ref


@pytest.fixture
def folds(monkeypatch):
    """A record of each ``_as_scalar`` call: whether it folded (so the tests reach the path they test)."""
    got, real = [], adjoint_tn._as_scalar

    def spy(pairs):
        out = real(pairs)
        got.append(out[1] is None)
        return out

    monkeypatch.setattr(adjoint_tn, "_as_scalar", spy)
    return got


def _flat(out):
    return torch.cat([torch.atleast_1d(o).reshape(-1) for o in out])


@pytest.mark.parametrize("seed", [0, 1])
def test_jacobian_and_weighted_sum(seed, folds):
    mine, ref = _both()
    x = torch.tensor(np.random.default_rng(seed).uniform(-2, 2, 5), dtype=torch.float64)
    jm = torch.autograd.functional.jacobian(lambda v: _flat(mine(v)), x)
    jr = torch.autograd.functional.jacobian(lambda v: _flat(ref(v)), x)
    assert torch.allclose(jm, jr, atol=1e-10, rtol=0)
    w = torch.tensor(np.random.default_rng(seed + 10).normal(size=jm.shape[0]), dtype=torch.float64)
    xm, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    (w @ _flat(mine(xm))).backward()
    (w @ _flat(ref(xr))).backward()
    assert torch.allclose(xm.grad, xr.grad, atol=1e-10, rtol=0)
    assert folds and all(folds)


def test_second_derivative(folds):
    mine, ref = _both()
    x = torch.tensor([0.3, -0.7, 1.1, 0.2, 0.9], dtype=torch.float64)
    hm = torch.autograd.functional.hessian(lambda v: mine(v)[0], x)
    hr = torch.autograd.functional.hessian(lambda v: ref(v)[0], x)
    assert torch.allclose(hm, hr, atol=1e-10, rtol=0)
    assert folds and all(folds)


def test_real_pairs_fold_complex_ones_do_not():
    o = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    d = torch.tensor([3.0, -1.0], dtype=torch.float64)
    outs, dys = adjoint_tn._as_scalar([(o, d)])
    assert dys is None and len(outs) == 1
    (g,) = torch.autograd.grad(outs, [o])
    assert torch.equal(g, d)
    c = torch.tensor([1.0 + 1j], requires_grad=True)
    outs, dys = adjoint_tn._as_scalar([(c, torch.tensor([1.0 + 0j]))])
    assert outs == [c] and len(dys) == 1

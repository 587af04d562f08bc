"""Exact centre moves by QR: the product is the block, the gradient through it is the block's own (the SVD
split's, which is exact there), and rank-deficient tall blocks go to the SVD split."""

import pytest
import torch

from qhybrid.devices.tensornet.engines.mps import qr
from qhybrid.devices.tensornet.engines.mps.qr import exact_split
from qhybrid.devices.tensornet.engines.mps.svd import split


def _block(batch, m, n, rank, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, m, rank, dtype=dtype, generator=g) @ torch.randn(batch, rank, n, dtype=dtype, generator=g)
    return a.requires_grad_(True)


def _loss(left, right, w1, w2):
    """Through the product left @ right (what every MPS reading sees), plus the sites one by one through a
    gauge-invariant bilinear form."""
    return (w1 @ left @ right @ w2).abs().pow(2).sum()


@pytest.mark.parametrize("m, n", [(8, 4), (4, 8), (6, 6)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("centre", ["right", "left"])
def test_exact_split_is_the_block_with_its_gradient(m, n, dtype, centre):
    theta = _block(3, m, n, min(m, n), dtype, seed=m * n)
    w1, w2 = torch.randn(2, m, dtype=dtype), torch.randn(n, 3, dtype=dtype)
    left, right, k = exact_split(theta, centre)
    assert k == min(m, n) and torch.allclose(left @ right, theta, atol=1e-13)
    iso = left if centre == "right" else right.mH
    assert torch.allclose(iso.mH @ iso, torch.eye(k, dtype=dtype).expand(3, k, k), atol=1e-13)
    true = torch.autograd.grad(_loss(theta, torch.eye(n, dtype=dtype), w1, w2), theta)[0]
    ours = torch.autograd.grad(_loss(left, right, w1, w2), theta)[0]
    assert torch.allclose(ours, true, atol=1e-10)


def test_full_rank_blocks_take_qr(monkeypatch):
    """The tall case's second term, (I - Q Q^H) g_Q R^-H, is exercised above only if QR ran: no SVD split."""
    monkeypatch.setattr(qr, "split", lambda *a: pytest.fail("a full-rank block took the SVD split"))
    for shape in [(8, 4), (4, 8), (6, 6)]:
        exact_split(_block(2, *shape, min(shape), torch.complex128, seed=3), "right")
        exact_split(_block(2, *shape, min(shape), torch.complex128, seed=3), "left")


def test_rank_deficient_tall_blocks_take_the_svd_split(monkeypatch):
    theta = _block(2, 8, 4, 2, torch.complex128, seed=7)
    w1, w2 = torch.randn(3, 8, dtype=theta.dtype), torch.randn(4, 2, dtype=theta.dtype)
    calls = []
    monkeypatch.setattr(qr, "split", lambda *a: calls.append(a) or split(*a))
    left, right, k = exact_split(theta, "right")
    assert calls and k == 4 and torch.allclose(left @ right, theta, atol=1e-13)
    ours = torch.autograd.grad(_loss(left, right, w1, w2), theta)[0]
    l2, r2, _, _ = split(theta, None, 0.0, "right")
    theirs = torch.autograd.grad(_loss(l2, r2, w1, w2), theta)[0]
    assert torch.equal(ours, theirs)


def test_a_site_with_subnormal_entries_splits_finitely():
    """Found by fuzzing: a parameter-shift gradient through an exact MPS (cutoff 0) reached a rank-one site whose
    other entries fell to 1e-320, MKL's QR returned NaN for it and the next SVD refused the non-finite block.
    Entries below sqrt(tiny) are zero before the factorization now."""
    import numpy as np
    import pennylane as qml

    import qhybrid

    rng = np.random.default_rng(1034)
    p0 = torch.tensor(rng.uniform(-3, 3, (3, 15)), dtype=torch.float64)

    def f(p):
        qml.CRY(p[..., 0], wires=[0, 6])
        qml.IsingZZ(p[..., 1], wires=[5, 8])
        qml.IsingZZ(p[..., 2], wires=[2, 8])
        qml.Rot(p[..., 3], p[..., 4], p[..., 5], wires=6)
        qml.ctrl(qml.RX(p[..., 0], wires=4), control=[6, 2])
        qml.SWAP(wires=[3, 5])
        qml.RY(p[..., 10], wires=5)
        qml.CRZ(p[..., 12], wires=[0, 3])
        qml.ControlledPhaseShift(p[..., 13], wires=[3, 7])
        qml.CNOT(wires=[2, 4])
        return qml.var(qml.Z(0))

    ref = qml.QNode(f, qml.device("default.qubit", wires=9), interface="torch", diff_method="backprop")
    dev = qhybrid.device("tensornet", wires=9, method="mps", max_bond_dim=16, cutoff=0.0)
    mine = qhybrid.qnode(dev, diff_method="parameter-shift")(f)
    p, q = p0.clone().requires_grad_(True), p0.clone().requires_grad_(True)
    got, want = mine(p), ref(q)
    assert torch.allclose(got, want, atol=1e-10, rtol=0)
    got.sum().backward()
    want.sum().backward()
    assert torch.isfinite(p.grad).all()
    assert torch.allclose(p.grad, q.grad, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128, torch.complex64])
def test_flushed_drops_only_entries_below_the_square_root_of_tiny(dtype):
    tiny = torch.finfo(dtype.to_real()).tiny
    block = torch.tensor([[1.0, tiny * 1e-3], [tiny**0.5 * 2, 0.5]], dtype=dtype)
    out = qr._flushed(block)
    assert out[0, 1] == 0 and out[1, 0] == block[1, 0] and out[0, 0] == 1 and out.dtype == dtype

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

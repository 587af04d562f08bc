"""The truncated split: exact gradients of the exact state on degenerate and rank-deficient blocks, torch's
own gradient of the truncated state where the spectrum is simple, finite gradients where it is not."""

import pytest
import torch

from qhybrid.devices.tensornet.engines.mps.svd import _pair_inverse, kept_rank, split


def _block(m, n, s, dtype):
    k = len(s)
    u, _ = torch.linalg.qr(torch.randn(m, k, dtype=dtype))
    v, _ = torch.linalg.qr(torch.randn(n, k, dtype=dtype))
    return ((u * torch.tensor(s, dtype=torch.float64).to(dtype)) @ v.mH).unsqueeze(0)


def _loss(left, right, w1, w2):
    """Reads the block only through the product left @ right, as every MPS expectation value does (plus
    the sites one by one through a gauge-invariant bilinear form)."""
    return (w1 @ left @ right @ w2).abs().pow(2).sum()


@pytest.mark.parametrize("m, n", [(4, 4), (8, 4), (4, 8)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("spectrum", [[1.0, 0.5, 0.5, 0.1], [1.0, 0.3, 0.3, 0.3], [1.0, 0.5, 0.2, 0.0]])
@pytest.mark.parametrize("centre", ["right", "left"])
def test_exact_split_gradient_equals_the_blocks_on_degenerate_spectra(m, n, dtype, spectrum, centre):
    if spectrum[-1] == 0.0 and (m > n if centre == "right" else n > m):
        pytest.skip("a rank-deficient tall block has no gradient through an isometry (documented)")
    theta = _block(m, n, spectrum, dtype).requires_grad_(True)
    w1, w2 = torch.randn(3, m, dtype=dtype), torch.randn(n, 2, dtype=dtype)
    true = torch.autograd.grad(_loss(theta, torch.eye(n, dtype=dtype), w1, w2), theta)[0]
    left, right, discarded, k = split(theta, None, 0.0, centre)
    assert k == min(m, n) and discarded.item() == 0.0
    ours = torch.autograd.grad(_loss(left, right, w1, w2), theta)[0]
    assert torch.allclose(ours, true, atol=1e-10)


@pytest.mark.parametrize("m, n", [(6, 5), (5, 6), (5, 5)])  # tall: torch's SVD; wide, square: the Gram route
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_truncated_split_gradient_equals_torchs_on_simple_spectra(m, n, dtype):
    theta = _block(m, n, [1.0, 0.6, 0.4, 0.2, 0.1], dtype).requires_grad_(True)
    w1, w2 = torch.randn(3, m, dtype=dtype), torch.randn(n, 2, dtype=dtype)
    left, right, _, k = split(theta, 3, 0.0, "right")
    ours = torch.autograd.grad(_loss(left, right, w1, w2), theta)[0]
    u, s, vh = torch.linalg.svd(theta, full_matrices=False)
    ref_right = (s[..., :3, None].to(dtype) * vh[..., :3, :]) * (s.norm() / s[..., :3].norm()).to(dtype)
    theirs = torch.autograd.grad(_loss(u[..., :3], ref_right, w1, w2), theta)[0]
    assert k == 3 and torch.allclose(ours, theirs, atol=1e-10)
    assert torch.allclose(left @ right, u[..., :3] @ ref_right, atol=1e-12)  # the same truncated block


def test_gram_route_is_exact_on_rank_deficient_and_batched_blocks():
    """U from eigh is unitary whatever the spectrum: U (U^H theta) is theta to machine precision, zero and
    repeated singular values included; the singular values match torch's."""
    theta = torch.cat([_block(4, 8, s, torch.complex128) for s in ([1.0, 0.5, 0.0, 0.0], [0.7, 0.7, 0.7, 1e-9])])
    left, right, discarded, k = split(theta, None, 0.0, "right")
    assert k == 4 and torch.allclose(left @ right, theta, atol=1e-14) and (discarded == 0).all()
    assert torch.allclose(left.mH @ left, torch.eye(4, dtype=theta.dtype).expand(2, 4, 4), atol=1e-14)
    assert torch.allclose(right.norm(dim=-1), torch.linalg.svdvals(theta), atol=1e-12)


def test_ties_across_the_cut_give_finite_gradients():
    dtype = torch.complex128
    theta = _block(4, 4, [0.6, 0.6, 0.6, 0.0], dtype).requires_grad_(True)  # a tie across the cut
    w1, w2 = torch.randn(3, 4, dtype=dtype), torch.randn(4, 2, dtype=dtype)
    for k in (1, 2, 3):
        left, right, _, _ = split(theta, k, 0.0, "right")
        ours = torch.autograd.grad(_loss(left, right, w1, w2), theta)[0]
        assert torch.isfinite(ours).all() and ours.abs().max() < 1e7  # capped by the broadening


def test_discarded_weight_and_norm_after_truncation():
    theta = _block(4, 4, [0.8, 0.5, 0.3, 0.1], torch.float64)
    left, right, discarded, k = split(theta, 2, 0.0, "right")
    assert k == 2
    assert discarded.item() == pytest.approx((0.3**2 + 0.1**2) / (0.64 + 0.25 + 0.09 + 0.01), abs=1e-14)
    assert (left @ right).norm().item() == pytest.approx(theta.norm().item(), abs=1e-14)
    assert torch.allclose(left.mH @ left, torch.eye(2, dtype=torch.float64), atol=1e-14)


def test_kept_rank_follows_cutoff_and_cap():
    s = torch.tensor([[1.0, 0.5, 1e-3, 1e-9]])
    assert kept_rank(s, None, 0.0) == 4
    assert kept_rank(s, None, 1e-6) == 3
    assert kept_rank(s, 2, 1e-6) == 2


def test_pair_inverse_is_exact_off_ties_and_silent_at_noise():
    """1/(s_i^2 - s_j^2) for a kept and a dropped value: exact for a small kept value against a zero (an
    absolute broadening bent it), capped at a near-tie, zero where the kept value is at noise level."""
    s2_kept = torch.tensor([[[1.0, 4e-6, 0.25, 1e-20]]], dtype=torch.float64)
    s2_dropped = torch.tensor([[[0.0], [0.25 * (1 - 1e-9)]]], dtype=torch.float64)
    f = _pair_inverse(s2_kept, s2_dropped, torch.tensor([[[1.0]]], dtype=torch.float64))
    assert f[0, 0, 0] == pytest.approx(1.0, rel=1e-11) and f[0, 0, 1] == pytest.approx(1 / 4e-6, rel=1e-11)
    assert abs(f[0, 1, 2]) < 1e7  # a relative gap of 1e-9: broadened (the exact term is 4e9)
    assert f[0, 0, 3] == 0 and f[0, 1, 3] == 0  # a kept value at noise level

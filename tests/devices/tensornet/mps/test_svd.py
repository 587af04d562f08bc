"""The stable SVD: the textbook gradient where the spectrum is simple, finite gradients where it is not."""

import pytest
import torch

from qhybrid.devices.tensornet.engines.mps.svd import StableSVD, kept_rank, truncated_split


def _gauge_invariant_loss(u, s, vh, w):
    """A loss that does not depend on the singular vectors' phases (as every MPS reading)."""
    k = s.shape[-1]
    rebuilt = u[..., :k] @ torch.diag_embed(s.to(u.dtype)) @ vh
    return (rebuilt * w).real.sum() + (s**3).sum() + (u[..., :, :1] @ vh[..., :1, :]).abs().pow(2).sum()


@pytest.mark.parametrize("shape", [(3, 5, 5), (2, 7, 4), (2, 4, 7)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_gradient_equals_torch_on_simple_spectra(shape, dtype):
    a = torch.randn(shape, dtype=dtype, requires_grad=True)
    w = torch.randn(shape, dtype=dtype)
    ours = torch.autograd.grad(_gauge_invariant_loss(*StableSVD.apply(a), w), a)[0]
    theirs = torch.autograd.grad(_gauge_invariant_loss(*torch.linalg.svd(a, full_matrices=False), w), a)[0]
    assert torch.allclose(ours, theirs, atol=1e-10)


def test_gradcheck_complex():
    a = torch.randn(2, 4, 3, dtype=torch.complex128, requires_grad=True)
    w = torch.randn(2, 4, 3, dtype=torch.complex128)
    assert torch.autograd.gradcheck(lambda x: _gauge_invariant_loss(*StableSVD.apply(x), w), (a,))


def test_degenerate_and_zero_singular_values_give_finite_gradients():
    # identity blocks: every singular value degenerate, and a zero one (a padded bond)
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.complex128))
    a = (q @ torch.diag(torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.complex128))).requires_grad_(True)
    w = torch.randn(4, 4, dtype=torch.complex128)
    torch_grad = torch.autograd.grad(_gauge_invariant_loss(*torch.linalg.svd(a, full_matrices=False), w), a)[0]
    assert not torch.isfinite(torch_grad).all()  # what the stable backward is for
    ours = torch.autograd.grad(_gauge_invariant_loss(*StableSVD.apply(a), w), a)[0]
    assert torch.isfinite(ours).all()


def test_truncated_split_reports_the_discarded_weight_and_keeps_the_norm():
    s = torch.tensor([0.8, 0.5, 0.3, 0.1], dtype=torch.float64)
    u, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    theta = (u * s) @ v.T
    _, kept, _, discarded = truncated_split(theta[None], 2, 0.0)
    total = (s**2).sum()
    assert discarded.item() == pytest.approx(((0.3**2 + 0.1**2) / total).item(), abs=1e-14)
    assert (kept**2).sum().item() == pytest.approx(total.item(), abs=1e-14)


def test_kept_rank_follows_cutoff_and_cap():
    s = torch.tensor([[1.0, 0.5, 1e-3, 1e-9]])
    assert kept_rank(s, None, 0.0) == 4
    assert kept_rank(s, None, 1e-6) == 3
    assert kept_rank(s, 2, 1e-6) == 2

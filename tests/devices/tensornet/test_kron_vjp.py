"""``blocks.kron_vjp`` (the bound path's Kronecker-block backward, by halving) against torch reverse mode
through ``blocks.kron``, for every block size the program makes and one more."""

from __future__ import annotations

import pytest
import torch

from qhybrid.devices.tensornet.engines.statevector.blocks import kron, kron_vjp


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_factor_cotangents_match_reverse_mode(k, dtype):
    gen = torch.Generator().manual_seed(k)
    m = torch.randn(6, k, 2, 2, dtype=dtype, generator=gen).requires_grad_(True)
    g = torch.randn(6, 2**k, 2**k, dtype=dtype, generator=gen)
    (want,) = torch.autograd.grad(kron(m), m, g)
    got = kron_vjp(m.detach(), g)
    assert got.shape == m.shape and got.dtype == dtype
    tol = 1e-12 if dtype == torch.complex128 else 1e-4
    assert torch.allclose(got, want, atol=tol, rtol=0), (got - want).abs().max()

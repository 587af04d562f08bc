"""Environments: products of one-site operators and reduced density matrices equal the dense ones, with
the centre anywhere."""

import pytest
import torch

from _random_mps import dense, random_mps
from qhybrid.devices.tensornet.engines.mps.measure import Environments

Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
X = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128)


def _dense_rho(psi, sites, n):
    b = psi.shape[0]
    t = psi.reshape(b, *(2,) * n)
    rest = [i for i in range(n) if i not in sites]
    t = t.permute(0, *[1 + s for s in sites], *[1 + r for r in rest]).reshape(b, 1 << len(sites), -1)
    return t @ t.mH


@pytest.mark.parametrize("centre", [0, 2, 5])
def test_products_and_reduced_densities(centre):
    n = 6
    mps = random_mps(n, 2, seed=centre)
    mps.move_centre(centre)
    psi = dense(mps)
    env = Environments(mps)
    ops = {1: Z, 4: X}
    rho = _dense_rho(psi, [1, 4], n)
    expected = torch.einsum("bij,ji->b", rho, torch.kron(Z, X))
    assert torch.allclose(env.product_expval(ops), expected, atol=1e-12)
    assert torch.allclose(env.norm(), torch.ones(2, dtype=torch.complex128), atol=1e-12)
    for sites in ([0], [2, 3], [0, 3, 5]):
        full = env.reduced_density(sites, False, 1e9)
        assert torch.allclose(full, _dense_rho(psi, sites, n), atol=1e-12)
        diag = env.reduced_density(sites, True, 1e9)
        assert torch.allclose(diag, _dense_rho(psi, sites, n).diagonal(0, -2, -1).real, atol=1e-12)


def test_reduced_density_beyond_memory_is_refused():
    mps = random_mps(6, 1, seed=0)
    with pytest.raises(MemoryError, match="probabilities of 6 wires"):
        Environments(mps).reduced_density(list(range(6)), True, 100.0)

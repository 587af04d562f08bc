"""Gates on the MPS equal the same gates on the dense state: adjacent, distant (SWAP-routed), three-site,
batched, with the centre anywhere."""

import numpy as np
import pytest
import torch

from _random_mps import dense, random_mps, random_unitary
from qhybrid.devices.tensornet.engines.mps.gates import apply_gate, in_site_order


def _dense_apply(psi: torch.Tensor, mat: torch.Tensor, sites, n: int) -> torch.Tensor:
    b, k = psi.shape[0], len(sites)
    t = psi.reshape(b, *(2,) * n)
    g = mat.reshape(mat.shape[:-2] + (2,) * (2 * k))
    if mat.dim() == 2:
        g = g.expand(b, *g.shape)
    letters = "abcdefghijklmnop"
    state = "z" + letters[:n]
    outs = "".join("ABCDEFGH"[j] for j in range(k))
    gate = "z" + outs + "".join(state[1 + s] for s in sites)
    result = list(state)
    for j, s in enumerate(sites):
        result[1 + s] = outs[j]
    return torch.einsum(f"{gate},{state}->{''.join(result)}", g, t).reshape(b, -1)


@pytest.mark.parametrize("sites", [(1, 2), (4, 0), (0, 5), (3, 1, 5), (5, 2, 0), (2,)])
@pytest.mark.parametrize("towards", [None, 0])
def test_gate_equals_the_dense_update(sites, towards):
    n, batch = 6, 3
    mps = random_mps(n, batch, seed=len(sites) + sum(sites))
    before = dense(mps)
    rng = np.random.default_rng(5)
    mat = torch.stack([random_unitary(1 << len(sites), rng) for _ in range(batch)])
    apply_gate(mps, mat, list(sites), towards)
    assert torch.allclose(dense(mps), _dense_apply(before, mat, sites, n), atol=1e-12)
    for i, a in enumerate(mps.sites):  # the canonical form holds around the centre
        if i < mps.centre:
            m = a.reshape(batch, -1, a.shape[-1])
            assert torch.allclose(m.mH @ m, torch.eye(m.shape[-1], dtype=m.dtype).expand_as(m.mH @ m), atol=1e-12)
        elif i > mps.centre:
            m = a.reshape(batch, a.shape[1], -1)
            assert torch.allclose(m @ m.mH, torch.eye(m.shape[-2], dtype=m.dtype).expand_as(m @ m.mH), atol=1e-12)


def test_unbatched_matrix_on_a_batched_state():
    mps = random_mps(4, 2, seed=1)
    before = dense(mps)
    mat = random_unitary(4, np.random.default_rng(0))
    apply_gate(mps, mat, [3, 0])
    assert torch.allclose(dense(mps), _dense_apply(before, mat, (3, 0), 4), atol=1e-12)


def test_in_site_order_permutes_the_matrix():
    mat = random_unitary(4, np.random.default_rng(2))
    swapped, sites = in_site_order(mat, [3, 1])
    swap = torch.tensor([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]], dtype=mat.dtype)
    assert sites == [1, 3] and torch.allclose(swapped, swap @ mat @ swap)

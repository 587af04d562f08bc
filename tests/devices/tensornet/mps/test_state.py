"""The MPS and its canonical form: product states, centre moves that keep the state."""

import torch

from _random_mps import dense, random_mps
from qhybrid.devices.tensornet.engines.mps.state import product_state, state_vector_elements, to_state_vector


def test_product_state_is_its_basis_vector():
    mps = product_state([1, 0, 1], 2, torch.complex128, "cpu", None, 0.0)
    psi = to_state_vector(mps)
    assert psi.shape == (2, 8) and (psi[:, 0b101] == 1).all() and psi.abs().sum() == 2
    assert state_vector_elements(mps) == 2 * 8


def test_centre_moves_keep_the_state_and_make_isometries():
    mps = random_mps(6, 2, seed=3)
    psi = dense(mps)
    for target in (5, 0, 3):
        mps.move_centre(target)
        assert mps.centre == target
        assert torch.allclose(dense(mps), psi, atol=1e-12)
        left = mps.sites[0].reshape(2, -1, mps.sites[0].shape[-1])
        if target > 0:
            assert torch.allclose(left.mH @ left, torch.eye(left.shape[-1], dtype=left.dtype).expand(2, -1, -1), atol=1e-12)

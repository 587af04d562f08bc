"""A random batched MPS (exact, no cap) and its dense state, for the engine's unit tests."""

import numpy as np
import torch

from qhybrid.devices.tensornet.engines.mps.gates import apply_gate
from qhybrid.devices.tensornet.engines.mps.state import product_state, to_state_vector


def random_unitary(dim: int, rng: np.random.Generator) -> torch.Tensor:
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim)))
    return torch.as_tensor(q, dtype=torch.complex128)


def random_mps(n: int, batch: int, seed: int, gates: int = 12):
    rng = np.random.default_rng(seed)
    mps = product_state([0] * n, batch, torch.complex128, "cpu", None, 0.0)
    for _ in range(gates):
        sites = [int(s) for s in rng.choice(n, 2, replace=False)]
        mat = torch.stack([random_unitary(4, rng) for _ in range(batch)])
        apply_gate(mps, mat, sites)
    return mps


def dense(mps) -> torch.Tensor:
    return to_state_vector(mps)

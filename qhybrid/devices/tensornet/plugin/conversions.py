"""Conversions at the PennyLane boundary: parameters to torch tensors, torch results to numpy arrays in\nPennyLane's result structure."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import scipy.sparse
import torch


def _to_tensor(p):
    if isinstance(p, torch.Tensor):
        return p
    if isinstance(p, bool):
        return torch.tensor(p)
    if isinstance(p, int):
        return torch.tensor(p, dtype=torch.int64)
    if isinstance(p, float):
        return torch.tensor(p, dtype=torch.float64)
    if isinstance(p, complex):
        return torch.tensor(p, dtype=torch.complex128)
    if scipy.sparse.issparse(p):  # a SparseHamiltonian's matrix: read as it is (no dense form)
        return p
    return torch.as_tensor(np.asarray(qml.math.unwrap(p)))


def _as_torch_result(r):
    """A sampled result as a torch tensor; counts stay what PennyLane gives (a dict, or a list of dicts over
    a batch), as qhybrid.aer returns them: they have no tensor form and no gradient."""
    if isinstance(r, dict) or (isinstance(r, (list, tuple)) and r and all(isinstance(c, dict) for c in r)):
        return r
    return r if isinstance(r, torch.Tensor) else torch.as_tensor(np.asarray(r))


def _to_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        # (a lazy conjugate or negation, a view torch's numpy() refuses: a VJP of a QubitUnitary built from angles)
        return t.detach().resolve_conj().resolve_neg().cpu().numpy()
    return np.asarray(t)


def _pennylane_structure(result: tuple):
    return result[0] if len(result) == 1 else tuple(result)

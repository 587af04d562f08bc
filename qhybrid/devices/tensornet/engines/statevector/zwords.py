"""Z-word expectation values of a state-vector program: one sign matrix for every measurement."""

from __future__ import annotations

import numpy as np
import torch
from pennylane.measurements import ExpectationMP

from ...._constants import on_device
from ..._structure import TapeStructure

SIGN_MATRIX_MAX_ELEMENTS = 1 << 24
"""Z-word expectations use one sign-matrix product when (words x 2**n) stays below this."""


def z_reader(tape, structure: TapeStructure):
    """(sign matrix, per-measurement coefficient rows) when every measurement is <Z word sum>, else None."""
    n = len(structure.sim_wires)
    pos = {w: i for i, w in enumerate(structure.sim_wires)}
    words: dict[tuple, int] = {}
    rows = []
    for mp in tape.measurements:
        if type(mp) is not ExpectationMP or mp.obs is None:
            return None
        ps = mp.obs.pauli_rep  # first: a 10^3-term Sum's data walk every term (a molecule's: 5 ms)
        if ps is None or not all(set(w.values()) <= {"Z"} for w in ps) or not _plain_numbers(mp.obs.data):
            return None
        row = []
        for word, coeff in ps.items():
            if isinstance(coeff, complex):
                coeff = coeff.real
            key = tuple(sorted(pos[w] for w in word.keys()))
            row.append((words.setdefault(key, len(words)), float(coeff)))
        rows.append(row)
    if len(words) * (1 << n) > SIGN_MATRIX_MAX_ELEMENTS:
        return None
    x = np.arange(1 << n, dtype=np.int64)
    signs = np.empty((len(words), 1 << n))
    for key, r in words.items():
        parity = np.zeros_like(x)
        for w in key:
            parity ^= (x >> (n - 1 - w)) & 1
        signs[r] = 1 - 2 * parity
    coeffs = np.zeros((len(rows), len(words)))
    for m, row in enumerate(rows):
        for r, c in row:
            coeffs[m, r] += c
    identity = all(len(row) == 1 and row[0][1] == 1.0 for row in rows) and [row[0][0] for row in rows] == list(
        range(len(words))
    )
    combined = signs if identity else coeffs @ signs
    return torch.as_tensor(combined)


def _plain_numbers(data) -> bool:
    """Whether an observable's data are plain numbers: coefficients of a Hamiltonian that the structure key
    (the measurement's hash) pins, so the sign matrix may hold them. Tensors may carry gradients or
    change between calls with one hash: those observables are read from the state."""
    return all(isinstance(d, (int, float, complex, np.number)) for d in data)


def z_expvals(signs: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """[measurements, S', B'] expectation values from the sign matrix (any device or dtype) and the state."""
    signs = on_device(signs, psi.device, psi.real.dtype)
    return z_values(signs, psi).reshape(signs.shape[0], *psi.shape[1:])


def z_values(signs: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """``[measurements, S'B']`` expectation values from ``signs`` (on the state's device, in its real dtype) in 6 ops
    on a contiguous state: its real view squared, one GEMM, the (re, im) columns summed."""
    r = torch.view_as_real(psi).reshape(signs.shape[1], -1)  # [2**n, 2 S'B'], from any layout
    both = torch.mm(signs, r * r)  # [measurements, S'B' (re, im)]
    return both.view(signs.shape[0], -1, 2).sum(-1)


def z_cotangent(signs_twice_t: torch.Tensor, g: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """``h = conj(g_psi) = 2 conj(psi) (s^T g)`` from ``g`` ``[measurements, S'B']`` and ``signs_twice_t`` the
    sign matrix transposed and doubled (made once): 4 ops and one state-sized temporary."""
    w = torch.mm(signs_twice_t, g).view(psi.shape)
    return torch.mul(psi.conj(), w)

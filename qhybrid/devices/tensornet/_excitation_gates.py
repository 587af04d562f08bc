"""Closed-form builders of the fermionic excitation gates: a 2x2 block on two basis states plus a diagonal.

``SingleExcitation`` (and ``Plus`` / ``Minus``), ``DoubleExcitation`` (and ``Plus`` / ``Minus``) and
``FermionicSWAP`` mix exactly two basis states of their wires (``|01>, |10>``; ``|0011>, |1100>``) and multiply
every other one by a phase ``exp(i k theta / 2)``; ``OrbitalRotation`` is two commuting Givens rotations
(``F (G (x) G) F``, real). Their matrices are built here from the angle columns in a
few batched ops for every gate of a kind at once (PennyLane's own matrix took 1 ms a gate: 92 of them in an
H2O ansatz step), and ``TWO_LEVEL`` tells the state-vector program which two states the block mixes, so the
gate is applied to those amplitudes alone (``engines/statevector/excitations.py``).

>>> import torch, pennylane as qml
>>> m = excitation_matrix("DoubleExcitation", [torch.tensor(0.3, dtype=torch.float64)], torch.complex128, "cpu")
>>> bool(torch.allclose(m, torch.as_tensor(qml.DoubleExcitation.compute_matrix(0.3), dtype=torch.complex128)))
True
"""

from __future__ import annotations

import numpy as np
import torch

TWO_LEVEL: dict[str, tuple[int, int, int]] = {
    "SingleExcitation": (4, 1, 2),
    "SingleExcitationPlus": (4, 1, 2),
    "SingleExcitationMinus": (4, 1, 2),
    "DoubleExcitation": (16, 3, 12),
    "DoubleExcitationPlus": (16, 3, 12),
    "DoubleExcitationMinus": (16, 3, 12),
    "FermionicSWAP": (4, 1, 2),
    "OrbitalRotation": (16, -1, -1),
}
"""Gate kind -> (matrix size, the two local basis states its 2x2 block mixes; -1: it mixes more, applied as a
dense matrix on its gathered amplitudes)."""


def _rest(name: str, dim: int) -> np.ndarray:
    """Per basis state outside the block: k in its phase exp(i k theta / 2)."""
    if name.endswith("Plus"):
        return np.ones(dim)
    if name.endswith("Minus"):
        return -np.ones(dim)
    if name == "FermionicSWAP":
        return np.array([0.0, 0.0, 0.0, 2.0])
    return np.zeros(dim)


_CONSTANTS: dict = {}


def _constants(name: str, dtype, device):
    """(rest-diagonal mask, phase exponents, the four block unit matrices) for one kind, dtype and device."""
    key = (name, dtype, str(device))
    hit = _CONSTANTS.get(key)
    if hit is None:
        dim, i0, i1 = TWO_LEVEL[name]
        real = torch.empty((), dtype=dtype).real.dtype
        mask = np.ones(dim)
        mask[[i0, i1]] = 0
        units = np.zeros((4, dim, dim))
        for u, (r, c) in enumerate(((i0, i0), (i0, i1), (i1, i0), (i1, i1))):
            units[u, r, c] = 1
        hit = _CONSTANTS[key] = (
            torch.as_tensor(mask, dtype=real, device=device),
            torch.as_tensor(_rest(name, dim) * mask, dtype=real, device=device) if _rest(name, dim).any() else None,
            torch.as_tensor(units, dtype=dtype, device=device),
        )
    return hit


def _fswap_pi() -> np.ndarray:
    """``FermionicSWAP(pi)`` on the middle two of four wires: swaps their bits, -1 where both are set."""
    f = np.zeros((16, 16))
    for b in range(16):
        b1, b2 = (b >> 2) & 1, (b >> 1) & 1
        swapped = (b & 0b1001) | (b2 << 2) | (b1 << 1)
        f[swapped, b] = -1.0 if b1 and b2 else 1.0
    return f


def _orbital_rotation(theta: torch.Tensor, dtype, device) -> torch.Tensor:
    """``OrbitalRotation``: a Givens rotation of the spin-up pair (wires 0, 2) and of the spin-down pair (1, 3),
    as PennyLane decomposes it: ``F (G (x) G) F`` with ``G`` a SingleExcitation and ``F`` a FermionicSWAP(pi)."""
    key = ("OrbitalRotation", dtype, str(device))
    f = _CONSTANTS.get(key)
    if f is None:
        f = _CONSTANTS[key] = torch.as_tensor(_fswap_pi(), dtype=dtype, device=device)
    half = theta[..., None, None] / 2
    c, s = torch.cos(half), torch.sin(half)
    one, zero = torch.ones_like(c), torch.zeros_like(c)
    g = torch.cat([torch.cat(row, -1) for row in ((one, zero, zero, zero), (zero, c, -s, zero),
                                                  (zero, s, c, zero), (zero, zero, zero, one))], -2)
    k = torch.einsum("...ab,...cd->...acbd", g, g).reshape(*theta.shape, 16, 16).to(dtype)
    return f @ k @ f


def excitation_matrix(name: str, params, dtype, device) -> torch.Tensor:
    """Matrices ``lead + (D, D)`` of gate kind ``name`` for real angle tensors ``params[0]`` of shape ``lead``."""
    theta = params[0]
    if name == "OrbitalRotation":
        real = torch.empty((), dtype=dtype).real.dtype
        return _orbital_rotation(theta.to(device=device, dtype=real), dtype, device)
    mask, exponents, units = _constants(name, dtype, device)
    real = mask.dtype
    theta = theta.to(device=device, dtype=real)
    half = theta[..., None] / 2
    if exponents is not None:  # Plus / Minus / FermionicSWAP: phases outside the block
        diag = torch.polar(mask.expand(half.shape[:-1] + mask.shape), half * exponents)
    else:
        diag = mask.to(dtype).expand(half.shape[:-1] + mask.shape)
    c, s = torch.cos(half), torch.sin(half)  # [..., 1]
    if name == "FermionicSWAP":
        e = torch.polar(torch.ones_like(half), half)
        block = torch.stack([e * c, -1j * e * s, -1j * e * s, e * c], -1)
    else:
        block = torch.stack([c, -s, s, c], -1).to(dtype)
    return torch.diag_embed(diag) + (block[..., None, None] * units).sum(-3).squeeze(-3)

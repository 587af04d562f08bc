"""Measurements read off a density matrix ``[4**n, S, B]`` (``evolve``'s layout), in torch so they stay
differentiable: expval (Pauli sentences by one gather of the entries each word reads; other observables on
their wires' reduced density matrix), var, probs (also in an observable's eigenbasis), density_matrix, state
(the full density matrix, as ``default.mixed`` returns it), and every other state measurement through
PennyLane's own ``process_density_matrix``.
"""

from __future__ import annotations

import string

import numpy as np
import pennylane as qml
import torch
from pennylane.devices.qubit_mixed.measure import measure as mixed_measure
from pennylane.measurements import DensityMatrixMP, ExpectationMP, ProbabilityMP, StateMP, VarianceMP

from .....errors import UnsupportedOperationError
from ...._constants import literal
from ..._gates import typed_tensor
from .coefficients import real_coefficient
from .evolve import interleave

_LETTERS = string.ascii_letters

READERS_KEPT = 256
"""Pauli sentences whose gather rows are kept (per device, dtype and wire layout)."""
_READERS: dict = {}

PAULI_GATHER_MAX_ELEMENTS = 1 << 24
"""A Pauli sentence whose words x 2**n entries exceed this is read word by word instead of in one gather."""


def _word_reader(word: dict, position: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the entries ``rho[k ^ x, k]`` and coefficients ``c_k`` with ``Tr(P rho) = sum_k c_k rho[k ^ x, k]``."""
    x = y = z = 0
    for w, letter in word.items():
        bit = 1 << (n - 1 - position[w])
        if letter == "X":
            x |= bit
        elif letter == "Y":
            x |= bit
            y |= bit
        elif letter == "Z":
            z |= bit
    k = np.arange(1 << n)
    parity = np.zeros(1 << n, dtype=np.int64)
    masked = k & (y | z)
    while masked.any():
        parity ^= masked & 1
        masked = masked >> 1
    coef = ((-1j) ** bin(y).count("1")) * (1 - 2 * parity)
    return interleave(k ^ x, k, n), coef


class DensityReader:
    """Measures one density matrix; ``lead_shape`` is the results' leading shape (stack, batch where present)."""

    def __init__(self, rho: torch.Tensor, n: int, lead_shape: tuple, wires: qml.wires.Wires, dtype):
        self.flat = rho.reshape(1 << (2 * n), -1)  # [4**n, L]
        self.n, self.lead_shape, self.wires, self.dtype = n, tuple(lead_shape), wires, dtype
        self.position = {w: i for i, w in enumerate(wires)}
        self._diag = None

    def _shape(self, t: torch.Tensor, tail: tuple = ()) -> torch.Tensor:
        """``[L, *tail]`` values as ``lead_shape + tail``."""
        return t.reshape(self.lead_shape + tail)

    def measure(self, mp) -> torch.Tensor:
        if isinstance(mp, ExpectationMP):
            return self._shape(self.expval(mp.obs))
        if isinstance(mp, VarianceMP):
            return self._shape(self.variance(mp.obs))
        if isinstance(mp, ProbabilityMP):
            return self._shape(self.probs(mp), (-1,))
        if isinstance(mp, DensityMatrixMP) or (type(mp) is StateMP):
            wires = mp.wires if mp.wires else self.wires
            rho = self.reduced(wires)
            return self._shape(rho, rho.shape[1:])
        return self._other(mp)

    # --- pieces -------------------------------------------------------------------------------------

    def diagonal(self) -> torch.Tensor:
        """Probabilities of every basis state, ``[2**n, L]`` (real)."""
        if self._diag is None:
            k = np.arange(1 << self.n)
            index = torch.as_tensor(interleave(k, k, self.n), device=self.flat.device)
            self._diag = self.flat.index_select(0, index).real
        return self._diag

    def reduced(self, wires) -> torch.Tensor:
        """The reduced density matrix of ``wires`` (in that order), ``[L, 2**k, 2**k]``."""
        n, k = self.n, len(wires)
        t = self.flat.reshape(*(2,) * (2 * n), -1)
        ket, bra = list(_LETTERS[:n]), list(_LETTERS[n : 2 * n])
        keep = [self.position[w] for w in wires]
        for i in range(n):
            if i not in keep:
                bra[i] = ket[i]  # traced out
        lead = _LETTERS[2 * n]
        out = lead + "".join(ket[i] for i in keep) + "".join(bra[i] for i in keep)
        layout = "".join(k + b for k, b in zip(ket, bra))  # evolve's interleaved order
        red = torch.einsum(layout + lead + "->" + out, t)
        return red.reshape(-1, 1 << k, 1 << k)

    def _readers(self, words: tuple) -> tuple[torch.Tensor, torch.Tensor]:
        """The words' gather rows and coefficients on the state's device, made once per words and layout."""
        key = (words, tuple(self.position.items()), self.n, self.dtype, self.flat.device)
        hit = _READERS.get(key)
        if hit is None:
            readers = [_word_reader(dict(w), self.position, self.n) for w in words]
            index = torch.as_tensor(np.stack([r[0] for r in readers]).reshape(-1), device=self.flat.device)
            coef = torch.as_tensor(np.stack([r[1] for r in readers]), dtype=self.dtype, device=self.flat.device)
            if len(_READERS) >= READERS_KEPT:
                _READERS.pop(next(iter(_READERS)))
            hit = _READERS[key] = (index, coef)
        return hit

    def pauli_expval(self, sentence) -> torch.Tensor:
        """``Tr(H rho)`` of a Pauli sentence, ``[L]`` real."""
        n = self.n
        words = [(w, real_coefficient(c)) for w, c in sentence.items()]
        real_dtype = self.flat.dtype.to_real()
        total = None
        batch = max(1, PAULI_GATHER_MAX_ELEMENTS >> n)
        for start in range(0, len(words), batch):
            chunk = words[start : start + batch]
            index, coef = self._readers(tuple(w for w, _ in chunk))
            picked = self.flat.index_select(0, index).reshape(len(chunk), 1 << n, -1)
            per_word = (picked * coef[:, :, None]).sum(1).real  # [T, L]
            if all(isinstance(c, (int, float)) for _, c in chunk):  # fixed coefficients: made once per device
                weights = literal(tuple(float(c) for _, c in chunk), self.flat.device, real_dtype)
            else:
                weights = torch.stack([typed_tensor(c, real_dtype, self.flat.device) for _, c in chunk])
            part = (weights[:, None] * per_word).sum(0) if weights.ndim == 1 else torch.einsum("t...,tl->l", weights, per_word)
            total = part if total is None else total + part
        if total is None:
            return torch.zeros(self.flat.shape[1], dtype=real_dtype, device=self.flat.device)
        return total

    def expval(self, obs) -> torch.Tensor:
        if obs.pauli_rep is not None:
            return self.pauli_expval(obs.pauli_rep)
        rho = self.reduced(obs.wires)
        m = typed_tensor(qml.matrix(obs, wire_order=obs.wires), self.dtype, self.flat.device)
        return torch.einsum("lij,ji->l", rho, m).real

    def variance(self, obs) -> torch.Tensor:
        rho = self.reduced(obs.wires)
        m = typed_tensor(qml.matrix(obs, wire_order=obs.wires), self.dtype, self.flat.device)
        mean = torch.einsum("lij,ji->l", rho, m).real
        square = torch.einsum("lij,jk,ki->l", rho, m, m).real
        return square - mean**2

    def probs(self, mp) -> torch.Tensor:
        wires = mp.wires if mp.wires else self.wires
        if mp.obs is not None:  # rotate the observable's wires into its eigenbasis
            rho = self.reduced(wires)
            u = qml.matrix(qml.prod(*reversed(mp.obs.diagonalizing_gates())), wire_order=wires) if mp.obs.diagonalizing_gates() else None
            if u is not None:
                u = typed_tensor(u, self.dtype, self.flat.device)
                rho = u @ rho @ u.mH
            return torch.diagonal(rho, dim1=-2, dim2=-1).real
        diag = self.diagonal().reshape(*(2,) * self.n, -1)
        keep = [self.position[w] for w in wires]
        letters = _LETTERS[: self.n]
        lead = _LETTERS[self.n]
        out = torch.einsum(letters + lead + "->" + lead + "".join(letters[i] for i in keep), diag)
        return out.reshape(out.shape[0], -1)

    def _other(self, mp) -> torch.Tensor:
        """Any other state measurement by PennyLane's mixed-state measure on the full density matrix."""
        if not isinstance(mp, qml.measurements.StateMeasurement):
            raise UnsupportedOperationError(
                f"{type(mp).__name__} is not an analytic measurement of a density matrix; run the circuit with shots."
            )
        mapped = mp.map_wires(self.position)
        rho = self.reduced(self.wires)  # [L, 2**n, 2**n]
        out = mixed_measure(mapped, rho.reshape(-1, *(2,) * (2 * self.n)), is_state_batched=True)
        out = torch.as_tensor(out)
        return out.reshape(self.lead_shape + tuple(out.shape[1:]))

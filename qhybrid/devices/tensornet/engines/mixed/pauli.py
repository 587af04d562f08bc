"""The Heisenberg walk in the Pauli basis: observables as real vectors of Pauli coefficients, each step its real
Pauli transfer matrix, the batch's product states as real per-wire Bloch vectors.

An observable ``O`` is the vector ``o[P] = Tr(P O)`` over the ``4**n`` Pauli strings (wire ``w``'s letter
I, X, Y, Z as digit 0..3 at ``4**(n-1-w)``: the interleaved layout's ket/bra pair of the wire), and a step back
through a channel ``S`` (density-matrix superoperator, ``vec(rho)[2k+b] = rho[k, b]`` per wire) is the real
matrix ``A S^T A^-1`` with ``A`` the rows ``vec(P)`` of the Pauli matrices: a Hermiticity-preserving map is
real there, so the walk runs in real arithmetic (a quarter of the complex flops, half the memory traffic).
Permutation gates that are Clifford (CNOT, CZ, SWAP and their compositions) map Pauli strings to signed Pauli
strings: one gather and a sign, found once per structure. The walk's end contracts the coefficients with every
sample's product of Bloch vectors ``r_w[P] = Tr(P rho_w)``, the wires split in two halves so the
intermediates stay ``samples x 4**(n/2) x observables`` (not ``4**(n-1)`` per sample).

A program with a non-Clifford permutation (Toffoli) or more than ``PAULI_WALK_MAX_WIRES`` wires walks in the
computational basis instead (``heisenberg``) and only its end is read in this basis (``to_pauli``).
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import torch

from ..._gates import typed_tensor
from .evolve import _Gather, _inverse, apply_matrix

PAULI_WALK_MAX_WIRES = 10
"""Above this many wires the Clifford images of the ``4**n`` Pauli strings are not tabulated (plan memory)."""

_CODE = {"I": 0, "X": 1, "Y": 2, "Z": 3}
_DIGIT_OF_XZ = np.array([0, 3, 1, 2])  # Pauli digit of (x bit, z bit) as index 2 x + z: I, Z, X, Y
_A1 = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [0, -1j, 1j, 0], [1, 0, 0, -1]])  # rows vec(P), column 2k + b
"""``A[P, 2k+b] = P[k, b]`` for P = I, X, Y, Z: ``(A vec(O^T))[P] = Tr(P O)``, and ``A^-1 = A^dagger / 2``."""


def pauli_index(word: dict, position: dict, n: int) -> int:
    """Row of the Pauli string ``word`` (wire -> letter) in an ``n``-wire Pauli vector.

    >>> pauli_index({"a": "Z"}, {"a": 0, "b": 1}, 2)
    12
    """
    return sum(_CODE[letter] << (2 * (n - 1 - position[w])) for w, letter in word.items())


def observable_coefficients(measurements, position: dict, n: int, dtype, device) -> torch.Tensor:
    """``[4**n, 1, M]`` real Pauli coefficients ``Tr(P O_m) / 2**n`` (the scale the Bloch vectors' product expects)
    of every measured Pauli sentence."""
    rows, cols, values = [], [], []
    for m, mp in enumerate(measurements):
        for word, c in mp.obs.pauli_rep.items():
            rows.append(pauli_index(dict(word), position, n))
            cols.append(m)
            values.append(typed_tensor(c, dtype, device).reshape(()))
    o = torch.zeros(1 << (2 * n), len(measurements), dtype=dtype, device=device)
    index = (torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device))
    return o.index_put(index, torch.stack(values), accumulate=True).reshape(1 << (2 * n), 1, len(measurements))


def _pauli_basis(k: int, dtype, device) -> torch.Tensor:
    return torch.as_tensor(reduce(np.kron, [_A1] * k), dtype=dtype, device=device)


def _interleaved(s: torch.Tensor, k: int) -> torch.Tensor:
    """A ``[4**k, 4**k]`` superoperator with ket bits then bra bits re-indexed wire by wire (ket, bra) pairs."""
    order = [j for w in range(k) for j in (w, k + w)]
    t = s.reshape((2,) * (4 * k)).permute(*order, *(2 * k + j for j in order))
    return t.reshape(1 << (2 * k), 1 << (2 * k))


def unitary_superoperator(u: torch.Tensor) -> torch.Tensor:
    """``U (x) conj(U)`` of a ``[D, D]`` unitary, ket bits then bra bits."""
    d = u.shape[-1]
    return (u[:, None, :, None] * u.conj()[None, :, None, :]).reshape(d * d, d * d)


def transfer_back(s: torch.Tensor, k: int, interleaved: bool) -> torch.Tensor:
    """The real matrix stepping Pauli coefficients back through superoperator ``s`` on ``k`` wires:
    ``Re(A S^T A^dagger) / 2**k``."""
    if not interleaved:
        s = _interleaved(s, k)
    a = _pauli_basis(k, s.dtype, s.device)
    return (a @ s.mT @ a.mH).real / (1 << k)


def clifford_images(src: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """For the basis permutation ``U: psi'[x] = vals[x] psi[src[x]]`` on ``n`` wires, ``(rows, signs)`` with
    ``U P U^dagger = signs[P] P'`` and ``P' = rows[P]`` for every Pauli string ``P``; None where ``U`` is not
    Clifford (some ``U P U^dagger`` is no Pauli string).

    ``P = i^(x.z) X^x Z^z`` maps ``|y>`` to ``i^(x.z) (-1)^(z.y) |y ^ x>``, so ``U P U^dagger |t>`` is
    ``c(t) |inv[src[t] ^ x]>`` with ``c(t) = conj(vals[t]) i^(x.z) (-1)^(z.src[t]) vals[inv[src[t] ^ x]]``. A Pauli
    ``phi i^(x'.z') X^x' Z^z'`` has ``x' = target(0)``, ``(-1)^(z'_j) = c(e_j) / c(0)`` and ``phi = c(0) / i^(x'.z')``:
    the generators X_j, Z_j are checked on every basis state (then U is Clifford), the rest read at n + 1 of them.
    """
    size = 1 << n
    inv = np.empty(size, dtype=np.int64)
    inv[src] = np.arange(size)
    vals = np.asarray(vals, dtype=complex)

    def coefficient(t, x, z):
        s = src[t]
        sign = 1 - 2 * _parity(z & s)
        return np.conj(vals[t]) * (1j ** _popcount(x & z)) * sign * vals[inv[s ^ x]], inv[s ^ x]

    every = np.arange(size)
    for j in range(n):  # generators on every basis state
        for x, z in ((1 << j, 0), (0, 1 << j)):
            c, target = coefficient(every, x, z)
            shift = target ^ every
            z_img = _z_bits(c, n)
            if z_img is None or (shift != shift[0]).any():
                return None
            parity = 1 - 2 * _parity(every & z_img)
            if not np.allclose(c, c[0] * parity, atol=1e-12):
                return None

    p = np.arange(size * size, dtype=np.int64)
    x, z = _xz_of_index(p, n)
    c0, x_img = coefficient(np.zeros_like(p), x, z)
    z_img = np.zeros_like(p)
    for j in range(n):
        cj, _ = coefficient(np.full_like(p, 1 << j), x, z)
        z_img |= (np.real(cj / c0) < 0).astype(np.int64) << j
    phi = c0 / (1j ** _popcount(x_img & z_img))
    if not np.allclose(phi.imag, 0, atol=1e-12) or not np.allclose(np.abs(phi.real), 1, atol=1e-12):
        return None  # pragma: no cover - a Clifford permutation's images are Hermitian Pauli strings
    return _index_of_xz(x_img, z_img, n), np.sign(phi.real)


def _popcount(v) -> np.ndarray:
    return np.bitwise_count(v).astype(np.int64)  # (uint8 by default: 1 - 2 * parity would wrap)


def _parity(v) -> np.ndarray:
    return _popcount(v) & 1


def _z_bits(c: np.ndarray, n: int) -> int | None:
    """The ``z`` of a diagonal sign pattern ``c[t] = c[0] (-1)^(z.t)`` read at the basis states ``e_j``."""
    if abs(c[0]) < 1e-12:
        return None
    z = 0
    for j in range(n):
        ratio = c[1 << j] / c[0]
        if not np.isclose(abs(ratio), 1, atol=1e-12):
            return None
        z |= int(ratio.real < 0) << j
    return z


def _xz_of_index(p: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``x``, ``z`` bit masks (bit ``n-1-w`` for wire ``w``) of Pauli rows ``p``."""
    x = np.zeros_like(p)
    z = np.zeros_like(p)
    for w in range(n):
        digit = (p >> (2 * (n - 1 - w))) & 3
        bit = n - 1 - w
        x |= ((digit == 1) | (digit == 2)).astype(np.int64) << bit
        z |= ((digit == 2) | (digit == 3)).astype(np.int64) << bit
    return x, z


def _index_of_xz(x: np.ndarray, z: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros_like(x)
    for w in range(n):
        bit = n - 1 - w
        out |= _DIGIT_OF_XZ[2 * ((x >> bit) & 1) + ((z >> bit) & 1)] << (2 * bit)
    return out


def to_pauli(o: torch.Tensor, n: int) -> torch.Tensor:
    """Complex ``vec(O^T)`` vectors ``[4**n, 1, M]`` (computational basis) as real coefficients ``Tr(P O) / 2**n``."""
    a = _pauli_basis(1, o.dtype, o.device) / 2
    for w in range(n):
        o = apply_matrix(o, a, [2 * w, 2 * w + 1], 2 * n, False)
    return o.real


def bloch_vectors(block: torch.Tensor) -> torch.Tensor:
    """``[..., 4]`` real vectors ``Tr(P rho)`` of ``[..., 2, 2]`` density matrices."""
    a = _pauli_basis(1, block.dtype, block.device)
    return (block.reshape(*block.shape[:-2], 4) @ a.conj().T).real


def product_expvals(o: torch.Tensor, bloch: list[torch.Tensor], n: int) -> torch.Tensor:
    """``[M, L]``: ``sum_P o[P, m] prod_w bloch[w][l, P_w]`` for Pauli coefficients ``o`` ``[4**n, 1, M]`` and one
    ``[L, 4]`` Bloch vector per wire, the wires split in two halves (two small Kronecker products, one GEMM)."""
    half = (n + 1) // 2

    def kron(vectors):
        out = vectors[0]
        for v in vectors[1:]:
            out = (out[:, :, None] * v[:, None, :]).reshape(out.shape[0], -1)
        return out

    left = kron(bloch[:half])  # [L, 4**half]
    m = o.shape[-1]
    t = left @ o.reshape(1 << (2 * half), -1)  # [L, 4**(n-half) * M]
    if half == n:
        return t.T
    right = kron(bloch[half:])  # [L, 4**(n-half)]
    return (t.reshape(t.shape[0], -1, m).mT @ right[:, :, None]).squeeze(-1).T


class PauliWalk:
    """One program's steps back in the Pauli basis: each step's transfer matrix built per call from its operand
    values, each Clifford permutation's gather found once."""

    def __init__(self, program):
        self.program = program
        self.n = program.n
        self.permutations: dict = {}
        self._gathers: dict = {}  # (step, dtype, device) -> the permutation's rows and signs as tensors
        self.applies = self.n <= PAULI_WALK_MAX_WIRES and all(
            self._permutation(step) is not None for step in program.steps if step[0] == "monomial"
        )

    def _permutation(self, step):
        key = id(step)
        if key not in self.permutations:
            self.permutations[key] = clifford_images(*step[1], self.n)
        return self.permutations[key]

    def walk(self, o: torch.Tensor, values) -> torch.Tensor:
        """Real Pauli coefficients ``[4**n, 1, M]`` stepped back through every step."""
        n, program = self.n, self.program
        steps = program.steps[::-1]
        i = 0
        while i < len(steps):
            kind, slots, wires = steps[i]
            if kind == "fused":  # a run of one-wire steps on distinct wires (they commute): applied by pairs
                run: dict[int, torch.Tensor] = {}
                while i < len(steps) and steps[i][0] == "fused" and steps[i][2][0] not in run:
                    fused, m = program._fused(values, steps[i][1])
                    m = m[0, 0]
                    run[steps[i][2][0]] = transfer_back(m if fused == "channel" else unitary_superoperator(m), 1, True)
                    i += 1
                o = self._apply_singles(o, run)
                continue
            i += 1
            if kind == "monomial":
                rows, signs = self._tensors(steps[i - 1], o)
                o = _signed_gather(o, rows, signs)
                continue
            m = program._operator(values, slots[0])[0, 0]
            r = transfer_back(m if kind == "channel" else unitary_superoperator(m), len(wires), interleaved=False)
            o = apply_matrix(o, r.to(o.dtype), [q for w in wires for q in (2 * w, 2 * w + 1)], 2 * n, False)
        return o

    def _apply_singles(self, o: torch.Tensor, run: dict) -> torch.Tensor:
        """One-wire transfer matrices on distinct wires; neighbours as one ``16 x 16`` Kronecker product (half
        the passes over the state: these small products are memory-bound)."""
        wires = sorted(run)
        j = 0
        while j < len(wires):
            w = wires[j]
            if j + 1 < len(wires) and wires[j + 1] == w + 1:
                m, positions, j = torch.kron(run[w], run[w + 1]), [2 * w, 2 * w + 1, 2 * w + 2, 2 * w + 3], j + 2
            else:
                m, positions, j = run[w], [2 * w, 2 * w + 1], j + 1
            o = apply_matrix(o, m.to(o.dtype), positions, 2 * self.n, False)
        return o

    def _tensors(self, step, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = (id(step), o.dtype, str(o.device))
        hit = self._gathers.get(key)
        if hit is None:
            rows, signs = self._permutation(step)
            hit = self._gathers[key] = (torch.as_tensor(rows, device=o.device), torch.as_tensor(signs, dtype=o.dtype, device=o.device))
        return hit


def _signed_gather(o: torch.Tensor, rows: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """``o'[P] = signs[P] o[rows[P]]``: the step back through ``U`` with ``U P U^dagger = signs[P] rows[P]``."""
    return _Gather.apply(o, 0, rows, _inverse(rows)) * signs.reshape(-1, 1, 1)

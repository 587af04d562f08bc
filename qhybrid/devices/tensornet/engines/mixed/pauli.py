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

import functools
from functools import reduce

import numpy as np
import torch

from ...._constants import literal, on_device
from ..._gates import typed_tensor
from .coefficients import real_coefficient
from .evolve import _Gather, _inverse, apply_matrix

PAULI_WALK_MAX_WIRES = 12
"""Above this many wires the Clifford images of the ``4**n`` Pauli strings are not tabulated (plan memory: 24
bytes a string per permutation step, 400 MB each at 12 wires)."""

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


def observable_terms(measurements, position: dict, n: int, dtype, device) -> tuple[np.ndarray, torch.Tensor]:
    """The measured Pauli sentences as sorted keys ``m * 4**n + P`` (observable ``m`` holds string ``P``) and their
    real coefficients ``[K]`` ``Tr(P O_m) / 2**n`` (the scale the Bloch vectors' product expects)."""
    keys, coeffs = [], []
    for m, mp in enumerate(measurements):
        for word, c in mp.obs.pauli_rep.items():
            keys.append((m << (2 * n)) + pauli_index(dict(word), position, n))
            coeffs.append(real_coefficient(c))
    unique, at = _term_index(tuple(keys))
    if all(isinstance(c, (int, float)) for c in coeffs):  # fixed coefficients: made once per device
        values = literal(tuple(float(c) for c in coeffs), device, dtype)
    else:
        values = torch.stack([typed_tensor(c, dtype, device).reshape(()) for c in coeffs])
    coef = torch.zeros(len(unique), dtype=dtype, device=device)
    return unique, coef.index_put((on_device(at, device),), values, accumulate=True)


@functools.lru_cache(maxsize=256)
def _term_index(keys: tuple) -> tuple[np.ndarray, torch.Tensor]:
    """The sorted distinct keys and each key's place among them (a host tensor, kept per device by ``on_device``)."""
    unique, at = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
    return unique, torch.as_tensor(at)


def observable_coefficients(measurements, position: dict, n: int, dtype, device) -> torch.Tensor:
    """``[4**n, 1, M]`` real Pauli coefficients of every measured Pauli sentence (``observable_terms``, dense)."""
    keys, coef = observable_terms(measurements, position, n, dtype, device)
    index = (torch.as_tensor(keys & ((1 << (2 * n)) - 1), device=device), torch.as_tensor(keys >> (2 * n), device=device))
    o = coef.new_zeros(1 << (2 * n), len(measurements)).index_put(index, coef)
    return o.reshape(1 << (2 * n), 1, len(measurements))


@functools.lru_cache(maxsize=64)
def _pauli_basis(k: int, dtype, device) -> torch.Tensor:
    """The ``4**k``-square change of basis, made once per size, dtype and device (never written)."""
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
    coefficient = _conjugation(src, vals, n)
    if not _generators_map_to_paulis(coefficient, n):
        return None
    h = n // 2  # strings on the first h wires and on the rest: the tables' halves, combined by broadcasting
    high = _images_of(np.arange(1 << (2 * h), dtype=np.int64) << (2 * (n - h)), n, coefficient)
    low = _images_of(np.arange(1 << (2 * (n - h)), dtype=np.int64), n, coefficient)
    if high is None or low is None:
        return None  # pragma: no cover - a Clifford permutation's images are Hermitian Pauli strings
    return _products(high, low, n)


def is_clifford(src: np.ndarray, vals: np.ndarray, n: int) -> bool:
    """Whether the basis permutation ``(src, vals)`` is Clifford (its generators' images checked on every basis
    state: ``O(n 2**n)``, without building ``clifford_images``' ``4**n`` tables)."""
    return _generators_map_to_paulis(_conjugation(src, vals, n), n)


def _conjugation(src: np.ndarray, vals: np.ndarray, n: int):
    """``coefficient(t, x, z)``: ``(c(t), target)`` of ``U P(x, z) U^dagger |t> = c(t) |target>`` (see
    ``clifford_images``)."""
    size = 1 << n
    inv = np.empty(size, dtype=np.int64)
    inv[src] = np.arange(size)
    vals = np.asarray(vals, dtype=complex)

    def coefficient(t, x, z):
        s = src[t]
        sign = 1 - 2 * _parity(z & s)
        return np.conj(vals[t]) * (1j ** _popcount(x & z)) * sign * vals[inv[s ^ x]], inv[s ^ x]

    return coefficient


def _generators_map_to_paulis(coefficient, n: int) -> bool:
    every = np.arange(1 << n)
    for j in range(n):  # generators on every basis state
        for x, z in ((1 << j, 0), (0, 1 << j)):
            c, target = coefficient(every, x, z)
            shift = target ^ every
            z_img = _z_bits(c, n)
            if z_img is None or (shift != shift[0]).any():
                return False
            parity = 1 - 2 * _parity(every & z_img)
            if not np.allclose(c, c[0] * parity, atol=1e-12):
                return False
    return True


def _images_of(p: np.ndarray, n: int, coefficient) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(x', z', sign)`` of ``U P U^dagger = sign P(x', z')`` for the Pauli rows ``p`` (read at n + 1 basis states)."""
    x, z = _xz_of_index(p, n)
    c0, x_img = coefficient(np.zeros_like(p), x, z)
    z_img = np.zeros_like(p)
    for j in range(n):
        cj, _ = coefficient(np.full_like(p, 1 << j), x, z)
        z_img |= (np.real(cj / c0) < 0).astype(np.int64) << j
    phi = c0 / (1j ** _popcount(x_img & z_img))
    if not np.allclose(phi.imag, 0, atol=1e-12) or not np.allclose(np.abs(phi.real), 1, atol=1e-12):
        return None  # pragma: no cover
    return x_img, z_img, np.sign(phi.real).astype(np.int8)


def _products(high, low, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and signs of every ``P = A B`` (``A`` on the first wires, ``B`` on the rest: ``U P U^dagger`` is the
    product of their images). ``P(x1, z1) P(x2, z2) = i^e P(x1 ^ x2, z1 ^ z2)`` with
    ``e = x1.z1 + x2.z2 + 2 z1.x2 - x.z`` (``P(x, z) = i^(x.z) X^x Z^z``); ``e`` is 0 or 2 mod 4 for commuting images.
    The tables are ``4**n`` long: built as int32 where the bits fit, a few ``4**n`` arrays at once."""
    (xh, zh, sh), (xl, zl, sl) = high, low
    small = np.int32 if n < 31 else np.int64
    xh, zh, xl, zl = (a.astype(small) for a in (xh, zh, xl, zl))
    x = xh[:, None] ^ xl[None, :]
    z = zh[:, None] ^ zl[None, :]
    e = (_popcount(xh & zh)[:, None] + _popcount(xl & zl)[None, :]).astype(np.int8)
    e += 2 * _popcount(zh[:, None] & xl[None, :]).astype(np.int8)
    e -= _popcount(x & z).astype(np.int8)
    signs = (sh[:, None] * sl[None, :]) * (1 - (e & 3)).astype(np.int8)
    del e
    return _index_of_xz(x.ravel(), z.ravel(), n), signs.ravel()


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
    """Pauli rows of the bit masks ``x``, ``z``: each wire's digit ``I, Z, X, Y`` of its ``(x, z)`` bits, read from
    a table of every ``(x, z)`` on up to ``_XZ_TABLE_WIRES`` wires at a time (a few passes, not one per wire)."""
    out = np.zeros(x.shape, dtype=np.int64)
    for lo in range(0, n, _XZ_TABLE_WIRES):
        k = min(_XZ_TABLE_WIRES, n - lo)
        table = _xz_table(k)
        part = (((x >> lo) & ((1 << k) - 1)).astype(np.int64) << k) | ((z >> lo) & ((1 << k) - 1))
        out |= table[part] << (2 * lo)
    return out


_XZ_TABLE_WIRES = 6
"""Wires per lookup in ``_index_of_xz`` (a ``4**6``-entry table)."""


def _xz_table(k: int) -> np.ndarray:
    """``table[x << k | z]``: the Pauli row of bit masks ``x``, ``z`` on ``k`` wires (bit ``j``: digit ``4**j``)."""
    every = np.arange(1 << (2 * k), dtype=np.int64)
    x, z = every >> k, every & ((1 << k) - 1)
    out = np.zeros_like(every)
    for j in range(k):
        out |= _DIGIT_OF_XZ[2 * ((x >> j) & 1) + ((z >> j) & 1)] << (2 * j)
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
    values, each Clifford permutation's gather table built at its first use."""

    def __init__(self, program):
        self.program = program
        self.n = self.program.n
        self.permutations: dict = {}
        self._gathers: dict = {}  # (step, dtype, device) -> the permutation's rows and signs as tensors
        self._starts: dict = {}  # measured strings -> their sparse prefix (sparse_walk.sparse_start)
        self.applies = self.n <= PAULI_WALK_MAX_WIRES and all(
            is_clifford(*step[1], self.n) for step in program.steps if step[0] == "monomial"
        )

    def _permutation(self, step):
        key = id(step)
        if key not in self.permutations:
            self.permutations[key] = clifford_images(*step[1], self.n)
        return self.permutations[key]

    def walk(self, o: torch.Tensor, values) -> torch.Tensor:
        """Real Pauli coefficients ``[4**n, 1, M]`` stepped back through every step."""
        return self.apply(o, self.operators(values, o.dtype))

    def operators(self, values, dtype) -> list[tuple]:
        """The steps back in walking order, each ``("run", {wire: r})`` (one-wire transfer matrices on distinct
        wires: they commute), ``("matrix", r, wires, trace_preserving)`` or ``("gather", step)``."""
        program = self.program
        steps = program.steps[::-1]
        ops: list[tuple] = []
        i = 0
        while i < len(steps):
            kind, slots, wires = steps[i]
            if kind == "fused":
                run: dict[int, torch.Tensor] = {}
                run_slots: dict[int, tuple] = {}
                while i < len(steps) and steps[i][0] == "fused" and steps[i][2][0] not in run:
                    fused, m = program._fused(values, steps[i][1])
                    m = m[0, 0]
                    r = transfer_back(m if fused == "channel" else unitary_superoperator(m), 1, True)
                    run[steps[i][2][0]] = r.to(dtype)
                    run_slots[steps[i][2][0]] = steps[i][1]
                    i += 1
                ops.append(("run", run, run_slots))
                continue
            i += 1
            if kind == "monomial":
                ops.append(("gather", steps[i - 1], None))
                continue
            m = program._operator(values, slots[0])[0, 0]
            r = transfer_back(m if kind == "channel" else unitary_superoperator(m), len(wires), interleaved=False)
            ops.append(("matrix", r.to(dtype), (tuple(wires), slots)))
        return ops

    def apply(self, o: torch.Tensor, ops: list[tuple]) -> torch.Tensor:
        """``o`` (dense ``[4**n, 1, M]``) stepped back through ``operators``; neighbouring one-wire steps of a run
        as one ``16 x 16`` Kronecker product (these small products are memory-bound: half the passes)."""
        n = self.n
        for kind, a, b in ops:
            if kind == "gather":
                o = _signed_gather(o, *self._tensors(a, o.dtype, o.device))
            elif kind == "run":
                for m, positions in _paired(a):  # transfer matrices are real (``transfer_back``)
                    o = apply_matrix(o, m, positions, 2 * n, False, real=True)
            else:
                o = apply_matrix(o, a, [q for w in b[0] for q in (2 * w, 2 * w + 1)], 2 * n, False, real=True)
        return o

    def table_bytes(self) -> int:
        """Memory of the Clifford gather tables (rows, their inverse, signs: 24 bytes a Pauli string each)."""
        return sum(24 << (2 * self.n) for step in self.program.steps if step[0] == "monomial")

    def _tensors(self, step, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (id(step), dtype, str(device))
        hit = self._gathers.get(key)
        if hit is None:
            rows, signs = self._permutation(step)
            hit = self._gathers[key] = (torch.as_tensor(rows, device=device), torch.as_tensor(signs, dtype=dtype, device=device))
            self.permutations.pop(id(step), None)  # (the numpy copy is no longer needed)
        return hit


def _paired(run: dict) -> list[tuple[torch.Tensor, list[int]]]:
    """One-wire transfer matrices on distinct wires, neighbours paired as one Kronecker product."""
    wires = sorted(run)
    out, j = [], 0
    while j < len(wires):
        w = wires[j]
        if j + 1 < len(wires) and wires[j + 1] == w + 1:
            out.append((torch.kron(run[w], run[w + 1]), [2 * w, 2 * w + 1, 2 * w + 2, 2 * w + 3]))
            j += 2
        else:
            out.append((run[w], [2 * w, 2 * w + 1]))
            j += 1
    return out


def _signed_gather(o: torch.Tensor, rows: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """``o'[P] = signs[P] o[rows[P]]``: the step back through ``U`` with ``U P U^dagger = signs[P] rows[P]``."""
    return _Gather.apply(o, 0, rows, _inverse(rows)) * signs.reshape(-1, 1, 1)

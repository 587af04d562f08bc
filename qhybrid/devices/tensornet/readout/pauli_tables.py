"""A Pauli sentence (a molecular Hamiltonian: 10^2-10^4 words) as a few tables, applied in a few batched ops.

A Pauli word P with flip mask ``f`` (its X and Y wires) and sign mask ``z`` (its Z and Y wires) maps a basis
state to one other: ``P|x> = i^(#Y) (-1)^(x.z) |x ^ f>``. Words sharing a flip mask therefore move amplitudes
the same way, and a sentence ``H = sum_k c_k P_k`` acts as

    (H psi)[y] = sum_g E[g, y] * psi[y ^ f_g],   E[g, y] = sum_{k in group g} c_k i^(#Y_k) (-1)^((y ^ f_g).z_k)

one gather of ``psi`` by a ``[G, 2**n]`` index table (G flip groups: 156 for H2O's 1,079 words), one multiply
by ``E`` and one sum, whatever the number of words; with constant coefficients, one product with the same
entries as a CSR matrix (``PauliTable.sparse``). Since ``(-1)^((y ^ f).z) = (-1)^(f.z) (-1)^(y.z)``, each
row of ``E`` is the Walsh-Hadamard transform of a vector holding the group's (phased) coefficients at their
sign masks: ``E`` follows from the coefficient vector by a scatter and ``n`` butterfly steps, all linear, so
trainable coefficients get their gradients (the words' expectation values) from torch. Constant
coefficients make ``E`` once per table, dtype and device.

``<psi|H|psi>`` is one autograd node (``PauliExpval``) whose backward hands the state the one vector
``2 H psi`` (the cotangent of a Hermitian form): the adjoint walk then runs once, not once per word.

>>> import pennylane as qml, torch
>>> H = qml.dot([0.5, -0.25], [qml.X(0) @ qml.Y(1), qml.Z(1)])
>>> table = pauli_table(H.pauli_rep, {0: 0, 1: 1})
>>> psi = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.complex128)
>>> float(pauli_expval(psi, table, table.coefficients(H.pauli_rep)))
-0.25
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import torch

TABLE_CHUNK_ELEMENTS = 1 << 22
"""H psi is summed over flip groups in chunks of at most this many gathered amplitudes per state (memory)."""

TABLE_MAX_ELEMENTS = 1 << 24
"""Above this many entries of the ``[G, 2**n]`` tables a sentence is applied word by word (memory)."""

TABLES_KEPT = 32
"""Pauli tables remembered by their sentence's words (least recently used dropped)."""

_TABLES: OrderedDict = OrderedDict()


class PauliTable:
    """The tables of one sentence's words on ``n`` wires (wire position 0 is the most significant bit).

    ``groups``: flip masks, one per group; ``index``: ``[G, 2**n]`` positions ``y ^ f_g``; per word its group,
    its sign mask and its phase ``i^(#Y) (-1)^(f.z)`` (the factor its coefficient takes into ``E``)."""

    def __init__(self, words, positions: dict, n: int):
        self.n = n
        self.words = list(words)
        flips, signs, phases = [], [], []
        for word in self.words:
            f = z = ny = 0
            for wire, letter in word.items():
                bit = 1 << (n - 1 - positions[wire])
                if letter in "XY":
                    f |= bit
                if letter in "YZ":
                    z |= bit
                ny += letter == "Y"
            flips.append(f)
            signs.append(z)
            phases.append(1j**ny * (-1) ** bin(f & z).count("1"))
        self.groups, group_of = np.unique(np.asarray(flips, dtype=np.int64), return_inverse=True)
        self.word_group = torch.as_tensor(group_of.reshape(-1))
        self.word_sign = torch.as_tensor(np.asarray(signs, dtype=np.int64))
        self.word_phase = np.asarray(phases, dtype=complex)
        self._memo: dict = {}

    @property
    def index(self) -> torch.Tensor:
        """``[G, 2**n]``: ``y ^ f_g`` (made at first use: constant coefficients need only ``sparse``)."""
        if "index" not in self._memo:
            x = np.arange(1 << self.n, dtype=np.int64)
            self._memo["index"] = torch.as_tensor(x[None, :] ^ self.groups[:, None])
        return self._memo["index"]

    def sparse(self, E: torch.Tensor) -> torch.Tensor:
        """H as a ``[2**n, 2**n]`` CSR matrix with the weights ``E`` (constant ones: made once per ``E``). Row
        ``y`` holds ``E[g, y]`` at column ``y ^ f_g``: one sparse product applies H, 5-10x faster than the gather,
        multiply and sum of ``[G, 2**n]`` temporaries (H2O without active space: 322 groups, 2**14 rows)."""
        key = ("csr", id(E))
        hit = self._memo.get(key)
        if hit is None or hit[0] is not E:
            N, G = 1 << self.n, len(self.groups)
            x = np.arange(N, dtype=np.int64)
            col = torch.as_tensor((x[:, None] ^ self.groups[None, :]).reshape(-1), device=E.device)
            crow = torch.arange(0, N * G + 1, G, device=E.device)
            with warnings.catch_warnings():  # "sparse CSR support is in beta": products are all we use
                warnings.simplefilter("ignore")
                A = torch.sparse_csr_tensor(crow, col, E.t().reshape(-1), (N, N))
            hit = self._memo[key] = (E, A)
        return hit[1]

    def coefficients(self, ps) -> list:
        """The sentence's coefficients in this table's word order (numbers or tensors)."""
        values = list(ps.values())
        return values if len(values) == len(self.words) and list(ps) == self.words else [ps[w] for w in self.words]

    def on(self, what: str, t: torch.Tensor, device) -> torch.Tensor:
        """A table tensor on ``device``, copied there once."""
        key = (what, str(device))
        if key not in self._memo:
            self._memo[key] = t.to(device)
        return self._memo[key]

    def weights(self, coeffs, dtype, device) -> torch.Tensor:
        """``E`` (``[G, 2**n]``, complex ``dtype``) for these coefficients: made once when they are numbers,
        by differentiable torch ops when some is a tensor."""
        if not any(isinstance(c, torch.Tensor) for c in coeffs):
            key = ("E", tuple(complex(c) for c in coeffs), dtype, str(device))
            if key not in self._memo:
                c = np.asarray([complex(c) for c in coeffs]) * self.word_phase
                where = (self.word_group.numpy(), self.word_sign.numpy())
                parts = []
                for part in (c.real, c.imag):  # real Hamiltonians (chemistry): no Y-odd words, E is real
                    full = np.zeros((len(self.groups), 1 << self.n))
                    np.add.at(full, where, part)
                    parts.append(_wht_np(full, self.n) if part.any() else None)
                E = torch.as_tensor(parts[0] if parts[0] is not None else np.zeros_like(full))
                if parts[1] is not None:
                    E = torch.complex(E, torch.as_tensor(parts[1]))
                if len(self._memo) > 8:  # weights of many coefficient sets: keep the last ones only
                    for k in [k for k in self._memo if k[0] in ("E", "csr")]:
                        del self._memo[k]
                real = torch.empty((), dtype=dtype).real.dtype
                self._memo[key] = E.to(dtype=dtype if E.is_complex() else real, device=device)
            return self._memo[key]
        real = torch.empty((), dtype=dtype).real.dtype
        c = torch.stack([torch.as_tensor(x, device=device).to(real) for x in coeffs])
        phase = self.on("phase", torch.as_tensor(self.word_phase).to(dtype), device)
        flat = self.on("flat", self.word_group * (1 << self.n) + self.word_sign, device)
        full = torch.zeros(len(self.groups) << self.n, dtype=dtype, device=device)
        full = full.index_add(0, flat, c.to(dtype) * phase)
        return _wht(full.reshape(len(self.groups), 1 << self.n), self.n)


def _wht_np(a: np.ndarray, n: int) -> np.ndarray:
    """Walsh-Hadamard transform of each row: ``out[g, y] = sum_z a[g, z] (-1)^(y.z)``, butterflies in place."""
    a = a.copy()
    h = 1
    while h < (1 << n):
        v = a.reshape(a.shape[0], -1, 2, h)
        x = v[:, :, 0, :].copy()
        v[:, :, 0, :] += v[:, :, 1, :]
        np.subtract(x, v[:, :, 1, :], out=v[:, :, 1, :])
        h *= 2
    return a


def _wht(a: torch.Tensor, n: int) -> torch.Tensor:
    t = a.reshape(a.shape[0], *(2,) * n)
    for axis in range(1, n + 1):
        u, v = t.unbind(axis)
        t = torch.stack([u + v, u - v], axis)
    return t.reshape(a.shape)


def pauli_table(ps, positions: dict) -> PauliTable | None:
    """The table of sentence ``ps`` (wires mapped to positions by ``positions``; None where ``table_applies``
    says no), remembered by the sentence object (a cached tape measures the same one every call) and by its
    words."""
    n = len(positions)
    wires = tuple(positions.items())
    hit = _TABLES.get(("id", id(ps), wires))
    if hit is not None and hit[0] is ps:
        return hit[1]
    key = (tuple(ps), wires)
    table = _TABLES.get(key)
    if table is None and table_applies(ps, n):
        table = _TABLES[key] = PauliTable(ps, positions, n)
    _TABLES[("id", id(ps), wires)] = (ps, table)  # the sentence is held: its id is not reused meanwhile
    while len(_TABLES) > TABLES_KEPT:
        _TABLES.popitem(last=False)
    return table


def table_applies(ps, n: int) -> bool:
    """Whether the table path measures sentence ``ps`` on ``n`` wires: some word not of Z letters only (those
    have their own sign-matrix path), real coefficients, and index tables of a sane size."""
    if not ps or all(set(w.values()) <= {"Z"} for w in ps):
        return False
    flips = {frozenset(w for w, letter in word.items() if letter in "XY") for word in ps}
    if len(flips) << n > TABLE_MAX_ELEMENTS:
        return False
    for c in ps.values():
        if isinstance(c, torch.Tensor) and (c.is_complex() or c.numel() != 1):
            return False
        if isinstance(c, complex) and c.imag != 0:
            return False
    return True


def apply_sparse(psi: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``H psi`` for states ``psi`` of shape ``[L, 2**n]`` by the CSR matrix ``A`` (real ``A``: the real and
    imaginary parts of every state as the columns of one real product)."""
    L, N = psi.shape
    if A.is_complex():
        return (A @ psi.t()).t()
    x = torch.view_as_real(psi).permute(1, 0, 2).reshape(N, 2 * L)
    return torch.view_as_complex((A @ x).reshape(N, L, 2).permute(1, 0, 2).contiguous())


def apply_table(psi: torch.Tensor, table: PauliTable, E: torch.Tensor) -> torch.Tensor:
    """``H psi`` for states ``psi`` of shape ``[L, 2**n]`` (differentiable torch ops)."""
    index = table.on("index", table.index, psi.device)
    G, N = index.shape
    step = max(1, TABLE_CHUNK_ELEMENTS // max(N * psi.shape[0], 1))
    out = None
    for g0 in range(0, G, step):
        part = (psi[:, index[g0 : g0 + step]] * E[g0 : g0 + step]).sum(1)
        out = part if out is None else out + part
    return out


class PauliExpval(torch.autograd.Function):
    """``Re <psi|H|psi>`` per row of ``psi`` (``[L, 2**n]``) with ``H`` given by ``E``; backward: ``2 g H psi``
    for the state (H is Hermitian: real coefficients), ``g psi[y] conj(psi[y ^ f_g])`` for ``E``."""

    @staticmethod
    def forward(ctx, psi, E, table):
        with torch.no_grad():
            phi = apply_table(psi, table, E) if E.requires_grad else apply_sparse(psi, table.sparse(E))
        ctx.table = table
        ctx.save_for_backward(psi, E, phi)
        return (psi.conj() * phi).real.sum(-1)

    @staticmethod
    def backward(ctx, g):
        psi, E, phi = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph (Hessians): H psi again, recorded, so this backward differentiates
            phi = apply_table(psi, ctx.table, E)
        g_psi = g_E = None
        if ctx.needs_input_grad[0]:
            g_psi = (2 * g)[:, None].to(phi.dtype) * phi
        if ctx.needs_input_grad[1]:
            index = ctx.table.on("index", ctx.table.index, psi.device)
            g_E = ((g[:, None].to(psi.dtype) * psi)[:, None, :] * psi[:, index].conj()).sum(0)
            g_E = g_E if E.is_complex() else g_E.real
        return g_psi, g_E, None


def pauli_expval(psi: torch.Tensor, table: PauliTable, coeffs) -> torch.Tensor:
    """``<psi|H|psi>`` per row of ``psi`` (``[L, 2**n]``) for ``H = sum_k coeffs[k] P_k`` (real coefficients)."""
    E = table.weights(coeffs, psi.dtype, psi.device)
    if torch.is_grad_enabled() and (psi.requires_grad or E.requires_grad):
        return PauliExpval.apply(psi, E, table)
    phi = apply_table(psi, table, E) if E.requires_grad else apply_sparse(psi, table.sparse(E))
    return (psi.conj() * phi).real.sum(-1)

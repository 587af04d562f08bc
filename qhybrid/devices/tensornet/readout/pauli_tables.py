"""A Pauli sentence (a molecular Hamiltonian: 10^2-10^4 words) as a few tables, applied in a few batched ops.

A Pauli word P with flip mask ``f`` (its X and Y wires) and sign mask ``z`` (its Z and Y wires) maps a basis
state to one other: ``P|x> = i^(#Y) (-1)^(x.z) |x ^ f>``. Words sharing a flip mask therefore move amplitudes
the same way, and a sentence ``H = sum_k c_k P_k`` acts as

    (H psi)[y] = sum_g E[g, y] * psi[y ^ f_g],   E[g, y] = sum_{k in group g} c_k i^(#Y_k) (-1)^((y ^ f_g).z_k)

one product with a CSR matrix holding ``E[g, y]`` at ``(y, y ^ f_g)`` (``PauliTable.sparse``; G flip groups:
156 for H2O's 1,079 words), whatever the number of words. ``E`` is linear in the coefficient vector ``c``
and made from it by one sparse product (``PauliTable.weights_of``, see ``_factors``): once per table, dtype
and device for constant coefficients, every call for trainable ones, whose tables are the same.

``<psi|H|psi>`` is one autograd node (``PauliExpval``) with inputs the states and the coefficient vector.
Its backward hands the state the one vector ``2 H psi`` (the cotangent of a Hermitian form: the adjoint walk
runs once, not once per word), and the coefficients the words' expectation values, read off the state by
one gather and two sparse products (``PauliTable.word_expvals``).

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
_BY_ID: OrderedDict = OrderedDict()


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

    def on(self, what, make, device) -> torch.Tensor:
        """A table tensor on ``device`` (``make``: the tensor, or a function making it), copied there once."""
        key = (what, str(device))
        if key not in self._memo:
            self._memo[key] = (make() if callable(make) else make).to(device)
        return self._memo[key]

    def sparse(self, E: torch.Tensor, keep: bool = True) -> torch.Tensor:
        """H as a ``[2**n, 2**n]`` CSR matrix with the weights ``E`` (kept per ``E`` where ``keep``). Row ``y``
        holds ``E[g, y]`` at column ``y ^ f_g``: one sparse product applies H, 5-10x faster than the gather,
        multiply and sum of ``[G, 2**n]`` temporaries (H2O without active space: 322 groups, 2**14 rows)."""
        key = ("csr", id(E))
        hit = self._memo.get(key)
        if hit is None or hit[0] is not E:
            N, G = 1 << self.n, len(self.groups)
            col = self.on("col", lambda: torch.as_tensor(
                (np.arange(N, dtype=np.int64)[:, None] ^ self.groups[None, :]).reshape(-1)), E.device)
            crow = self.on("crow", lambda: torch.arange(0, N * G + 1, G), E.device)
            with warnings.catch_warnings():  # "sparse CSR support is in beta": products are all we use
                warnings.simplefilter("ignore")
                A = torch.sparse_csr_tensor(crow, col, E.t().reshape(-1), (N, N))
            if not keep:
                return A
            hit = self._memo[key] = (E, A)
        return hit[1]

    def coefficients(self, ps) -> list:
        """The sentence's coefficients in this table's word order (numbers or tensors)."""
        values = list(ps.values())
        return values if len(values) == len(self.words) and list(ps) == self.words else [ps[w] for w in self.words]

    # --- E and the words' expectation values, each one sparse product ----------------------------------
    # Split a basis index y into its high and low halves: (-1)^(y.z) = h[z_hi, y_hi] h[z_lo, y_lo] with h the
    # +-1 Hadamard matrices of the halves, so word k adds the rank-one block c_k A[k] (x) B[k] (A = h[z_hi],
    # B = h[z_lo]) to its group's row of E. All groups at once: E (as [G 2**nh, 2**nl]) = P @ (c[:, None] * B),
    # P sparse with A[k, hi] at (g_k 2**nh + hi, k); and the words' expectation values read
    # R[g, y] = conj(psi[y]) psi[y ^ f_g] back through P^T and B. O(K 2**n) multiply-adds either way (a
    # Walsh-Hadamard transform of every group's row costs O(G 2**n n): 60-70 ms of H2O's first call).
    def _halves(self) -> tuple[int, int]:
        nl = self.n // 2
        return self.n - nl, nl

    def _factors(self, dtype, device):
        """(P as CSR ``[G 2**nh, K]``, P^T as CSR ``[K, G 2**nh]``, B ``[K, 2**nl]``) in real ``dtype``."""
        key = ("factors", dtype, str(device))
        hit = self._memo.get(key)
        if hit is None:
            nh, nl = self._halves()
            z, g = self.word_sign.numpy(), self.word_group.numpy()
            A = _hadamard(nh)[z >> nl]  # [K, 2**nh]
            B = _hadamard(nl)[z & ((1 << nl) - 1)]  # [K, 2**nl]
            K, Nh = A.shape
            M = len(self.groups) * Nh
            cols = (g[:, None] * Nh + np.arange(Nh)[None, :]).reshape(-1)  # P^T's, word by word
            order = np.argsort(cols, kind="stable")
            crow = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=M))])
            with warnings.catch_warnings():  # "sparse CSR support is in beta": products are all we use
                warnings.simplefilter("ignore")
                P = torch.sparse_csr_tensor(torch.as_tensor(crow), torch.as_tensor(order // Nh),
                                            torch.as_tensor(A.reshape(-1)[order], dtype=dtype), (M, K), device=device)
                PT = torch.sparse_csr_tensor(torch.arange(0, K * Nh + 1, Nh), torch.as_tensor(cols),
                                             torch.as_tensor(A.reshape(-1), dtype=dtype), (K, M), device=device)
            hit = self._memo[key] = (P, PT, torch.as_tensor(B, dtype=dtype, device=device))
        return hit

    def _phases(self, dtype, device):
        """(real, imaginary) parts of the words' phases (each +-1 or +-i); the imaginary None when all real."""
        re = self.on(("phase re", dtype), lambda: torch.as_tensor(self.word_phase.real, dtype=dtype), device)
        im = None
        if self.word_phase.imag.any():
            im = self.on(("phase im", dtype), lambda: torch.as_tensor(self.word_phase.imag, dtype=dtype), device)
        return re, im

    def weights_of(self, c: torch.Tensor) -> torch.Tensor:
        """``E`` (``[G, 2**n]``) of the real coefficient vector ``c`` (``[K]``): real unless some word has an odd
        number of Y. No graph is recorded (``PauliExpval`` differentiates)."""
        P, _, B = self._factors(c.dtype, c.device)
        re, im = self._phases(c.dtype, c.device)
        shape = (len(self.groups), 1 << self.n)
        with torch.no_grad():
            E = (P @ ((c * re)[:, None] * B)).reshape(shape)
            if im is not None:
                E = torch.complex(E, (P @ ((c * im)[:, None] * B)).reshape(shape))
        return E

    def word_expvals(self, psi: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``sum_l g[l] <psi_l|P_k|psi_l>`` for every word ``k`` (real ``[K]``; ``psi``: ``[L, 2**n]``)."""
        index = self.on("index", lambda: self.index, psi.device)
        G, N = index.shape
        nh, nl = self._halves()
        _, PT, B = self._factors(g.dtype, psi.device)
        weighted = (g[:, None].to(psi.dtype) * psi).conj()
        step = max(1, TABLE_CHUNK_ELEMENTS // max(G * N, 1))
        R = None
        for l0 in range(0, psi.shape[0], step):  # R[g, y] = sum_l g_l conj(psi_l[y]) psi_l[y ^ f_g]
            part = (weighted[l0 : l0 + step, None, :] * psi[l0 : l0 + step][:, index]).sum(0)
            R = part if R is None else R + part
        Q = PT @ torch.view_as_real(R).reshape(G << nh, 2 << nl)
        w = (torch.view_as_complex(Q.reshape(-1, 1 << nl, 2)) * B).sum(-1)
        re, im = self._phases(g.dtype, psi.device)
        return w.real * re - w.imag * im if im is not None else w.real * re

    def weights(self, coeffs, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(``E``, the coefficient vector in the real dtype) for constant coefficients (numbers), made once per
        their values, dtype and device (a steady step makes no tensor from host data)."""
        key = ("E", tuple(complex(c) for c in coeffs), dtype, str(device))
        if key not in self._memo:
            if len(self._memo) > 24:  # weights of many coefficient sets: keep the last ones only
                for k in [k for k in self._memo if k[0] in ("E", "csr")]:
                    del self._memo[k]
            real = torch.empty((), dtype=dtype).real.dtype
            c = torch.tensor([complex(c).real for c in coeffs], dtype=torch.float64)
            E = self.weights_of(c)
            self._memo[key] = (E.to(dtype=dtype if E.is_complex() else real, device=device), c.to(real).to(device))
        return self._memo[key]

    def recorded_weights(self, c: torch.Tensor, dtype) -> torch.Tensor:
        """``E`` by recorded torch ops (a backward that records its own graph: higher derivatives)."""
        phase = self.on(("phase", dtype), lambda: torch.as_tensor(self.word_phase).to(dtype), c.device)
        flat = self.on("flat", lambda: self.word_group * (1 << self.n) + self.word_sign, c.device)
        full = torch.zeros(len(self.groups) << self.n, dtype=dtype, device=c.device)
        t = full.index_add(0, flat, c.to(dtype) * phase).reshape(len(self.groups), *(2,) * self.n)
        for axis in range(1, self.n + 1):  # Walsh-Hadamard butterflies
            u, v = t.unbind(axis)
            t = torch.stack([u + v, u - v], axis)
        return t.reshape(len(self.groups), 1 << self.n)


def _hadamard(b: int) -> np.ndarray:
    """The +-1 Sylvester-Hadamard matrix of ``b`` bits: ``h[z, y] = (-1)^popcount(z & y)``."""
    x = np.arange(1 << b, dtype=np.int64)
    v = x[:, None] & x[None, :]
    parity = np.zeros_like(v)
    while v.any():
        parity ^= v & 1
        v >>= 1
    return 1.0 - 2.0 * parity


def pauli_table(ps, positions: dict, z_only: bool = False) -> PauliTable | None:
    """The table of sentence ``ps`` (wires mapped to positions by ``positions``; None where ``table_applies``
    says no), remembered by the sentence object (a cached tape measures the same one every call) and by its
    words."""
    n = len(positions)
    wires = tuple(positions.items())
    by_id = ("id", id(ps), wires, z_only)
    hit = _BY_ID.get(by_id)
    if hit is not None and hit[0] is ps:
        return hit[1]
    key = (tuple(ps), wires, z_only)
    table = _TABLES.get(key)
    if table is None:
        if table_applies(ps, n, z_only):
            table = _TABLES[key] = PauliTable(ps, positions, n)
            while len(_TABLES) > TABLES_KEPT:
                _TABLES.popitem(last=False)
    else:
        _TABLES.move_to_end(key)
    # the sentence is held: its id is not reused meanwhile. Apart from the tables: a step whose sentences are new
    # objects (a tape rebuilt every call) adds one a call, and those evicted the tables themselves every 32 steps
    _BY_ID[by_id] = (ps, table)
    while len(_BY_ID) > TABLES_KEPT:
        _BY_ID.popitem(last=False)
    return table


def table_applies(ps, n: int, z_only: bool = False) -> bool:
    """Whether the table path measures sentence ``ps`` on ``n`` wires: some word not of Z letters only (those
    have their own sign-matrix path, unless ``z_only``), real coefficients, and index tables of a sane size."""
    if not ps or not z_only and all(set(w.values()) <= {"Z"} for w in ps):
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
    """``Re <psi|H|psi>`` per row of ``psi`` (``[L, 2**n]``) for ``H = sum_k c[k] P_k`` (real ``c``, ``[K]``).
    Backward: ``2 g H psi`` for the state (H is Hermitian), the words' expectation values for ``c``."""

    @staticmethod
    def forward(ctx, psi, c, table, E):
        with torch.no_grad():
            phi = apply_sparse(psi, table.sparse(E, keep=not c.requires_grad))
        ctx.table = table
        ctx.save_for_backward(psi, c, phi)
        return (psi.conj() * phi).real.sum(-1)

    @staticmethod
    def backward(ctx, g):
        psi, c, phi = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph (Hessians): the form again by recorded ops, differentiated
            need = ctx.needs_input_grad[:2]
            with torch.enable_grad():
                phi = apply_table(psi, ctx.table, ctx.table.recorded_weights(c, psi.dtype))
                value = (psi.conj() * phi).real.sum(-1)
                grads = iter(torch.autograd.grad(value, [x for x, n in zip((psi, c), need) if n], g, create_graph=True))
            return (next(grads) if need[0] else None, next(grads) if need[1] else None, None, None)
        g_psi = (2 * g)[:, None].to(phi.dtype) * phi if ctx.needs_input_grad[0] else None
        g_c = ctx.table.word_expvals(psi, g.to(c.dtype)) if ctx.needs_input_grad[1] else None
        return g_psi, g_c, None, None


def pauli_expval(psi: torch.Tensor, table: PauliTable, coeffs) -> torch.Tensor:
    """``<psi|H|psi>`` per row of ``psi`` (``[L, 2**n]``) for ``H = sum_k coeffs[k] P_k``: ``coeffs`` real
    numbers (their ``E`` made once), or tensors (one ``[K]`` tensor or a list of scalars: trainable)."""
    real = psi.real.dtype
    if isinstance(coeffs, torch.Tensor) or any(isinstance(c, torch.Tensor) for c in coeffs):
        c = coeffs if isinstance(coeffs, torch.Tensor) else torch.stack(
            [torch.as_tensor(x, device=psi.device).real.to(real) for x in coeffs])
        c = c.to(device=psi.device, dtype=real)
        E = table.weights_of(c.detach())
        E = E.to(psi.dtype) if E.is_complex() else E
        keep = False
    else:
        E, c = table.weights(coeffs, psi.dtype, psi.device)
        keep = True
    if torch.is_grad_enabled() and (psi.requires_grad or c.requires_grad):
        return PauliExpval.apply(psi, c, table, E)
    return (psi.conj() * apply_sparse(psi, table.sparse(E, keep=keep))).real.sum(-1)

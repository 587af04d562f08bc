"""Diagonal runs of the state-vector program: many diagonal gates as one element-wise phase multiply.

Every angle gate of a run (``RZ``, ``PhaseShift``, ``CRZ``, ``ControlledPhaseShift``, ``IsingZZ``,
``MultiRZ``, Z-only ``PauliRot``) multiplies basis state ``x`` by ``exp(i theta_g a_g(x))``, where
``a_g(x)`` depends only on the bits of ``x`` on the gate's wires (``IsingZZ``: ``-z_u(x) z_v(x) / 2``).
At plan time these patterns become one real table ``T[g, x]`` (``[gates, 2**n]``); parameter-free
diagonal gates (``Z``, ``S``, ``T``, ``CZ``, ``CCZ`` ...) become one constant angle vector ``L0[x]``;
``DiagonalQubitUnitary`` keeps its own diagonal ``d`` with a gather index ``idx[x]``. A run is then

    out = before * P,   P(x) = exp(i L(x)) * prod_v d_v[idx_v(x)],   L(x) = sum_g theta_g T[g, x] + L0[x]

with ``L`` one matmul of the table with the angle columns ``theta [gates, S|1, B|1]`` (per stack row /
sample where the angles are), whatever the number of gates (a QAOA cost layer is one run).

**Adjoint derivation.** The walk carries ``h = conj(g)`` (``g``: the cotangent of the state, torch's
convention ``dL = Re sum conj(g) dz``). With ``out = P before``:

* ``before = conj(P) out`` and ``h_before = P h_out`` (``g_before = conj(P) g_out``): P is unimodular.
* ``d out(x) / d theta_g = i T[g, x] out(x)``, so ``dL/dtheta_g = Re sum_x conj(g(x)) i T[g, x] out(x)
  = -sum_x T[g, x] Im(h(x) out(x))``: with ``w = Im(h * out)`` summed over the lead axes the angles do
  not have, every angle's gradient is the one reduction ``-T @ w`` per run, never one per gate.
* ``out = d[idx] y`` with ``y = conj(d[idx]) out`` (``|d| = 1``): ``g_d[j] = sum_{idx(x)=j} conj(y) g``,
  i.e. ``g_d[j] = d[j] conj(sum_{idx(x)=j} h(x) out(x))``.

The forward is torch ops throughout, so the program's higher-derivative fallback (torch reverse mode over
a recomputation) differentiates it exactly.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

from .product import sum_to
from . import phase_factors
from .phase_factors import factored

DIAGONAL_TABLE_MAX_ELEMENTS = 1 << 22
"""A run's angle table has at most this many entries (rows x 2**n; 32 MiB in float64, kept per dtype and
device with the plan); a longer run is split. G16's cost layer (24 rows x 2**16) is one run."""

RUN_MAX_WIRES = 22
"""Diagonal runs are formed on states of at most this many wires. A run's table holds a row of ``2**n``
entries per gate (built from an int64 index of ``2**n``), and above ``DIAGONAL_TABLE_MAX_ELEMENTS`` every gate
is a run of its own: at 25 wires 256 MiB of index a gate, which ran a lattice QAOA p=4 cone class out of
memory (20 GB). Wider states apply each diagonal gate as a gate step (a 4x4 on its wires' slices)."""

TABLE_SCALE = 4
"""Table entries are multiples of 1/4 (RZ, IsingZZ, MultiRZ: +-1/2; CRZ: 0, +-1/2; PhaseShift: 0, 1), so the
plan keeps ``TABLE_SCALE * T`` as int8 and converts it once per dtype and device."""

ANGLE_GATES = frozenset({"RZ", "PhaseShift", "U1", "CRZ", "ControlledPhaseShift", "IsingZZ", "MultiRZ", "PauliRot"})
"""One-angle gates whose matrix is ``diag(exp(i theta a(x)))`` (PauliRot: with a Z/I word only)."""

KEEP_PHASES_MAX_BYTES = 16 << 20
"""The forward pass keeps a run's phase vector (for the backward walk) up to this size; above it the walk
recomputes it from the table (one matmul and a cos / sin pass)."""

VECTOR_GATES = frozenset({"DiagonalQubitUnitary"})
"""Gates given by their diagonal (complex, unimodular): gathered onto the basis, not turned into angles."""


FACTOR_MIN_ENTRIES = 1 << 18
"""Tables of at least this many entries (2 MiB in float64: G16's 24 gates on 2**16 amplitudes hold 1.5M) are kept
as their factors over the wire halves where they factor (``phase_factors``): below it the dense product is
cache-resident and one op shorter each way."""


def _z(k: int) -> np.ndarray:
    """``[k, 2**k]`` Z eigenvalues (+1 / -1) of each of k wires over the local basis (first wire most significant)."""
    j = np.arange(1 << k)
    return 1 - 2 * ((j[None, :] >> (k - 1 - np.arange(k))[:, None]) & 1)


def _exponent(op) -> np.ndarray | None:
    """``a`` over the gate's local basis with ``U = diag(exp(i theta a))``, or None if not a diagonal angle gate."""
    name = op.name
    if name not in ANGLE_GATES or op.num_params != 1:
        return None
    k = len(op.wires)
    z = _z(k)
    if name == "RZ" or name == "MultiRZ" or name == "IsingZZ":
        return -0.5 * np.prod(z, axis=0)
    if name in ("PhaseShift", "U1"):
        return np.array([0.0, 1.0])
    if name == "CRZ":
        return np.array([0.0, 0.0, -0.5, 0.5])
    if name == "ControlledPhaseShift":
        return np.array([0.0, 0.0, 0.0, 1.0])
    word = op.hyperparameters.get("pauli_word", "")
    if not set(word) <= {"I", "Z"} or len(word) != k:
        return None
    rows = [z[i] for i, c in enumerate(word) if c == "Z"]
    return -0.5 * (np.prod(rows, axis=0) if rows else np.ones(1 << k))


def member_kind(op, slot_kind: str) -> str | None:
    """How a gate joins a diagonal run: ``"angle"``, ``"const"`` (parameter-free diagonal), ``"vector"``
    (its own diagonal), or None (not diagonal)."""
    if slot_kind == "const":
        m = np.asarray(qml.matrix(op, wire_order=op.wires))
        return "const" if np.count_nonzero(m - np.diag(np.diag(m))) == 0 else None
    if slot_kind in ("fast", "matrix") and _exponent(op) is not None:
        return "angle"
    if slot_kind == "matrix" and op.name in VECTOR_GATES:
        return "vector"
    return None


def _local_index(n: int, wires) -> np.ndarray:
    """For every basis state of n wires, its index in the local basis of ``wires`` (wire 0 most significant)."""
    x = np.arange(1 << n, dtype=np.int64)
    local = np.zeros_like(x)
    for w in wires:
        local = (local << 1) | ((x >> (n - 1 - w)) & 1)
    return local


class DiagonalRun:
    """A run of diagonal gates found at plan time: angle rows, constant angles, diagonal gathers.

    >>> run = DiagonalRun(2)
    >>> run.add(0, "angle", qml.IsingZZ(0.3, wires=[0, 1]), (1, 0))
    >>> run.add(1, "const", qml.CZ(wires=[0, 1]), (0, 1))
    >>> run.finish().table, run.const
    (array([[-0.5,  0.5,  0.5, -0.5]]), array([0.        , 0.        , 0.        , 3.14159265]))
    """

    def __init__(self, n: int):
        self.n = n
        self.angles: list[int] = []  # slot indices, one table row each
        self._rows: list[np.ndarray] = []
        self.const: np.ndarray | None = None  # L0
        self.vectors: list[tuple[int, np.ndarray]] = []  # (slot index, idx)
        self._cache: dict = {}

    def room(self, rows: int = 1) -> bool:
        """Whether ``rows`` more angle rows fit the table budget."""
        return (len(self._rows) + rows) << self.n <= max(DIAGONAL_TABLE_MAX_ELEMENTS, 1 << self.n)

    def add(self, si: int, kind: str, op, wires) -> None:
        local = _local_index(self.n, wires)
        if kind == "angle":
            self.angles.append(si)
            self._rows.append(_exponent(op)[local])
        elif kind == "const":
            angle = np.angle(np.diag(np.asarray(qml.matrix(op, wire_order=op.wires))))[local]
            self.const = angle if self.const is None else self.const + angle
        else:
            self.vectors.append((si, local))

    def finish(self) -> "DiagonalRun":
        table = np.stack(self._rows) * TABLE_SCALE if self._rows else None
        if table is not None and not np.array_equal(table, np.round(table)):  # pragma: no cover - a new gate
            raise AssertionError("diagonal run table entries must be multiples of 1/TABLE_SCALE")
        self._scaled = None if table is None else table.astype(np.int8)
        del self._rows
        return self

    @property
    def table(self) -> np.ndarray | None:
        """``T[g, x]``, ``[angle gates, 2**n]``."""
        return None if self._scaled is None else self._scaled / TABLE_SCALE

    def constants(self, dtype, device) -> tuple:
        """(table, L0, gather indexes, table transposed, minus the table, factors) in the state's real dtype on
        its device, converted once per pair (transposed and negated: contiguous, one op less each forward and
        backward). ``factors``: ``(U^T, V, U, -V)`` where the table has at least ``FACTOR_MIN_ENTRIES``
        entries and every gate's column is a product over the wire halves (``phase_factors``; the dense
        tables are then None), else None."""
        real = dtype.to_real()
        key = (real, str(device))
        hit = self._cache.get(key)
        if hit is None:
            as_t = lambda a: None if a is None else torch.as_tensor(a, dtype=real, device=device)  # noqa: E731
            idx = [torch.as_tensor(local, device=device) for _, local in self.vectors]
            split = self._factors()
            if split is not None:
                U, V = split
                factors = (as_t(np.ascontiguousarray(U.T)), as_t(V), as_t(U), as_t(-V))
                hit = (None, as_t(self.const), idx, None, None, factors)
            else:
                table = None if self._scaled is None else as_t(self._scaled).div_(TABLE_SCALE)
                tables = (None, None) if table is None else (table.T.contiguous(), -table)
                hit = (table, as_t(self.const), idx, *tables, None)
            self._cache[key] = hit
        return hit

    def _factors(self):
        """``(U [G, 2**h], V [G, 2**l])`` of a large table that factors over the wire halves, else None."""
        if self._scaled is None or self._scaled.size < FACTOR_MIN_ENTRIES:
            return None
        split = factored(self.table[None], self.n)
        return None if len(split) == 1 else (split[0][0], split[1][0])

    def tensors(self, values, lead) -> list[torch.Tensor]:
        """The run's tensors: the angle columns ``[gates, S|1, B|1]`` (if any angle gate), then one diagonal
        ``[S|1, B|1, 2**k]`` per vector gate. ``lead(si, t)`` gives a slot's diagonal its lead axes."""
        out = []
        if self.angles:
            cols = [values.angle(si) for si in self.angles]
            S = max(c.shape[0] for c in cols)
            B = max(c.shape[1] for c in cols)
            cols = [c if c.shape == (S, B) else c.expand(S, B) for c in cols]
            out.append(torch.stack(cols))
        for si, _ in self.vectors:
            m = values.matrix(si)
            d = lead(si, torch.diagonal(m, dim1=-2, dim2=-1))
            out.append(d if d.ndim == 3 else d.reshape(1, 1, -1))
        return out


def absorb_pending(run: DiagonalRun | None, pending: dict, kinds: dict, slots, ops) -> None:
    """Single-qubit gates waiting on a wire that are all diagonal join ``run``, the program's last step: they
    commute with it, and with everything after it on other wires (a non-diagonal one keeps them waiting)."""
    if run is None:
        return
    for w in sorted(pending):
        todo = pending[w]
        if todo and all(kinds[si] for si in todo) and run.room(len(todo)):
            for si in pending.pop(w):
                run.add(si, kinds[si], ops[slots[si].op_index], slots[si].wires)


class RunCall:
    """One call's diagonal action: the plan-time run, the phases its forward pass kept, and ``shared`` (the run's
    ``shared_values``: its gates read one angle, known from where the binding gathers them), or None."""

    __slots__ = ("run", "kept", "shared")

    def __init__(self, run: DiagonalRun, shared: tuple | None = None):
        self.run, self.kept, self.shared = run, None, shared


def one_element(reads: list) -> bool:
    """Whether every gate of a bound run (``reads``: per gate ``[(input, index)]``) reads one and the same input
    element: the run has one angle."""
    found = {(src, tuple(index.reshape(-1).tolist())) for row in reads for src, index in row}
    return len(found) == 1 and all(len(row) == 1 for row in reads)


def shared_values(run: DiagonalRun, dtype, device) -> tuple | None:
    """``(values [D], codes [2**n, 1, 1])`` of a run whose gates all read one angle ``theta``: ``L = theta C``,
    ``C`` its table summed over the gates, whose few values' phases ``exp(i theta c)`` are taken at ``codes``;
    None where the run has constant angles, diagonals, or more than ``phase_factors.PHASE_TABLE_MAX_VALUES``
    values. Made once
    per dtype and device. (Differentiated by torch, as the fallback does, the angle's derivative goes to the first
    gate's alone: every gate reads that one input element, whose gradient is the same sum.)"""
    key = ("shared", dtype.to_real(), str(device))
    if key not in run._cache:
        hit = None
        if run.angles and run.const is None and not run.vectors:
            values, codes = phase_factors.phase_values(run._scaled.sum(0, dtype=np.int64))
            hit = (torch.as_tensor(values / TABLE_SCALE, dtype=dtype.to_real(), device=device),
                   torch.as_tensor(codes.reshape(-1, 1, 1), device=device))
        run._cache[key] = hit
    hit = run._cache[key]
    return hit if hit is not None and hit[0].numel() <= phase_factors.PHASE_TABLE_MAX_VALUES else None


def phases(run: DiagonalRun, ts, dtype, device, shared: tuple | None = None) -> torch.Tensor:
    """P as ``[2**n, S|1, B|1]`` (see the module notes); ``shared``: ``shared_values`` (one unbatched angle)."""
    _, const, idx, table_t, _, factors = run.constants(dtype, device)
    if shared is not None and ts[0].shape[1:] == (1, 1):
        A = ts[0][0].view(1) * shared[0]  # every gate's angle is the first's
        return torch.take(torch.complex(torch.cos(A), torch.sin(A)), shared[1]).to(dtype)
    P = None
    k = 0
    if run.angles:
        theta = ts[0]
        k = 1
        G, S, B = theta.shape
        if factors is None:
            L = torch.mm(table_t, theta.reshape(G, S * B)).view(-1, S, B)
        elif S * B == 1:  # U^T diag(theta) V: [2**h, G] x [G, 2**l]
            L = torch.mm(factors[0], factors[1] * theta.view(G, 1)).view(-1, S, B)
        else:  # every lead column c at once: U^T [G, 2**l * c]
            L = torch.mm(factors[0], (factors[1].unsqueeze(-1) * theta.view(G, 1, S * B)).view(G, -1)).view(-1, S, B)
        if const is not None:
            L = L + const[:, None, None]
    elif const is not None:
        L = const[:, None, None]
    else:
        L = None
    if L is not None:
        P = torch.complex(torch.cos(L), torch.sin(L))  # measured 2.6x faster than torch.polar on CPU
    for d, ix in zip(ts[k:], idx):
        f = d.index_select(-1, ix).permute(2, 0, 1)  # [2**n, S|1, B|1]
        P = f if P is None else P * f
    if P is None:  # pragma: no cover - a run has at least one gate
        P = torch.ones(1 << run.n, 1, 1, dtype=dtype, device=device)
    return P.to(dtype)


def apply(psi: torch.Tensor, call: RunCall, ts) -> torch.Tensor:
    P = phases(call.run, ts, psi.dtype, psi.device, call.shared)
    if not torch.is_grad_enabled() and P.numel() * P.element_size() <= KEEP_PHASES_MAX_BYTES:
        call.kept = P  # for the adjoint walk (a recording forward recomputes instead: its P carries a graph)
    return psi * P



def unapply(psi, h, call: RunCall, ts, needs):
    """Walk a run back from the state ``psi`` after it and ``h = conj(cotangent)``: (state before, conj
    cotangent before, cotangents of ``ts``), one table reduction for every angle of the run."""
    run = call.run
    P = call.kept if call.kept is not None else phases(run, ts, psi.dtype, psi.device, call.shared)
    call.kept = None
    grads: list = [None] * len(ts)
    if any(needs):
        _, _, idx, _, minus, factors = run.constants(psi.dtype, psi.device)
        hw = h * psi  # [2**n, S, B]
        k = 0
        if run.angles:
            k = 1
            if needs[0]:
                theta = ts[0]
                G, S, B = theta.shape
                w = sum_to(hw.imag, (hw.shape[0], S, B))
                if factors is None:
                    grads[0] = torch.mm(minus, w.reshape(w.shape[0], S * B)).view(G, S, B)
                else:  # -sum_lo V[g, lo] (U w)[g, lo, c]
                    U, minus_v = factors[2], factors[3]
                    uw = torch.mm(U, w.reshape(U.shape[1], -1))  # [G, 2**l * S * B]
                    if S * B == 1:
                        grads[0] = (uw * minus_v).sum(1).view(G, S, B)
                    else:
                        grads[0] = (uw.view(G, -1, S * B) * minus_v.unsqueeze(-1)).sum(1).view(G, S, B)
        for j, (d, ix) in enumerate(zip(ts[k:], idx)):
            if needs[k + j]:
                Sd, Bd, D = d.shape
                z = sum_to(hw, (hw.shape[0], Sd, Bd))
                acc = torch.zeros(D, Sd, Bd, dtype=hw.dtype, device=hw.device).index_add_(0, ix, z)
                grads[k + j] = d * acc.permute(1, 2, 0).conj()
    return psi * P.conj(), h * P, grads

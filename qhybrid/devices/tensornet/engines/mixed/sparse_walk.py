"""The Pauli walk's sparse start: measured observables are a few Pauli strings, and stepping them back through
the last layers keeps them few (a Clifford permutation maps a string to one string, a one-wire step spreads a
string only on that wire), so the walk starts on the list of strings it reaches and their coefficients, and
turns dense (``4**n`` coefficients) only where that list outgrows ``SPARSE_WALK_MAX_FRACTION`` of ``4**n``.

A shallow circuit's observables stay sparse to the end: the 12-wire, two-layer noisy SEL's ``<Z_i>`` reach a few
hundred strings, and the walk's end contracts them with every sample's Bloch vectors directly (no ``4**n``
tensor at all). Which strings are reached depends only on the structure, not on the parameter values (a step's
pattern is structural: a trace-preserving step maps the identity to itself alone, any other string on its wires
to all of theirs), so the index maps are built once per structure and measured words; each call is a few
gathers and ``index_add``s on ``strings x observables`` coefficients, differentiable to any order.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from ...._constants import on_device
from .pauli import _conjugation, _images_of, _index_of_xz, transfer_back, unitary_superoperator

SPARSE_WALK_MAX_FRACTION = 1 / 16
"""The walk turns dense once its strings exceed this share of the dense walk's ``M x 4**n`` coefficients (past
it, the dense passes are cheaper than gathering and scattering the list)."""

SPARSE_WALK_MAX_STRINGS = 1 << 22
"""And past this many listed strings whatever the share (the plan's index maps: 32 bytes an entry, a few
entries a string)."""

SPARSE_EXPVAL_CHUNK = 1 << 16
"""Strings contracted with the samples' Bloch vectors at a time (a ``samples x chunk`` product: 32 MB at 64
samples), each chunk recomputed in the backward where reverse mode records."""


def sparse_start(walk, ops: list[tuple], keys: np.ndarray, observables: int, tape_ops) -> "SparseStart":
    """The walk's sparse prefix for the measured strings ``keys``, built once per set (kept on the walk)."""
    key = tuple(keys.tolist())
    hit = walk._starts.get(key)
    if hit is None:
        hit = walk._starts[key] = SparseStart(walk, ops, keys, observables, tape_ops)
    return hit


class SparseStart:
    """Index maps of the walk's sparse prefix for one set of measured strings (see the module notes).

    The list holds ``(observable, string)`` pairs as keys ``m * 4**n + P`` (a string reached by several
    observables is listed once per observable: their reaches barely overlap), their coefficients one flat vector."""

    def __init__(self, walk, ops: list[tuple], keys: np.ndarray, observables: int, tape_ops):
        n = walk.n
        self.n, self.observables = n, observables
        self.maps: list[tuple] = []  # per op applied sparsely: ("gather", signs) | ("run", [(w, map)]) | ("matrix", map)
        self.map_entries = 0
        limit = min(SPARSE_WALK_MAX_FRACTION * observables * (1 << (2 * n)), SPARSE_WALK_MAX_STRINGS)
        slots = walk.program.structure.slots
        low = (np.int64(1) << (2 * n)) - 1
        for kind, a, b in ops:
            if kind == "gather":
                new_rows, signs = _backward_images(a, keys & low, n)
                new_keys = (keys & ~low) | new_rows
                step, entries = ("gather", torch.as_tensor(signs, dtype=torch.int8)), len(keys)
            elif kind == "run":
                parts, new_keys = [], keys
                for w in sorted(a):
                    part, new_keys = _spread(new_keys, (w,), _run_mask(b[w], slots, tape_ops), n)
                    parts.append((w, part))
                    if len(new_keys) > limit:
                        break  # (checked per wire: the list grows up to 4x a wire)
                step, entries = ("run", parts), sum(len(part[0]) for _, part in parts)
            else:
                wires, step_slots = b
                part, new_keys = _spread(keys, wires, _wide_mask(step_slots, slots, len(wires)), n)
                step, entries = ("matrix", part), len(part[0])
            if len(new_keys) > limit:
                break
            self.maps.append(step)
            self.map_entries += entries
            keys = new_keys
        self.rows = torch.as_tensor(keys & low)  # the strings reached after the sparse prefix, and whose they are
        self.owner = torch.as_tensor(keys >> (2 * n))
        self._dense: dict = {}  # (first, stop) -> the strings observables first .. stop - 1 own (``dense``)

    @property
    def steps(self) -> int:
        """How many of the walk's operators the sparse prefix applies."""
        return len(self.maps)

    def call_bytes(self, itemsize: int, samples: int) -> int:
        """Memory one call takes beyond the plan's index maps: each map's weighted coefficients (kept by reverse
        mode), and one chunk of the end's contraction (three ``samples x chunk`` products; its products are kept
        for the backward only where they take at most half of ``max_memory``, see ``expvals``)."""
        return 2 * self.map_entries * itemsize + 3 * samples * min(len(self.rows), SPARSE_EXPVAL_CHUNK) * itemsize

    def walk(self, coef: torch.Tensor, ops: list[tuple]) -> torch.Tensor:
        """The measured strings' coefficients ``[K0]`` stepped back through the prefix: ``[K]`` of ``rows``."""
        for (kind, a, b), step in zip(ops, self.maps):
            if kind == "gather":
                coef = coef * on_device(step[1], coef.device, coef.dtype)
            elif kind == "run":
                for w, part in step[1]:
                    coef = _apply_spread(coef, a[w], part)
            else:
                coef = _apply_spread(coef, a, step[1])
        return coef

    def dense(self, coef: torch.Tensor, first: int, stop: int) -> torch.Tensor:
        """``[4**n, 1, stop - first]`` dense coefficients of observables ``first .. stop - 1`` (the walk's dense
        rest)."""
        key = (first, stop)
        hit = self._dense.get(key)
        if hit is None:  # which strings these observables own: from the plan's tables, once, on the host
            mine = ((self.owner >= first) & (self.owner < stop)).nonzero().squeeze(1)
            hit = self._dense[key] = (mine, self.rows[mine], self.owner[mine] - first)
        mine, rows, owner = (on_device(t, coef.device) for t in hit)
        out = coef.new_zeros(1 << (2 * self.n), stop - first)
        return out.index_put((rows, owner), coef[mine]).reshape(out.shape[0], 1, -1)

    def expvals(self, coef: torch.Tensor, bloch: list[torch.Tensor], max_memory: float = float("inf")) -> torch.Tensor:
        """``[M, L]``: ``sum_k [owner_k = m] coef[k] prod_w bloch[w][l, digit_w(rows[k])]``, the wires in two
        halves (two small Kronecker products gathered per string), in chunks of strings; each chunk recomputed in
        the backward only where the gathered products reverse mode keeps (two ``samples x strings``) would take
        more than half of ``max_memory``."""
        n, half = self.n, (self.n + 1) // 2
        left = _kron(bloch[:half])
        right = _kron(bloch[half:]) if n > half else left.new_ones(left.shape[0], 1)
        rows, owner = on_device(self.rows, coef.device), on_device(self.owner, coef.device)
        shift = 2 * (n - half)
        recording = torch.is_grad_enabled() and any(t.requires_grad for t in (coef, left, right))
        recompute = recording and 2 * left.shape[0] * len(rows) * coef.dtype.itemsize > max_memory / 2

        def part(c, hi, lo, own, left, right):
            product = left[:, hi] * right[:, lo] * c
            return product.new_zeros(product.shape[0], self.observables).index_add(1, own, product)

        out = None
        for a in range(0, len(rows), SPARSE_EXPVAL_CHUNK):
            b = min(a + SPARSE_EXPVAL_CHUNK, len(rows))
            args = (coef[a:b], rows[a:b] >> shift, rows[a:b] & ((1 << shift) - 1), owner[a:b], left, right)
            t = checkpoint(part, *args, use_reentrant=False) if recompute else part(*args)
            out = t if out is None else out + t
        return out.T


def _kron(vectors: list[torch.Tensor]) -> torch.Tensor:
    """``[L, 4**k]`` row-wise Kronecker product of ``k >= 1`` per-wire ``[L, 4]`` vectors."""
    out = vectors[0]
    for v in vectors[1:]:
        out = (out[:, :, None] * v[:, None, :]).reshape(out.shape[0], -1)
    return out


def _spread(rows: np.ndarray, wires: tuple, mask: np.ndarray, n: int):
    """The strings ``rows`` (keys: an observable's index above the string's ``2 n`` bits) reach through a ``4**k x 4**k`` step on ``wires`` whose possible non-zeros are
    ``mask[new, old]`` (combined digit over the wires, the first wire most significant), and the map
    ``(dst, src, new_digit, old_digit, size)`` that applies the step to their coefficients."""
    k = len(wires)
    shifts = [2 * (n - 1 - w) for w in wires]
    d = np.zeros_like(rows)
    cleared = rows.copy()
    for shift in shifts:
        d = (d << 2) | ((rows >> shift) & 3)
        cleared &= ~(np.int64(3) << shift)
    counts = mask.sum(0)  # targets of each old digit
    targets = np.nonzero(mask.T)[1]  # grouped by old digit, in order
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    src = np.repeat(np.arange(len(rows)), counts[d])
    rank = np.arange(len(src)) - np.repeat(np.cumsum(counts[d]) - counts[d], counts[d])
    old_d = d[src]
    new_d = targets[first[old_d] + rank]
    new = cleared[src]
    for j, shift in enumerate(shifts):
        new |= ((new_d >> (2 * (k - 1 - j))) & 3) << shift
    new_rows, dst = np.unique(new, return_inverse=True)
    part = tuple(torch.as_tensor(a) for a in (dst, src, new_d, old_d)) + (len(new_rows),)
    return part, new_rows


_DIAGONAL = frozenset({"DepolarizingChannel", "BitFlip", "PhaseFlip", "PhaseDamping", "PauliError"})
"""Channels whose transfer matrix is diagonal for every parameter (Pauli channels, dephasing)."""

_NON_UNITAL = frozenset({"AmplitudeDamping", "GeneralizedAmplitudeDamping", "ThermalRelaxationError", "ResetError"})
"""Trace-preserving channels whose step back may give any string an identity part."""

_AXIS = {"RZ": 3, "PhaseShift": 3, "U1": 3, "RX": 1, "RY": 2}
"""Rotations that keep their axis' Pauli and mix the other two."""


def _slot_mask(slot, op) -> np.ndarray:
    """``[4, 4]`` possible non-zeros ``[new, old]`` of one one-wire operator's step back, for any parameters."""
    if slot.kind == "channel":
        if slot.name in _DIAGONAL:
            return np.eye(4, dtype=bool)
        mask = np.ones((4, 4), dtype=bool)
        if slot.name in _NON_UNITAL:
            mask[1:, 0] = False  # trace preserving: the identity steps back to itself
        return mask
    if slot.kind == "const":  # no parameters: its own pattern
        u = torch.as_tensor(np.asarray(op.matrix()), dtype=torch.complex128)
        return (transfer_back(unitary_superoperator(u), 1, True).abs() > 1e-12).numpy()
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 0] = True  # unital
    axis = _AXIS.get(slot.name)
    if axis is None:
        mask[1:, 1:] = True
    else:
        mask[axis, axis] = True
        others = [q for q in (1, 2, 3) if q != axis]
        mask[np.ix_(others, others)] = True
    return mask


def _run_mask(run_slots: tuple, slots, tape_ops) -> np.ndarray:
    """A fused one-wire step's pattern: its operators' (in order ``s1 .. sk``) ``M1 @ ... @ Mk`` (the step back
    applies the last operator's first)."""
    mask = np.eye(4, dtype=bool)
    for si in run_slots:
        m = _slot_mask(slots[si], tape_ops[slots[si].op_index])
        mask = (mask.astype(np.int64) @ m.astype(np.int64)) > 0
    return mask


def _wide_mask(step_slots: tuple, slots, k: int) -> np.ndarray:
    """A ``k``-wire step's pattern: every string of its wires, the identity alone to itself when trace preserving."""
    mask = np.ones((1 << (2 * k), 1 << (2 * k)), dtype=bool)
    if all(slots[si].name != "QubitChannel" for si in step_slots):
        mask[1:, 0] = False
    return mask


def _apply_spread(coef: torch.Tensor, r: torch.Tensor, part) -> torch.Tensor:
    """``coef'[dst] += r[new_digit, old_digit] coef[src]`` (the dense step ``o' = r o`` on the listed strings)."""
    dst, src, new_d, old_d, size = part
    device = coef.device  # the plan's index tables, copied to the device once (``on_device``)
    weights = r[on_device(new_d, device), on_device(old_d, device)] * coef[on_device(src, device)]
    return coef.new_zeros(size).index_add(0, on_device(dst, device), weights)


def _backward_images(step, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The walk's step back through a Clifford permutation ``U`` on the strings ``rows``: ``o'[P] = s o[Q]`` for
    ``U^dagger Q U = s P`` (``U^dagger``'s images of ``Q``: ``(inv, conj(vals[inv]))`` as a permutation)."""
    src, vals = step[1]
    inv = np.empty_like(src)
    inv[src] = np.arange(len(src))
    images = _images_of(np.asarray(rows, dtype=np.int64), n, _conjugation(inv, np.conj(np.asarray(vals)[inv]), n))
    x, z, signs = images
    new_rows = _index_of_xz(x, z, n)
    return new_rows, signs

"""Tapes in, torch results out: group by structure, build operands, contract with a cached plan, measure.

Pure functions except the plan cache, which is the point: a structure seen before (another batch,
epoch, or shifted copy of a tape) reuses its network and contraction path.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import compress
from operator import is_not
from typing import Sequence

import torch
from pennylane.measurements import ExpectationMP, ProbabilityMP, VarianceMP

from ...errors import ContractionTooLargeError, UnsupportedOperationError
from ._gates import broadcast_shape, constant_matrix, fast_matrix, generic_matrix, global_phase, state_vector
from ._measure import StateReader, measurement_function
from ._network import BATCH, STACK, Network, closed_network, ket_network
from ._pathfind import DEFAULT_PLAN_TIME
from ._plan import ContractionPlan, _fmt_bytes, plan_networks
from ._shared_observables import observables_shared, sharing_observables
from ._statevector import StateVectorProgram
from ..._variant import Variant
from ._structure import TapeStructure, tape_structure
from .backends import get_backend

STATE_MODE_MAX_WIRES = 20
"""Circuits on at most this many wires are contracted to their state once and every measurement is read
from it; wider circuits contract one closed, light-cone-reduced network per observable term."""

_PAULI = {
    "I": [[1, 0], [0, 1]],
    "X": [[0, 1], [1, 0]],
    "Y": [[0, -1j], [1j, 0]],
    "Z": [[1, 0], [0, -1]],
}


@dataclass(frozen=True)
class SimOptions:
    dtype: torch.dtype
    device: torch.device
    max_memory: float
    optimizer: str = "auto"
    backend: str = "torch"  # what executes contraction plans (backends.get_backend)
    plan_time: float = DEFAULT_PLAN_TIME  # seconds one structure's path searches may take


@dataclass
class CacheInfo:
    hits: int
    misses: int
    size: int


class PlanCache:
    """Compiled programs keyed by circuit structure (never values), least recently used evicted."""

    def __init__(self, maxsize: int = 1024):
        self.maxsize = maxsize
        self._programs: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key, build):
        program = self._programs.get(key)
        if program is not None:
            self.hits += 1
            self._programs.move_to_end(key)
            return program
        self.misses += 1
        program = build()
        self._programs[key] = program
        if len(self._programs) > self.maxsize:
            self._programs.popitem(last=False)
        return program

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self._programs))

    def clear(self) -> None:
        self._programs.clear()
        self.hits = self.misses = 0


# --- programs -----------------------------------------------------------------------------


class _Contraction:
    def __init__(self, network: Network, opts: SimOptions, what: str, plan: ContractionPlan | None = None):
        self.network = network
        if plan is None:
            plan = plan_networks([network], opts.optimizer, opts.plan_time, vary=BATCH)[0]
        self.plan = plan
        itemsize = torch.empty((), dtype=opts.dtype).element_size()
        self.plan.check_memory(itemsize, opts.max_memory, what)
        self.backend = get_backend(opts.backend, opts.device)
        self.max_memory = opts.max_memory

    def contract(self, operands) -> torch.Tensor:
        return self.backend.contract(self.plan, operands, max_memory=self.max_memory)


class StateProgram:
    """Small circuits: contract the state once, read every measurement from it."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions):
        self.contraction = _Contraction(ket_network(structure, stacked, stack_size), opts, "the circuit's state")

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(range(len(structure.slots)))
        c = self.contraction
        psi = c.contract([values.operand(o) for o in c.network.operands])
        psi = _expand_lead(psi, c.network.lead, lead_shape)
        reader = StateReader(psi, len(lead_shape), structure.sim_wires)
        return [reader.measure(mp) for mp in variant.tape.measurements]


class VectorProgram:
    """Narrow circuits without state preparation: a compiled state-vector program (``_statevector``)."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape):
        self.program = StateVectorProgram(structure, stacked, stack_size, tape, opts.dtype)
        n, lead = len(structure.sim_wires), max(stack_size, 1) * (structure.batch_size or 1)
        itemsize = torch.empty((), dtype=opts.dtype).element_size()
        elements = (1 << n) * lead
        need = elements * itemsize
        if need > opts.max_memory:
            raise ContractionTooLargeError(
                f"Simulating the circuit's state needs an intermediate of about {_fmt_bytes(need)} ({elements} "
                f"elements x {itemsize} bytes), above max_memory={_fmt_bytes(opts.max_memory)}. Use fewer wires "
                "or a smaller batch, or raise the device's max_memory."
            )

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(range(len(structure.slots)))
        if self.program.measure is not None:
            vals = self.program.run_expvals(values)
            return [v.reshape(lead_shape) for v in vals.unbind(0)]
        psi = self.program.run(values, lead_shape)
        n = len(structure.sim_wires)
        psi = psi.reshape(psi.shape[0], -1).transpose(0, 1).reshape(*lead_shape, *(2,) * n)
        reader = StateReader(psi, len(lead_shape), structure.sim_wires)
        return [reader.measure(mp) for mp in variant.tape.measurements]


class ClosedProgram:
    """Wide circuits: one closed network per observable term, each over its own light cone."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape):
        self.structure, self.stacked, self.stack_size, self.opts = structure, stacked, stack_size, opts
        self._terms: dict = {}
        # plan every term now, together (one planning budget), so the memory guard speaks before any work
        specs = list(dict.fromkeys(spec for mp in tape.measurements for spec in _closed_terms(mp, structure)))
        nets = [self._network(spec) for spec in specs]
        plans = plan_networks(nets, opts.optimizer, opts.plan_time, vary=BATCH)
        for spec, net, plan in zip(specs, nets, plans):
            self._contraction(spec, net, plan)

    def _network(self, spec) -> Network:
        cap, wires, word = spec[:3]
        coeffs = spec[3] if len(spec) > 3 else ()
        return closed_network(self.structure, self.stacked, self.stack_size, cap, wires, word, coeffs)

    def _contraction(self, spec, net: Network | None = None, plan: ContractionPlan | None = None) -> _Contraction:
        c = self._terms.get(spec)
        if c is None:
            cap, wires, word = spec[:3]
            net = self._network(spec) if net is None else net
            c = _Contraction(net, self.opts, f"<psi|{word or cap}|psi> on wires {list(wires)}", plan)
            self._terms[spec] = c
        return c

    def _value(self, values, spec, lead_shape, matrix=None) -> torch.Tensor:
        c = self._contraction(spec)
        ops = [values.operand(o, matrix) for o in c.network.operands]
        return _expand_lead(c.contract(ops), c.network.lead, lead_shape)

    def _pauli_expval(self, values, ps, lead_shape) -> torch.Tensor:
        pos = {w: i for i, w in enumerate(self.structure.sim_wires)}
        spec = _sentence_spec(ps, pos)
        if spec is not None:  # several words: one network (the sentence as an MPO)
            return self._value(values, spec, lead_shape).real + _sentence_constant(ps)
        total = None
        for word, coeff in ps.items():
            if not word:
                value = torch.ones(lead_shape, dtype=values.real_dtype, device=values.device)
            else:
                wires = tuple(pos[w] for w in word.keys())
                value = self._value(values, ("pauli", wires, "".join(word.values())), lead_shape).real
            coeff = coeff.real if isinstance(coeff, complex) else coeff
            term = value * coeff
            total = term if total is None else total + term
        if total is None:
            total = torch.zeros(lead_shape, dtype=values.real_dtype, device=values.device)
        return total

    def _matrix_expval(self, values, matrix, wires, lead_shape) -> torch.Tensor:
        pos = tuple(self.structure.sim_wires.index(w) for w in wires)
        return self._value(values, ("matrix", pos, ""), lead_shape, matrix).real

    def _expval(self, values, obs, lead_shape) -> torch.Tensor:
        if obs.pauli_rep is not None:
            return self._pauli_expval(values, obs.pauli_rep, lead_shape)
        return self._matrix_expval(values, obs.matrix(wire_order=obs.wires), obs.wires, lead_shape)

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(range(len(structure.slots)))  # one matrix builder per gate kind, not per gate
        out = []
        for mp in variant.tape.measurements:
            if isinstance(mp, ExpectationMP):
                out.append(self._expval(values, mp.obs, lead_shape))
            elif isinstance(mp, VarianceMP):
                obs = mp.obs
                mean = self._expval(values, obs, lead_shape)
                if obs.pauli_rep is not None:
                    square = self._pauli_expval(values, obs.pauli_rep @ obs.pauli_rep, lead_shape)
                else:
                    m = torch.as_tensor(obs.matrix(wire_order=obs.wires))
                    square = self._matrix_expval(values, m @ m, obs.wires, lead_shape)
                out.append(square - mean**2)
            elif isinstance(mp, ProbabilityMP) and mp.obs is None:
                pos = tuple(structure.sim_wires.index(w) for w in mp.wires)
                p = self._value(values, ("probs", pos, ""), lead_shape).real
                out.append(p.reshape(*lead_shape, 2 ** len(pos)))
            else:
                raise UnsupportedOperationError(
                    f"{type(mp).__name__} on a {len(structure.sim_wires)}-wire circuit would need the full "
                    f"state (more than {STATE_MODE_MAX_WIRES} wires); measure expval, var or probs of a few "
                    "wires instead."
                )
        return out


PAULI_SUM_MIN_WORDS = 2
"""Pauli sentences with at least this many non-identity words are measured by one network with a term
index over all of them (their light cones united) instead of one network per word."""


def _sentence_constant(ps) -> float:
    real = lambda c: c.real if isinstance(c, complex) else c  # noqa: E731
    return float(sum((real(c) for w, c in ps.items() if not w), 0.0))


def _sentence_spec(ps, pos):
    """("paulisum", wires, words, coefficients) for a sentence of several words, else None."""
    words = [(w, c) for w, c in ps.items() if w]
    if len(words) < PAULI_SUM_MIN_WORDS:
        return None
    wires = tuple(sorted({pos[w] for word, _ in words for w in word.keys()}))
    strings = []
    for word, _ in words:
        letters = {pos[w]: l for w, l in word.items()}
        strings.append("".join(letters.get(w, "I") for w in wires))
    real = lambda c: c.real if isinstance(c, complex) else c  # noqa: E731
    return ("paulisum", wires, tuple(strings), tuple(float(real(c)) for _, c in words))


def _closed_terms(mp, structure: TapeStructure):
    pos = {w: i for i, w in enumerate(structure.sim_wires)}
    if isinstance(mp, (ExpectationMP, VarianceMP)):
        ps = mp.obs.pauli_rep
        sentences = [ps] if ps is None or isinstance(mp, ExpectationMP) else [ps, ps @ ps]
        for s in sentences:
            if s is None:
                yield ("matrix", tuple(pos[w] for w in mp.obs.wires), "")
                continue
            spec = _sentence_spec(s, pos)
            if spec is not None:
                yield spec
                continue
            for word in s:
                if word:
                    yield ("pauli", tuple(pos[w] for w in word.keys()), "".join(word.values()))
    elif isinstance(mp, ProbabilityMP) and mp.obs is None:
        yield ("probs", tuple(pos[w] for w in mp.wires), "")
    else:
        measurement_function(mp)  # a clear error for unsupported kinds
        raise UnsupportedOperationError(
            f"{type(mp).__name__} on a {len(structure.sim_wires)}-wire circuit would need the full state "
            f"(more than {STATE_MODE_MAX_WIRES} wires); measure expval, var or probs of a few wires instead."
        )


def _expand_lead(t: torch.Tensor, present: tuple, lead_shape: tuple) -> torch.Tensor:
    """Give a result every lead axis (stack, batch) even where its light cone did not reach them."""
    want = len(lead_shape)
    if len(present) == want:
        return t
    full = (STACK, BATCH)[2 - want :] if want < 2 else (STACK, BATCH)
    for axis, ix in enumerate(full):
        if ix not in present:
            t = t.unsqueeze(axis)
    return t.expand(*lead_shape, *t.shape[want:])


# --- operand values -----------------------------------------------------------------------


class _Values:
    """Tensor values of one group's operands; each slot built once, bra sides by conjugation."""

    def __init__(self, structure: TapeStructure, group: Sequence[Variant], stacked: frozenset, opts: SimOptions):
        self.structure, self.group, self.stacked = structure, group, stacked
        self.dtype, self.device = opts.dtype, opts.device
        self.real_dtype = torch.empty((), dtype=opts.dtype).real.dtype
        self._slots: dict[int, torch.Tensor] = {}
        self._matrices: dict[int, torch.Tensor] = {}
        self._table = None  # (position -> column, [S, P] table) of the stacked scalar parameters

    def _stack_table(self) -> dict:
        """Every differing scalar parameter's column over the stack, built in a few ops for the whole
        group: a [S, P] table of row 0's values with the other rows' values scattered in. Empty where
        some differing value is not a 0-dim tensor of the real dtype (then columns are built one by one)."""
        if self._table is not None:
            return self._table
        self._table = {}
        rows = _differences(self.group)
        first = self.group[0].params
        positions = sorted(rows)
        if len(positions) < 2:
            return self._table
        scalar = lambda p: isinstance(p, torch.Tensor) and p.ndim == 0 and p.dtype == self.real_dtype  # noqa: E731
        entries = [(k, r) for k, j in enumerate(positions) for r in rows[j]]
        values = [self.group[r].params[positions[k]] for k, r in entries]
        base = [first[j] for j in positions]
        if not all(map(scalar, values)) or not all(map(scalar, base)):
            return self._table
        device = base[0].device
        if any(p.device != device for p in values) or any(p.device != device for p in base):
            return self._table
        table = torch.stack(base).expand(len(self.group), len(positions))
        r_idx = torch.tensor([r for _, r in entries], device=device)
        k_idx = torch.tensor([k for k, _ in entries], device=device)
        table = table.index_put((r_idx, k_idx), torch.stack(values))
        if device != self.device:
            table = table.to(self.device)
        self._table = {j: table[:, k] for k, j in enumerate(positions)}
        return self._table

    def _params(self, si: int) -> list:
        """The slot's parameters; those that differ across stacked variants get a leading stack axis.

        A differing column is the first variant's value expanded along the stack axis with the other
        variants' values scattered in (parameter-shift variants differ in one parameter each), not a
        stack of one scalar per variant."""
        slot = self.structure.slots[si]
        a, b = slot.params
        first = self.group[0].params
        if si not in self.stacked:
            return first[a:b]
        rows = _differences(self.group)
        table = self._stack_table()
        out = []
        for j in range(a, b):
            changed = rows.get(j)
            if not changed:
                out.append(first[j])
                continue
            column = table.get(j)
            if column is not None:
                out.append(column.unsqueeze(-1) if slot.batched else column)
                continue
            base = torch.as_tensor(first[j], device=self.device).to(self.real_dtype)
            if len(changed) == len(self.group) - 1:
                column = torch.stack(
                    [base, *(torch.as_tensor(self.group[r].params[j], device=self.device).to(self.real_dtype) for r in changed)]
                )
            else:
                vals = torch.stack([torch.as_tensor(self.group[r].params[j], device=self.device).to(self.real_dtype) for r in changed])
                index = torch.tensor(changed, device=self.device)
                column = base.expand(len(self.group), *base.shape).index_put((index,), vals)
            if slot.batched and column.ndim == 1:
                column = column.unsqueeze(-1)  # a stacked scalar broadcasts against the batch axis
            out.append(column)
        return out

    def changed_rows(self, si: int) -> set | None:
        """Stack rows whose parameters of slot ``si`` are not row 0's; None where rows may differ in more
        than parameters (operator settings of matrix / prep / phase slots)."""
        slot = self.structure.slots[si]
        if slot.kind != "fast":
            return None
        rows = _differences(self.group)
        out: set = set()
        for j in range(*slot.params):
            out.update(rows.get(j, ()))
        return out

    def _per_variant(self, si: int, fn) -> torch.Tensor:
        """``fn(operator, params)`` for the slot, stacked over variants when they differ."""
        slot = self.structure.slots[si]
        members = self.group if si in self.stacked else self.group[:1]
        values = [fn(v.tape.operations[slot.op_index], v.params[slot.params[0] : slot.params[1]]) for v in members]
        return torch.stack(values) if si in self.stacked else values[0]

    def _broadcast_matrix(self, si: int) -> torch.Tensor | None:
        """A stacked slot of scalar-angle operators (PauliRot, MultiRZ, ...) in one PennyLane matrix call
        with the stack as PennyLane's broadcast axis, instead of one call per variant (operators of one
        structure differ only in their parameters); None where that does not apply."""
        slot = self.structure.slots[si]
        if si not in self.stacked or slot.batched:
            return None
        op = self.group[0].tape.operations[slot.op_index]
        try:
            scalar = all(nd == 0 for nd in op.ndim_params)
        except (AttributeError, TypeError, ValueError):
            return None
        if not scalar:
            return None
        n = len(self.group)
        columns = []
        for p in self._params(si):
            p = torch.as_tensor(p, device=self.device).to(self.real_dtype)
            columns.append(p.expand(n) if p.ndim == 0 else p)
        if any(c.shape != (n,) for c in columns):
            return None
        m = generic_matrix(op, columns, self.dtype, self.device)
        return m if m.ndim == 3 and m.shape[0] == n else None

    def prefetch(self, indices: Sequence[int]) -> None:
        """Build the matrices of every closed-form ("fast") slot among ``indices``: one builder call per
        gate kind and lead layout, however many gates of that kind the circuit has."""
        groups: dict[tuple, list[int]] = {}
        for si in indices:
            slot = self.structure.slots[si]
            if slot.kind == "fast" and si not in self._matrices:
                groups.setdefault((slot.name, si in self.stacked, slot.batched), []).append(si)
        for (name, stacked_kind, _), members in groups.items():
            if len(members) == 1:
                continue
            stacked = None if stacked_kind else self._gathered_columns(members)
            if stacked is None:
                columns = [[torch.as_tensor(p, device=self.device).to(self.real_dtype) for p in self._params(si)] for si in members]
                shape = broadcast_shape(*(p.shape for col in columns for p in col))
                n_params = len(columns[0])
                # an expand to the same shape is still an autograd node (and a reduction in the backward)
                stacked = [
                    torch.stack([col[k] if col[k].shape == shape else col[k].expand(shape) for col in columns])
                    for k in range(n_params)
                ]
            mats = fast_matrix(name, stacked, self.dtype, self.device).unbind(0)
            for si, m in zip(members, mats):
                self._matrices[si] = m

    def _gathered_columns(self, members: list[int]) -> list[torch.Tensor] | None:
        """The parameter columns of same-kind slots read straight from the inputs the variant's parameters
        were gathered from (one indexing op per column), where each column comes from one input."""
        gather = self.group[0].gather
        if gather is None or len(self.group) > 1:
            return None
        key = ("columns", tuple(members))
        if key not in gather.memo:
            gather.memo[key] = _column_index(self.structure, gather.maps, members)
        spec = gather.memo[key]
        if spec is None:
            return None
        out = []
        for src, index in spec:
            x = gather.inputs[src]
            if not isinstance(x, torch.Tensor):
                return None
            out.append(x.reshape(-1)[gather.index_on(index, x.device)].to(device=self.device, dtype=self.real_dtype))
        return out

    def matrix(self, si: int) -> torch.Tensor:
        """The slot's matrix, shape ``lead + (D, D)`` (lead: stack then batch axes where present)."""
        m = self._matrices.get(si)
        if m is not None:
            return m
        slot = self.structure.slots[si]
        dtype, device = self.dtype, self.device
        if slot.kind == "fast":
            m = fast_matrix(slot.name, self._params(si), dtype, device)
        elif slot.kind == "const":
            m = constant_matrix(self.group[0].tape.operations[slot.op_index], dtype, device)
        elif slot.kind == "matrix":
            m = self._broadcast_matrix(si)
            if m is None:
                m = self._per_variant(si, lambda op, p: generic_matrix(op, p, dtype, device))
        else:  # pragma: no cover - only gate kinds have matrices
            raise AssertionError(slot.kind)
        self._matrices[si] = m
        return m

    def slot(self, si: int) -> torch.Tensor:
        t = self._slots.get(si)
        if t is not None:
            return t
        slot = self.structure.slots[si]
        dtype, device = self.dtype, self.device
        if slot.kind in ("fast", "const", "matrix"):
            m = self.matrix(si)
            m = m.reshape(*m.shape[:-2], *(2,) * (2 * len(slot.wires)))
        elif slot.kind == "prep":
            m = self._per_variant(si, lambda op, p: state_vector(op, p, dtype, device))
        elif slot.kind == "phase":
            m = self._per_variant(si, lambda op, p: global_phase(p, dtype, device))
        else:  # pragma: no cover - the structure only makes the kinds above
            raise AssertionError(slot.kind)
        self._slots[si] = m
        return m

    def operand(self, o, matrix=None) -> torch.Tensor:
        if o.kind == "slot":
            t = self.slot(o.slot)
            if o.select is not None:
                t = t[o.select]
        elif o.kind == "zero":
            t = torch.tensor([1.0, 0.0], dtype=self.dtype, device=self.device)
        elif o.kind == "pauli":
            t = _pauli_tensor(o.letter, self.dtype, self.device)
        elif o.kind == "mpo":
            t = _mpo_tensor(o.data, self.dtype, self.device)
        else:  # "matrix": the observable's own matrix, bra indices first
            m = torch.as_tensor(matrix, device=self.device).to(self.dtype)
            k = m.shape[-1].bit_length() - 1
            t = m.reshape((2,) * (2 * k))
        return t.conj() if o.conj else t


def _column_index(structure: TapeStructure, maps, members: list[int]):
    """Per parameter of the gate kind: (input, [gates, ...] flat indices) when every gate's value comes from
    the same input with the same shape; else None."""
    n_params = structure.slots[members[0]].params[1] - structure.slots[members[0]].params[0]
    spec = []
    for k in range(n_params):
        entries = [maps[structure.slots[si].params[0] + k] for si in members]
        srcs = {e[0] for e in entries}
        if len(srcs) != 1 or "const" in srcs or len({tuple(e[1].shape) for e in entries}) != 1:
            return None
        spec.append((entries[0][0], torch.stack([e[1] for e in entries])))
    return spec


_PAULI_TENSORS: dict[tuple, torch.Tensor] = {}


def _mpo_tensor(data, dtype, device) -> torch.Tensor:
    """One site of a Pauli-sentence MPO, [left, right, bra, ket] without its size-1 boundary axes."""
    key = ("mpo", data, dtype, str(device))
    t = _PAULI_TENSORS.get(key)
    if t is None:
        (nl, nr), entries = data
        t = torch.zeros(nl, nr, 2, 2, dtype=dtype)
        for l, r, letter, c in entries:
            t[l, r] += c * torch.tensor(_PAULI[letter], dtype=dtype)
        t = t.reshape(*[d for d in (nl, nr) if d > 1], 2, 2).to(device)
        if len(_PAULI_TENSORS) < 4096:
            _PAULI_TENSORS[key] = t
    return t


def _pauli_tensor(letters: str, dtype, device) -> torch.Tensor:
    """One Pauli matrix for a single letter; a [terms, 2, 2] stack for a string (cached constants)."""
    key = (letters, dtype, str(device))
    t = _PAULI_TENSORS.get(key)
    if t is None:
        mats = [_PAULI[c] for c in letters]
        t = torch.tensor(mats[0] if len(letters) == 1 and letters != "I" else mats, dtype=dtype, device=device)
        if len(_PAULI_TENSORS) < 4096:
            _PAULI_TENSORS[key] = t
    return t


# --- entry point --------------------------------------------------------------------------


_DIFF_CACHE: dict = {}


def _differences(group: Sequence[Variant]) -> dict[int, list[int]]:
    """For each flat parameter position, the variants (by index, first excluded) whose value object is
    not the first variant's; identity checks run at C speed (map / compress)."""
    key = id(group)
    hit = _DIFF_CACHE.get(key)
    if hit is not None and hit[0] is group:
        return hit[1]
    first = group[0].params
    rows: dict[int, list[int]] = {}
    positions = range(len(first))
    for r in range(1, len(group)):
        params = group[r].params
        if params is first:
            continue
        for j in compress(positions, map(is_not, params, first)):
            rows.setdefault(j, []).append(r)
    _DIFF_CACHE.clear()
    _DIFF_CACHE[key] = (group, rows)
    return rows


def _stacked_slots(structure: TapeStructure, group: Sequence[Variant]) -> frozenset:
    if len(group) == 1:
        return frozenset()
    rows = _differences(group)
    ops0 = group[0].tape.operations
    out = set()
    for si, slot in enumerate(structure.slots):
        a, b = slot.params
        if any(j in rows for j in range(a, b)):
            out.add(si)
        elif slot.kind in ("matrix", "prep", "phase") and any(
            v.tape.operations[slot.op_index] is not ops0[slot.op_index] for v in group[1:]
        ):
            out.add(si)  # per-variant operators may differ in settings the structure key ignores
    return frozenset(out)


STRUCTURE_CACHE_SIZE = 64
"""Tapes (by identity: a cached preprocessed tape comes back every step) whose structure is remembered."""

_STRUCTURES: OrderedDict = OrderedDict()


def _cached_structure(tape, device_wires) -> TapeStructure:
    key = (id(tape), tuple(device_wires) if device_wires is not None else None)
    hit = _STRUCTURES.get(key)
    if hit is not None and hit[0] is tape:
        return hit[1]
    structure = tape_structure(tape, device_wires)
    _STRUCTURES[key] = (tape, structure)  # the tape is held, so its id cannot be reused meanwhile
    if len(_STRUCTURES) > STRUCTURE_CACHE_SIZE:
        _STRUCTURES.popitem(last=False)
    return structure


def simulate(
    variants: Sequence[Variant],
    device_wires,
    opts: SimOptions,
    cache: PlanCache,
) -> list[tuple[torch.Tensor, ...]]:
    """Results of every variant, each a tuple with one tensor per measurement.

    Variants of one structure run as one stacked network (a stack index over their differing gates).
    """
    structures: dict[int, TapeStructure] = {}
    groups: dict[tuple, list[int]] = {}
    for i, v in enumerate(variants):
        s = structures.get(id(v.tape))
        if s is None:
            s = structures[id(v.tape)] = _cached_structure(v.tape, device_wires)
        groups.setdefault(s.key, []).append(i)

    results: list = [None] * len(variants)
    for key, members in groups.items():
        structure = structures[id(variants[members[0]].tape)]
        group = [variants[i] for i in members]
        if len(group) > 1 and not observables_shared(structure.n_op_params, group):
            subgroups = [[i] for i in members]
        else:
            subgroups = [members]
        for sub in subgroups:
            grp = [variants[i] for i in sub]
            if len(grp) > 1:  # the group's readout takes the observables of its first variant's tape
                grp = sharing_observables(grp, structure.n_op_params)
                grp[0] = grp[0].with_observables_bound(structure.n_op_params)
            else:
                grp = [grp[0].with_observables_bound(structure.n_op_params)]
            outs = _run_group(structure, grp, opts, cache)
            for i, out in zip(sub, outs):
                results[i] = out
    return results


def _closed_measurable(mp) -> bool:
    """Whether a closed light-cone network can measure ``mp`` (no full state needed)."""
    if isinstance(mp, (ExpectationMP, VarianceMP)):
        return True
    return isinstance(mp, ProbabilityMP) and mp.obs is None


def _run_group(structure: TapeStructure, group: Sequence[Variant], opts: SimOptions, cache: PlanCache):
    stacked = _stacked_slots(structure, group)
    stack_size = len(group) if stacked else 0
    # wide circuits measure by light-cone networks, unless a measurement needs the whole state: then the
    # state program's memory guard, not a wire count, decides whether it can be simulated
    wide = len(structure.sim_wires) > STATE_MODE_MAX_WIRES and all(_closed_measurable(mp) for mp in group[0].tape.measurements)
    key = (structure.key, stacked, stack_size, wide, opts.dtype, str(opts.device), opts.backend)
    tape = group[0].tape
    if wide:
        program = cache.get(key, lambda: ClosedProgram(structure, stacked, stack_size, opts, tape))
    elif all(slot.kind != "prep" for slot in structure.slots):
        program = cache.get(key, lambda: VectorProgram(structure, stacked, stack_size, opts, tape))
    else:
        program = cache.get(key, lambda: StateProgram(structure, stacked, stack_size, opts))
    lead_shape = ((stack_size,) if stacked else ()) + (
        (structure.batch_size,) if structure.batch_size is not None else ()
    )
    values = _Values(structure, group, stacked, opts)
    outs = program.run(values, group[0], structure, lead_shape)
    if not stacked:
        return [tuple(outs)] * len(group)
    return list(zip(*(o.unbind(0) for o in outs)))


__all__ = ["simulate", "SimOptions", "PlanCache", "CacheInfo"]

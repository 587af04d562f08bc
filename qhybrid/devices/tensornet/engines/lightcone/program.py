"""Wide circuits measured term by term on light cones: ConeProgram.

Every Pauli word of every measured observable (the terms of a Hamiltonian, ``qml.sum``, ``qml.dot``,
``s_prod``) is measured on its reverse light cone (``cones``). Cones that are the same circuit up to a
relabelling of wires form a class (``classes``) that runs as ONE program over a stack of its members'
parameters: a compiled state-vector program (adjoint-differentiable as one autograd node) when the class
is narrow enough, else one closed network with the members on its stack index. Each measurement is then
the sum of its terms' coefficients times their values. Measurements that are not Pauli sentences (probs,
Hermitian matrices) go to a ``ClosedProgram`` of the whole circuit.

Members of a class whose parameters are equal (QAOA: one angle per layer) give the same value: each
distinct parameter row runs once (``shared.run_distinct``).
"""

from __future__ import annotations

from dataclasses import replace

import pennylane as qml
import torch
from pennylane.measurements import ExpectationMP
from torch.utils.weak import WeakIdKeyDictionary

from ..._options import SimOptions
from ..._structure import TapeStructure
from ..network.programs import ClosedProgram
from ..statevector.program import StateVectorProgram
from ..statevector.cost import rows_that_fit
from .budget import plan_shares
from .classes import ConeClass, cone_measurable, group_cones, measured_words, sentences
from .choice import EngineChoice, choose_class
from .coefficients import data_map
from .parameters import parameter_rows, row_sources, scalar
from .cones import cone_slots, make_cone
from .shared import BY_VALUES, member_groups, run_distinct
from ...._constants import literal, on_device
from .closed_classes import run_together
from .preplan import plan_closed_classes
from ..network.tree_grad import KeptBudget
from .spread import spread_group, spread_terms
from .values import ConeValues
from .bound_class import bound_row
from .stacked import joined, run_stacked
from .whole import closed_program, whole_candidates
from .stored import cone_key, describe, priced_choice, store_of

CONE_STATE_MAX_WIRES: int | None = None
"""None: each class runs as a state vector or a closed network by cost (``choice.choose_class``). A number
restores a width rule (classes up to that wide as state vectors, wider ones as closed networks), as tests
that pin an engine do."""

WHOLE_NETWORK_CANDIDATE_WIRES = 16
"""Measurements with a term whose cone is wider than this may be measured by one closed network of the
whole circuit instead (``whole.closed_program``: W3b's CNOT ladder, whose nested cones share their work)."""


def cones_apply(structure: TapeStructure, tape) -> bool:
    """Whether ConeProgram runs ``tape``: no state preparation, every gate parameter a scalar (or a
    broadcast vector), and some measurement a Pauli sentence."""
    if not any(cone_measurable(mp) for mp in tape.measurements):
        return False
    return not any(slot.kind == "prep" for slot in structure.slots) and scalar_data(structure, tape)


def scalar_data(structure: TapeStructure, tape) -> bool:
    """Whether every operator's data are scalars (or broadcast vectors): the cone classes' one parameter table holds
    nothing else (a matrix, or a ``QubitChannel``'s Kraus operators, crashed its ``stack``)."""
    for slot in structure.slots:
        if slot.kind in ("matrix", "fast", "channel"):
            for p in tape.operations[slot.op_index].data:
                if len(getattr(p, "shape", ())) > (1 if slot.batched else 0):
                    return False
    return True


def holds_matrix(op) -> bool:
    """Whether ``op`` holds a matrix among its data (a ``QubitUnitary``'s, a ``QubitChannel``'s Kraus operators), what
    ``scalar_data`` keeps out of the cone classes' parameter table (read on a tape, before its structure is made)."""
    return any(qml.math.ndim(p) >= 2 for p in op.data)


def _real(c):
    return c.real if isinstance(c, complex) or (isinstance(c, torch.Tensor) and c.is_complex()) else c


class ConeProgram:
    """Wide circuits: measured terms on light cones, isomorphic cones one stacked program per class."""

    def __init__(
        self,
        structure: TapeStructure,
        stacked: frozenset,
        stack_size: int,
        opts: SimOptions,
        tape,
        state_max_wires: int | None = None,
    ):
        self.structure, self.stack_size, self.opts = structure, stack_size, opts
        rule = state_max_wires if state_max_wires is not None else CONE_STATE_MAX_WIRES
        self.rows = max(stack_size, 1)
        pos = {w: i for i, w in enumerate(structure.sim_wires)}
        self.stacked, self.candidate_wires = stacked, WHOLE_NETWORK_CANDIDATE_WIRES if rule is None else rule
        # measurements that are not Pauli sentences: a closed network of the whole circuit in any case
        plain = [m for m, mp in enumerate(tape.measurements) if not cone_measurable(mp)]
        words, per_measurement = measured_words(tape, structure)
        self.term_of = {tuple(sorted(w.items())): t for t, w in enumerate(words)}
        # cones and prices a process built before (nothing goes to the whole circuit then: stored.py)
        store = store_of(opts) if not plain else None
        described = describe(self, structure, tape, opts, rule, words, per_measurement, torch.is_grad_enabled()) if store else None
        every = sorted({t for ts in per_measurement.values() for t in ts})
        stored = store.load(described, structure, words, every) if store is not None else None
        settled = stored is not None
        if stored is None:
            lit = [cone_slots(structure.slots, w) for w in words]  # each word's light cone, walked once
            widths = [_width(structure, w, k) for w, k in zip(words, lit)]
            built: dict = {}  # closed networks judged for the whole circuit, by term spec (built once)
            candidates = whole_candidates(
                per_measurement, widths, self.candidate_wires, structure, stacked, stack_size, opts, tape, words, built
            )
            settled = not plain and not candidates
            self.closed = closed_program(plain, candidates, structure, stacked, stack_size, opts, tape, built)
        else:
            self.closed = None
        self.closed_measurements = self.closed.only if self.closed is not None else frozenset()
        self._programs: dict = {}
        self._bound: dict = {}  # (state program, dtype, device) -> its bound program (bound_class)
        self._stacks = WeakIdKeyDictionary()  # parameter sources -> the classes' stacks (stacked.py)
        self._kept = KeptBudget(opts.max_memory)  # this step's room for kept intermediates (_run_classes)
        self._together: dict = {}  # (dtype, device, classes) -> those closed classes' ClassesTogether, or None
        self._preplanned = False  # whether the closed classes were planned together (preplan.py)
        kept = sorted({t for m, ts in per_measurement.items() if m not in self.closed_measurements for t in ts})
        cones = stored.cones if stored is not None else [make_cone(structure, words[t], lit[t]) for t in kept]
        self.classes: list[ConeClass] = group_cones(tape, structure, cones)
        for c in self.classes:
            c.terms = [kept[i] for i in c.terms]
        self._networks: dict = {}  # id(class) -> its networks as its engine choice built them (by term spec)
        self.choices = [self._choose(c, rule, stored) for c in self.classes]
        """Per class (in ``classes`` order): its ``EngineChoice``, decided once with the structure."""
        if store is not None and stored is None and settled:
            store.save(described, cones, self.classes, self.choices)
        self.cone_key = cone_key(described) if store is not None and settled else None
        """The cone store's key of this program's entry (None: not kept), naming what is kept beside it."""
        self._closed_class = {id(c): ch.engine == "closed network" for c, ch in zip(self.classes, self.choices)}
        for c in self.classes:  # a class run as a state vector needs no network
            if not self._closed_class[id(c)]:
                self._networks.pop(id(c), None)
        # closed classes' networks are planned at their first run with a new stack size, each within its
        # share of the structure's planning budget by its network's flops (what the choice took is not path
        # search: charging it left Q100 p=4's classes nothing)
        self._plan_time = plan_shares(self.classes, self.choices, opts.plan_time, opts.plan_time > 0)
        self.position = {t: i for i, t in enumerate(t for c in self.classes for t in c.terms)}
        self._maps = self._data_maps(tape, pos)
        self.reads_observable_data = all(
            mp.obs is None or not mp.obs.data or m in self._maps for m, mp in enumerate(tape.measurements)
        )
        """Whether ``run`` reads every observable's data from the variant's parameters (then the
        simulator need not bind them into a copy of the tape)."""
        self._coeffs: tuple | None = None  # (tape, coefficients) of the last tape read
        self._stacked: tuple | None = None  # (coefficients, [S, T] matrix, constants) of that tape
        self.executions = 0
        """Class programs run so far (one per class and call, whatever its number of members)."""

    def _choose(self, c: ConeClass, rule: int | None, stored=None) -> EngineChoice:
        what = f"cone class of {c.width} wires, {len(c.terms)} terms"
        if rule is not None:
            engine = "closed network" if c.width > rule else "state vector"
            return EngineChoice(what, engine, f"width rule: state vectors up to {rule} wires", None, None, None, None)
        if stored is not None:  # the price a process found before, decided again under these options
            choice = priced_choice(what, c, stored.prices.get(c.terms[0]), self.opts, torch.is_grad_enabled())
            if choice is not None:
                return choice
        itemsize = self.opts.dtype.itemsize
        keep = self._networks[id(c)] = {}
        return choose_class(what, c.structure, c.view, self.opts, itemsize, torch.is_grad_enabled(), keep)

    # --- running -------------------------------------------------------------------------------
    def _program(self, c: ConeClass, k: int, closed: bool):
        """The class's program for ``k`` stacked rows (a closed network or a state vector), built once."""
        key = ("closed" if closed else "state", id(c), k)
        program = self._programs.get(key)
        if program is None:
            members = frozenset(si for si, s in enumerate(c.structure.slots) if s.params[1] > s.params[0])
            stacked, size = (members, k) if k > 1 else (frozenset(), 0)
            if closed and not self._preplanned:  # every closed class's networks in one planning call (cores)
                self._preplanned = True
                plan_closed_classes(self)
            if closed:
                # one row: the networks the engine choice priced (built for no stack) are this program's
                built = self._networks.pop(id(c), None) if not stacked else None
                opts = replace(self.opts, plan_time=self._plan_time[id(c)])
                program = ClosedProgram(c.structure, stacked, size, opts, c.view, networks=built)
            else:
                program = StateVectorProgram(c.structure, stacked, size, c.tape, self.opts.dtype, self.opts.max_memory,
                                             self.opts.device)
            self._programs[key] = program
        return program

    def _run_state(self, c: ConeClass, columns: torch.Tensor, dtype, device) -> torch.Tensor:
        """``[K]`` or ``[K, B]`` values of the class for ``K`` parameter rows ``columns``; in parts of rows whose
        stacked state fits ``max_memory`` where all ``K`` at once do not (the class was priced for one member:
        a parameter-shift's rows, or many terms, stack past it)."""
        k = columns.shape[0]
        rows = rows_that_fit(c.structure, k, self.opts.dtype.itemsize, self.opts.max_memory, torch.is_grad_enabled())
        if rows < k:
            return torch.cat([self._run_state(c, columns[i : i + rows], dtype, device) for i in range(0, k, rows)])
        program = self._program(c, k, closed=False)
        self.executions += 1
        value = bound_row(self._bound, program, c, columns, dtype, device)
        if value is not None:  # one row of a class without a batch: one bound node (bound_class)
            return value
        values = ConeValues(c.structure, c.tape, columns if k > 1 else columns[0], k > 1, dtype, device)
        values.prefetch(program.matrix_slots)  # gates of diagonal runs are read as angles, not matrices
        out = program.run_expvals(values)[0]  # [S', B']
        return out.reshape(k, -1) if c.structure.batch_size is not None else out.reshape(k)

    def _run_closed(self, c: ConeClass, columns: torch.Tensor, dtype, device) -> torch.Tensor:
        """``[K]`` or ``[K, B]`` values of a class too wide for a state vector: one closed network."""
        k = columns.shape[0]
        program = self._program(c, k, closed=True)
        values = ConeValues(c.structure, c.tape, columns if k > 1 else columns[0], k > 1, dtype, device)
        batch = c.structure.batch_size
        lead = ((k,) if k > 1 else ()) + ((batch,) if batch is not None else ())
        self.executions += 1
        program.admit(self._kept)
        out = program.run(values, _Sub(c.view), c.structure, lead)[0]
        return out.reshape(k, -1) if batch is not None else out.reshape(k)

    def _class_values(self, c: ConeClass, params: torch.Tensor, values, sources=None) -> torch.Tensor:
        """``[rows, members, B']`` values of the class's members (``sources``: ``row_sources``'s, or None)."""
        m = len(c.terms)
        cols = params[:, on_device(c.table, params.device)]  # [rows, M, P(, B)]
        cols = cols.reshape(self.rows * m, *cols.shape[2:])
        dtype, device = values.dtype, values.device
        run = self._run_closed if self._closed_class[id(c)] else self._run_state
        if c.structure.batch_size is None:
            groups = BY_VALUES if sources is None else member_groups(sources, c.table, params.device)
            out = run_distinct(lambda u: run(c, u, dtype, device), cols, groups)
        else:
            out = run(c, cols, dtype, device)
        return out.reshape(self.rows, m, -1)

    def _run_classes(self, params: torch.Tensor, values, sources=None) -> list[torch.Tensor]:
        """Every class of this step, run: ``[rows, members, B']`` values each, in ``self.classes`` order
        (the one place the step's independent classes are executed); closed classes together where they can."""
        done = run_together(self, params, values, sources)
        # the closed classes' trees keep their intermediates for the backward while their sum fits max_memory
        self._kept = KeptBudget(self.opts.max_memory)
        done.update(run_stacked(self, params, values, sources, done))  # state classes as one stacked state
        return [done[id(c)] if id(c) in done else self._class_values(c, params, values, sources) for c in self.classes]

    def _data_maps(self, tape, pos) -> dict:
        """Per expval of a Hamiltonian measured by cones: its coefficients' DataMap (where it has one)."""
        def position(word):
            t = self.term_of.get(tuple(sorted((pos[w], letter) for w, letter in word.items())))
            return self.position.get(t)

        maps, offset = {}, self.structure.n_op_params
        for m, mp in enumerate(tape.measurements):
            if mp.obs is None:
                continue
            if m not in self.closed_measurements and isinstance(mp, ExpectationMP):
                found = data_map(mp.obs, offset, position, len(self.position))
                if found is not None:
                    maps[m] = found
            offset += len(mp.obs.data)
        return maps

    def _coefficients(self, variant, values) -> list:
        """Per measurement: (coefficient vectors over the terms, one per sentence; constants)."""
        out = self._tape_coefficients(variant.tape, values)
        if self._maps:
            out = list(out)
            for m, dm in self._maps.items():
                out[m] = [dm.coefficients(variant.params, values.real_dtype, values.device)]
        return out

    def _tape_coefficients(self, tape, values) -> list:
        """``_coefficients`` read from the tape's observables (cached while the tape is the same)."""
        if self._coeffs is not None and self._coeffs[0] is tape:
            return self._coeffs[1]
        out, cacheable = [], True
        n_terms = len(self.position)
        pos = {w: i for i, w in enumerate(self.structure.sim_wires)}
        for m, mp in enumerate(tape.measurements):
            if m in self.closed_measurements or m in self._maps:
                out.append(None)
                continue
            per = []
            for ps in sentences(mp):
                index, coeffs, constant = [], [], 0.0
                for word, c in ps.items():
                    c = _real(c)
                    if not word:
                        constant = constant + c
                        continue
                    term = self.term_of[tuple(sorted((pos[w], letter) for w, letter in word.items()))]
                    index.append(self.position[term])
                    coeffs.append(c)
                cacheable = cacheable and not any(isinstance(c, torch.Tensor) for c in coeffs + [constant])
                vec = torch.zeros(n_terms, dtype=values.real_dtype, device=values.device)
                if coeffs:
                    cs = torch.stack([scalar(c, values.real_dtype, values.device) for c in coeffs])
                    at = literal(tuple(index), values.device, torch.long)  # (once per device)
                    vec = vec.index_put((at,), cs, accumulate=True)
                per.append((vec, constant))
            out.append(per)
        if cacheable:
            self._coeffs = (tape, out)  # the last tape only: a cache per tape would keep every step's tape alive
        return out

    def run(self, values, variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        group = values.group if hasattr(values, "group") else [variant]
        terms = None
        if self.classes:
            params = parameter_rows(self.structure, self.rows, group, values)
            ranks = spread_group(getattr(self.opts, "spread_classes", False))  # None: every class here
            if ranks is not None:
                terms = spread_terms(ranks, self.classes, lambda c, p: self._class_values(c, p, values), params)
            else:
                parts = self._run_classes(params, values, row_sources(self.structure, self.rows, group))
                terms = joined(parts)  # [rows, T, B']
        closed = {}
        if self.closed is not None:
            measured = sorted(self.closed.only)
            closed = dict(zip(measured, self.closed.run(values, variant, structure, lead_shape)))
        coefficients = self._coefficients(variant, values)
        if terms is None:  # no word on any cone (expval(I), Z0 @ Z0): the sentences are their constants
            terms = torch.zeros(self.rows, 0, structure.batch_size or 1, dtype=values.real_dtype, device=values.device)
        sentence_values = self._sentence_values(terms, coefficients, values, lead_shape)
        out, k = [], 0
        for m, per in enumerate(coefficients):
            if m in closed:
                out.append(closed[m])
                continue
            sums = sentence_values[k : k + len(per)]
            k += len(per)
            out.append(sums[0] if len(sums) == 1 else sums[1] - sums[0] ** 2)
        return out

    def _sentence_values(self, terms: torch.Tensor, coefficients: list, values, lead_shape) -> tuple:
        """Every cone-measured sentence's value in the result's lead shape, from ONE product of the terms'
        values with the stacked coefficient vectors (150 edge expvals: one einsum, not 150, and one node
        for autograd to walk back)."""
        stacked = self._stacked
        if stacked is None or stacked[0] is not coefficients:
            pairs = [pair for m, per in enumerate(coefficients) if m not in self.closed_measurements for pair in per]
            if not pairs:
                return ()
            matrix = torch.stack([vec for vec, _ in pairs])  # [S, T]
            constants = None
            if any(isinstance(c, torch.Tensor) or c != 0 for _, c in pairs):
                constants = torch.stack([scalar(c, values.real_dtype, values.device) for _, c in pairs])
            stacked = (coefficients, matrix, constants)
            if coefficients is (self._coeffs[1] if self._coeffs is not None else None):
                self._stacked = stacked  # the tape's own coefficients: as long-lived as that cache
        _, matrix, constants = stacked
        r, t, b = terms.shape
        if r * b == 1 and terms.dtype == matrix.dtype:  # one row, no batch: one mm (einsum: a dozen ops each way)
            sums = torch.mm(matrix, terms.view(t, 1)).view(-1, 1, 1)
        else:
            sums = torch.einsum("rtb,st->srb", terms, matrix)
        if constants is not None:
            sums = sums + constants[:, None, None]
        return _to_lead(sums, lead_shape, self.stack_size).unbind(0)


class _Sub:
    """The variant a class's closed network reads its measurement from."""

    def __init__(self, tape):
        self.tape = tape


def _width(structure: TapeStructure, word: dict, kept: list) -> int:
    """The width of ``word``'s light cone (``kept``: its slots)."""
    slots = structure.slots
    return len(set(word).union(*(slots[si].wires for si in kept)))


def _to_lead(value: torch.Tensor, lead_shape: tuple, stack_size: int) -> torch.Tensor:
    """``[S, rows, B']`` sentence values to ``[S, *lead_shape]`` (stack and batch axes where the circuit
    has them)."""
    if not stack_size:
        value = value[:, 0]
    if len(lead_shape) == (1 if stack_size else 0):  # no batch axis
        return value[..., 0]
    return value.expand(value.shape[0], *lead_shape)


__all__ = ["ConeProgram", "cones_apply", "cone_measurable", "scalar_data", "holds_matrix", "CONE_STATE_MAX_WIRES"]

"""Tapes in, torch results out: group by structure, build operands, contract with a cached plan, measure.

Pure functions except the plan cache, which is the point: a structure seen before (another batch,
epoch, or shifted copy of a tape) reuses its network and contraction path.
"""

from __future__ import annotations

from collections import OrderedDict
from operator import is_
from typing import Sequence

import torch
from pennylane.measurements import ExpectationMP, ProbabilityMP, VarianceMP

from .readout.measure import StateReader
from .readout.pauli_tables import pauli_expval
from .readout.sentence_data import sentence_map
from .._observable_key import observable_data
from .readout.result_size import refuse_unreturnable
from .readout.shared_observables import observables_shared, sharing_observables
from .engines.statevector.program import StateVectorProgram
from .engines.statevector.product import basis_program
from ..._variant import Variant
from ...errors import ContractionTooLargeError
from .._collector import collector_paused
from ._structure import TapeStructure, tape_structure
from ._options import CacheInfo, PlanCache, SimOptions
from ._values import _Values, _stacked_slots
from .engines.network.programs import ClosedProgram, StateProgram
from .engines.lightcone.choice import EngineChoice, WHOLE_STATE_SURE_WIRES, choose_class, network_cost, state_side
from .engines.lightcone.classes import group_cones, measured_words
from .engines.lightcone.cones import make_cone
from .engines.lightcone.program import ConeProgram, cones_apply
from .engines.lightcone.unitary_guard import non_unitary_matrix, state_vector_for
from .engines.mps.run import run_mps
from .engines.mixed import has_channels, run_mixed

STATE_MODE_MAX_WIRES: int | None = None
"""None: whether a circuit runs as one state vector (every measurement read from it) or by light cones and
closed networks (each Pauli term on its reverse light cone, isomorphic cones one stacked program, one closed
network per other observable) is decided by cost, once per structure (``_choose_whole``). A number restores
a wire rule: state vectors up to that many wires, light cones above (tests that pin an engine set 0)."""


# --- programs -----------------------------------------------------------------------------


class VectorProgram:
    """Circuits without state preparation run as one compiled state-vector program
    (``engines.statevector.program``; its memory is checked against ``max_memory`` before it is built)."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape):
        self.program = StateVectorProgram(structure, stacked, stack_size, tape, opts.dtype, opts.max_memory, opts.device)
        self.sentences = sentence_maps(tape, structure)
        self.reads_observable_data = self.sentences is not None
        """Whether ``run`` reads every observable's data from the variant's parameters (trainable Hamiltonian
        coefficients, ``readout/sentence_data.py``): the simulator then binds nothing into a copy of the tape."""

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(self.program.matrix_slots)
        if self.program.measure is not None:
            vals = self.program.run_expvals(values)
            return [v.reshape(lead_shape) for v in vals.unbind(0)]
        psi = self.program.run(values, lead_shape)
        return measure_state(psi, lead_shape, structure, variant.tape.measurements, self.sentences, variant)


def sentence_maps(tape, structure: TapeStructure) -> dict | None:
    """Where some observable carries tensor data: per measurement with data, its ``SentenceMap``. None where
    none carries tensors (the tape's own observables are read, bound where a variant's differ) or one with
    data has no map."""
    data = [observable_data(mp.obs) if mp.obs is not None else () for mp in tape.measurements]
    if not any(isinstance(d, torch.Tensor) for per in data for d in per):
        return None
    maps, offset = {}, structure.n_op_params
    positions = {w: i for i, w in enumerate(structure.sim_wires)}
    for m, (mp, per) in enumerate(zip(tape.measurements, data)):
        if per:
            found = None
            if type(mp) is ExpectationMP and all(not isinstance(d, torch.Tensor) or d.ndim == 0 for d in per):
                found = sentence_map(mp.obs, offset, positions)
            if found is None:
                return None
            maps[m] = found
        offset += len(per)
    return maps


def measure_state(psi: torch.Tensor, lead_shape, structure: TapeStructure, measurements, sentences=None,
                  variant=None) -> list[torch.Tensor]:
    """``measurements`` read from a state-vector program's ``[2**n, S', B']`` final state (``sentences``:
    the measurements whose coefficients are read from ``variant``'s parameters)."""
    n = len(structure.sim_wires)
    flat = psi.reshape(psi.shape[0], -1).transpose(0, 1)
    reader = StateReader(flat.reshape((*lead_shape, *(2,) * n)), len(lead_shape), structure.sim_wires)
    out = []
    for m, mp in enumerate(measurements):
        found = sentences.get(m) if sentences else None
        if found is None:
            out.append(reader.measure(mp))
            continue
        c = found.coefficients(variant, flat.real.dtype, flat.device)
        out.append(pauli_expval(flat, found.table, c).reshape(lead_shape))
    return out


# --- entry point --------------------------------------------------------------------------


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
    if opts.mps is not None:  # method="mps": a batched, truncated MPS per variant (engines.mps)
        return run_mps(variants, device_wires, opts, cache)
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
            _run_in_stacks(structure, sub, variants, opts, cache, results)
    return results


def _run_in_stacks(structure: TapeStructure, members: list, variants, opts: SimOptions, cache: PlanCache,
                   results) -> None:
    """``results[i]`` for the variants ``members`` of one structure, stacked in one run where it fits ``max_memory``,
    else in stacks half as large, down to one variant a run (refused only then): a parameter-shift step's 48
    shifted circuits of 26 wires were refused as one stack of 48 states where each alone fits. The stack size
    that fitted is remembered per structure, so later steps do not try the larger one again."""
    key = plan_key(structure, frozenset(), 0, opts)
    size = min(len(members), cache.stack_limits.get(key, len(members)))
    start = 0
    while start < len(members):
        part = members[start : start + size]
        try:
            outs = _run_group(structure, [variants[i] for i in part], opts, cache)
        except ContractionTooLargeError:
            if len(part) == 1:
                raise
            size = cache.stack_limits[key] = (len(part) + 1) // 2
            continue
        for i, out in zip(part, outs):
            results[i] = out
        start += len(part)


def _closed_measurable(mp) -> bool:
    """Whether a closed light-cone network can measure ``mp`` (no full state needed)."""
    if isinstance(mp, (ExpectationMP, VarianceMP)):
        return True
    return isinstance(mp, ProbabilityMP) and mp.obs is None


def _bound(structure: TapeStructure, group: Sequence[Variant]) -> list[Variant]:
    """The group with its first tape's observables carrying the variants' observable parameters (the
    group's readout takes the observables of its first variant's tape)."""
    if len(group) > 1:
        grp = sharing_observables(list(group), structure.n_op_params)
        grp[0] = grp[0].with_observables_bound(structure.n_op_params)
    else:
        grp = [group[0].with_observables_bound(structure.n_op_params)]
    # the same variants stay the same list: their parameter differences are cached by the list's identity
    return group if all(map(is_, grp, group)) else grp


def build_program(structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape):
    """The program that runs ``structure`` (the plan cache's factory), its ``engine_choices`` recorded: one
    state vector, a state contraction (state preparation), light cones or closed networks; built with the
    cyclic collector paused (``devices/_collector``: the one-node path built without it and spent 0.3 s of
    Q100 p=4's second process in full collections)."""
    with collector_paused():
        return _build_program(structure, stacked, stack_size, opts, tape)


def _build_program(structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape):
    n = len(structure.sim_wires)
    if not all(_closed_measurable(mp) for mp in tape.measurements):
        # a measurement needs the whole state: the state program's memory guard decides whether it runs
        lead = max(stack_size, 1) * (structure.batch_size or 1)
        refuse_unreturnable(tape.measurements, n, lead, opts.dtype.itemsize, opts.max_memory)
        what = f"whole circuit, {n} wires"
        choice = EngineChoice(what, "state vector", "a measurement needs the whole state", None, None, None, None)
    else:
        choice = _choose_whole(structure, stack_size, opts, tape)
        odd = non_unitary_matrix(tape) if choice.engine != "state vector" else None
        if odd is not None:  # (light cones and networks hold for unitary gates only)
            lead = max(stack_size, 1) * (structure.batch_size or 1)
            choice = state_vector_for(odd, choice.what, structure, lead, opts, len(measured_words(tape, structure)[0]))
    if choice.engine != "state vector":
        if cones_apply(structure, tape):
            program = ConeProgram(structure, stacked, stack_size, opts, tape, STATE_MODE_MAX_WIRES)
        else:
            program = ClosedProgram(structure, stacked, stack_size, opts, tape)
    elif basis_program(structure, stacked, tape):
        program = VectorProgram(structure, stacked, stack_size, opts, tape)
    else:
        program = StateProgram(structure, stacked, stack_size, opts)
    program.engine_choices = (choice, *getattr(program, "choices", ()))
    return program


def _choose_whole(structure: TapeStructure, stack_size: int, opts: SimOptions, tape) -> EngineChoice:
    """One state vector, or light cones (closed networks where cones do not apply), for the whole circuit:
    the cheaper that fits ``max_memory``."""
    n = len(structure.sim_wires)
    what = f"whole circuit, {n} wires"
    if STATE_MODE_MAX_WIRES is not None:
        engine = "state vector" if n <= STATE_MODE_MAX_WIRES else "light cones"
        return EngineChoice(what, engine, f"wire rule: state vectors up to {STATE_MODE_MAX_WIRES} wires", None, None, None, None)
    itemsize = opts.dtype.itemsize
    gradient = torch.is_grad_enabled()
    rows = max(stack_size, 1)
    words, _ = measured_words(tape, structure)
    flops, peak = state_side(structure, rows * (structure.batch_size or 1), itemsize, gradient, len(words))
    wide = "light cones" if cones_apply(structure, tape) else "closed network"
    if peak > opts.max_memory:
        return EngineChoice(what, wide, "its state vector does not fit max_memory", flops, peak, None, None)
    if n <= WHOLE_STATE_SURE_WIRES:
        return EngineChoice(what, "state vector", f"at most {WHOLE_STATE_SURE_WIRES} wires", flops, peak, None, None)
    if wide == "light cones":
        other, other_bytes = _cones_cost(structure, tape, words, opts, itemsize, gradient, rows, flops)
    else:
        priced = network_cost(structure, tape, opts, itemsize, gradient)
        other, other_bytes = priced if priced is not None else (None, None)
    if other is not None and other < flops and other_bytes <= opts.max_memory:
        return EngineChoice(what, wide, "cheaper", flops, peak, other, other_bytes)
    reason = "cheaper" if other is not None and other >= flops else f"no {wide} measure it"
    if other is not None and other < flops:
        reason = f"its {wide} do not fit max_memory"
    return EngineChoice(what, "state vector", reason, flops, peak, other, other_bytes)


def _cones_cost(structure, tape, words, opts, itemsize: int, gradient: bool, rows: int, limit: float):
    """(flops, largest bytes) of the circuit's light-cone classes, each as the cheaper of its state vector
    and its closed network. Classes are priced widest first and the pricing stops once the sum passes
    ``limit`` (the state vector then wins): a deep circuit's first cone is the whole circuit, and building
    every class's sub-tape would cost seconds more."""
    members: dict[tuple, list] = {}
    for w in words:
        cone = make_cone(structure, w)
        members.setdefault(cone.key, []).append(cone)
    total, largest = 0.0, 0.0
    for cones in sorted(members.values(), key=lambda cs: -(len(cs[0].slots) << cs[0].width) * len(cs)):
        (c,) = group_cones(tape, structure, cones[:1])
        choice = choose_class("", c.structure, c.view, opts, itemsize, gradient)
        if choice.engine == "closed network":
            cost, size = choice.network_flops, choice.network_bytes
        else:
            cost, size = choice.state_flops, choice.state_bytes
        total += cost * rows * len(cones)
        largest = max(largest, size or 0.0)
        if total >= limit:
            break
    return total, largest


def plan_key(structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions) -> tuple:
    """The plan cache's key of a structure's compiled program (shared with the bound path's lookup)."""
    return (structure.key, stacked, stack_size, opts.dtype, str(opts.device), opts.backend)


def _run_group(structure: TapeStructure, group: Sequence[Variant], opts: SimOptions, cache: PlanCache):
    if has_channels(structure):  # noisy circuits: the density-matrix engine (engines.mixed)
        return run_mixed(structure, _bound(structure, group), opts, cache, simulate)
    stacked = _stacked_slots(structure, group)
    stack_size = len(group) if stacked else 0
    key = plan_key(structure, stacked, stack_size, opts)
    tape = group[0].tape
    # which program is decided once per structure, by the cache's factory
    program = cache.get(key, lambda: build_program(structure, stacked, stack_size, opts, tape))
    if not getattr(program, "reads_observable_data", False):
        group = _bound(structure, group)
    lead_shape = ((stack_size,) if stacked else ()) + (
        (structure.batch_size,) if structure.batch_size is not None else ()
    )
    values = _Values(structure, group, stacked, opts)
    outs = program.run(values, group[0], structure, lead_shape)
    if not stacked:
        return [tuple(outs)] * len(group)
    return list(zip(*(o.unbind(0) for o in outs)))


__all__ = ["simulate", "SimOptions", "PlanCache", "CacheInfo"]

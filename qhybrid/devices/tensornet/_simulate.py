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

from ...errors import ContractionTooLargeError
from .readout.measure import StateReader
from .engines.network.plan import _fmt_bytes
from .readout.shared_observables import observables_shared, sharing_observables
from .engines.statevector.program import StateVectorProgram
from ..._variant import Variant
from ._structure import TapeStructure, tape_structure
from ._options import CacheInfo, PlanCache, SimOptions
from ._values import _Values, _stacked_slots
from .engines.network.programs import ClosedProgram, StateProgram
from .engines.lightcone.program import CONE_STATE_MAX_WIRES, ConeProgram, cones_apply
from .engines.mps.run import run_mps
from .engines.mixed import has_channels, run_mixed

STATE_MODE_MAX_WIRES = 20
"""Circuits on at most this many wires are contracted to their state once and every measurement is read
from it; wider circuits measure each Pauli term on its light cone (``engines.lightcone``: isomorphic cones
one stacked program) and contract one closed network per other observable."""


# --- programs -----------------------------------------------------------------------------


class VectorProgram:
    """Narrow circuits without state preparation: a compiled state-vector program (``engines.statevector.program``)."""

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
                "or a smaller batch, raise the device's max_memory, or simulate it approximately as a matrix "
                "product state: qhybrid.device('tensornet', ..., method=\"mps\", max_bond_dim=64)."
            )

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(self.program.matrix_slots)
        if self.program.measure is not None:
            vals = self.program.run_expvals(values)
            return [v.reshape(lead_shape) for v in vals.unbind(0)]
        return measure_state(self.program.run(values, lead_shape), lead_shape, structure, variant.tape.measurements)


def measure_state(psi: torch.Tensor, lead_shape, structure: TapeStructure, measurements) -> list[torch.Tensor]:
    """``measurements`` read from a state-vector program's ``[2**n, S', B']`` final state."""
    n = len(structure.sim_wires)
    psi = psi.reshape(psi.shape[0], -1).transpose(0, 1).reshape(*lead_shape, *(2,) * n)
    reader = StateReader(psi, len(lead_shape), structure.sim_wires)
    return [reader.measure(mp) for mp in measurements]


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
        return run_mps(variants, device_wires, opts)
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
            outs = _run_group(structure, [variants[i] for i in sub], opts, cache)
            for i, out in zip(sub, outs):
                results[i] = out
    return results


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


def plan_key(structure: TapeStructure, stacked: frozenset, stack_size: int, wide: bool, opts: SimOptions) -> tuple:
    """The plan cache's key of a structure's compiled program (shared with the bound path's lookup)."""
    return (structure.key, stacked, stack_size, wide, opts.dtype, str(opts.device), opts.backend)


def _run_group(structure: TapeStructure, group: Sequence[Variant], opts: SimOptions, cache: PlanCache):
    if has_channels(structure):  # noisy circuits: the density-matrix engine (engines.mixed)
        return run_mixed(structure, _bound(structure, group), opts, cache, simulate)
    stacked = _stacked_slots(structure, group)
    stack_size = len(group) if stacked else 0
    # wide circuits measure by light-cone networks, unless a measurement needs the whole state: then the
    # state program's memory guard, not a wire count, decides whether it can be simulated
    wide = len(structure.sim_wires) > STATE_MODE_MAX_WIRES and all(_closed_measurable(mp) for mp in group[0].tape.measurements)
    key = plan_key(structure, stacked, stack_size, wide, opts)
    tape = group[0].tape
    if wide:  # which wide program is decided once per structure, by the cache's factory
        narrow = min(CONE_STATE_MAX_WIRES, STATE_MODE_MAX_WIRES)  # cones of at most this many wires: state vectors

        def wide_program():
            if cones_apply(structure, tape):
                return ConeProgram(structure, stacked, stack_size, opts, tape, narrow)
            return ClosedProgram(structure, stacked, stack_size, opts, tape)

        program = cache.get(key, wide_program)
    elif all(slot.kind != "prep" for slot in structure.slots):
        program = cache.get(key, lambda: VectorProgram(structure, stacked, stack_size, opts, tape))
    else:
        program = cache.get(key, lambda: StateProgram(structure, stacked, stack_size, opts))
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

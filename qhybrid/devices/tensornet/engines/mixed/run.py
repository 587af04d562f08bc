"""The simulator's hook into the mixed-state engine: a structure with channels runs here, one compiled
``MixedProgram`` per structure in the device's plan cache."""

from __future__ import annotations

from typing import Sequence

from ..._values import _Values, _stacked_slots
from ..lightcone.choice import EngineChoice
from .channels import check_channel, is_channel
from .cones import cone_program, cones_apply
from .program import MixedProgram
from .trajectories import run_trajectories


def has_channels(structure) -> bool:
    """Whether a tape structure holds a channel (then only the mixed-state engine can run it)."""
    return structure.has_channels


def run_mixed(structure, group: Sequence, opts, cache, simulate_pure=None) -> list[tuple]:
    """Results of a group of variants of one noisy structure (observables already bound to the tapes), each a
    tuple with one tensor per measurement; variants that differ in parameters run as one stacked program.
    With ``opts.noise == "trajectories"`` they run as pure-state trajectories through ``simulate_pure``."""
    trajectories = getattr(opts, "noise", "exact") == "trajectories"
    for v in group:
        for op in v.tape.operations:
            if is_channel(op):
                check_channel(op)  # (a batch axis on its strengths too)
    if trajectories:
        n = len(structure.sim_wires)
        cache.get(("trajectories", structure.key, opts.trajectories), lambda: EngineRecord(EngineChoice(
            f"noisy circuit, {n} wires", "trajectories", f"noise='trajectories': {opts.trajectories} pure-state "
            "trajectories a sample, the batch of one pure-state run (its engine is listed beside this one)",
            None, None, None, None)))
        return run_trajectories(group, opts, simulate_pure, structure.sim_wires, cache)
    stacked = _stacked_slots(structure, group)
    stack_size = len(group) if stacked else 0
    program = None
    if cones_apply(structure, group[0].tape):
        program = cone_program(structure, stacked, stack_size, opts, group[0].tape, cache)
        program = program if program.narrower else None
    if program is None:
        key = ("mixed", structure.key, stacked, stack_size, opts.dtype, str(opts.device))
        program = cache.get(key, lambda: MixedProgram(structure, stacked, stack_size, opts, group[0].tape))
    lead_shape = ((stack_size,) if stacked else ()) + ((structure.batch_size,) if structure.batch_size is not None else ())
    values = _Values(structure, group, stacked, opts)
    outs = program.run(values, group[0], structure, lead_shape)
    if not stacked:
        return [tuple(outs)] * len(group)
    return list(zip(*(o.unbind(0) for o in outs)))


class EngineRecord:
    """A plan-cache entry that only says what ran (``PlanCache.info`` lists its ``engine_choices``)."""

    def __init__(self, *choices: EngineChoice):
        self.engine_choices = choices

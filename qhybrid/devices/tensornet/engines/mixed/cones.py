"""Wide noisy circuits by light cones: every Pauli term of every expectation value keeps only the operators in its
reverse light cone (``engines.lightcone.cones``: a trace-preserving channel whose wires no kept operator touches
later drops out exactly, as a commuting gate does) and runs as an exact density matrix of the cone.

This is the pure engine's ``ConeProgram`` (``engines.lightcone.program``) with a density-matrix program per
class: cones that are the same circuit up to relabelling form one class (one sub-tape, its members' parameters
gathered by one index table), the class runs once per distinct parameter row (a QAOA layer's one angle and one
noise strength on every edge: one row), and the measured sentences are one product of the terms' values with
their coefficients. Everything that depends only on the structure (cones, classes, tables, programs) is built
once, in the plan cache.
"""

from __future__ import annotations

import torch
from pennylane.measurements import ExpectationMP

from ..lightcone.choice import EngineChoice
from ..lightcone.program import ConeProgram, scalar_data
from ..lightcone.values import ConeValues
from .program import MixedProgram

CONE_MIN_WIRES = 12
"""Noisy circuits on more wires than this measure Pauli-sentence expectation values cone by cone."""


def cones_apply(structure, tape) -> bool:
    """Whether ``tape`` is measured by light cones: wide, unbatched, only expectation values of Pauli sentences."""
    if len(structure.sim_wires) <= CONE_MIN_WIRES or structure.batch_size is not None:
        return False
    if not scalar_data(structure, tape):  # (a QubitChannel's or a matrix's data: not the classes' parameters)
        return False
    return all(isinstance(mp, ExpectationMP) and mp.obs is not None and mp.obs.pauli_rep is not None
               for mp in tape.measurements)


class _Sub:
    """The variant a class program reads its measurement from."""

    def __init__(self, tape):
        self.tape = tape


class MixedConeProgram(ConeProgram):
    """``ConeProgram`` whose classes run as stacked density-matrix programs (``MixedProgram``)."""

    def __init__(self, structure, stacked: frozenset, stack_size: int, opts, tape):
        # the width rule at the circuit's width: no whole-circuit network (channels have none), no engine choice
        super().__init__(structure, stacked, stack_size, opts, tape, state_max_wires=len(structure.sim_wires))
        self.choices = [EngineChoice(f"cone class of {c.width} wires, {len(c.terms)} terms", "density matrix",
                                     "a noisy cone", None, None, None, None) for c in self.classes]
        self.narrower = all(c.width < len(structure.sim_wires) for c in self.classes)
        """Whether every cone is narrower than the circuit (else the whole density matrix runs: a cone as wide
        as its circuit gains nothing, and measuring it by cones again would not end)."""
        n, widest = len(structure.sim_wires), max((c.width for c in self.classes), default=0)
        whole = EngineChoice(f"noisy circuit, {n} wires", "light cones", f"{len(self.classes)} classes of noisy "
                             f"cones, at most {widest} wires each, as density matrices", None, None, None, None)
        self.engine_choices = (whole, *self.choices) if self.narrower else ()

    def _program(self, c, k: int, closed: bool) -> MixedProgram:
        key = ("mixed", id(c), k)
        program = self._programs.get(key)
        if program is None:
            members = frozenset(si for si, s in enumerate(c.structure.slots) if s.params[1] > s.params[0])
            stacked, size = (members, k) if k > 1 else (frozenset(), 0)
            program = self._programs[key] = MixedProgram(c.structure, stacked, size, self.opts, c.tape)
        return program

    def _run_state(self, c, columns: torch.Tensor, dtype, device) -> torch.Tensor:
        """``[K]`` values of the class for ``K`` parameter rows ``columns``."""
        k = columns.shape[0]
        program = self._program(c, k, closed=False)
        values = ConeValues(c.structure, c.tape, columns if k > 1 else columns[0], k > 1, dtype, device)
        self.executions += 1
        return program.run(values, _Sub(c.tape), c.structure, (k,) if k > 1 else ())[0].reshape(k)


def cone_program(structure, stacked: frozenset, stack_size: int, opts, tape, cache) -> MixedConeProgram:
    """The structure's ``MixedConeProgram`` for this stack, built once (plan cache)."""
    key = ("mixed-cones", structure.key, stacked, stack_size, opts.dtype, str(opts.device))
    return cache.get(key, lambda: MixedConeProgram(structure, stacked, stack_size, opts, tape))

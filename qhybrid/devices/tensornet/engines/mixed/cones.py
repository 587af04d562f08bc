"""Wide noisy circuits by light cones: every Pauli term of every expectation value keeps only the operators in its
reverse light cone (``engines.lightcone.cones``: a trace-preserving channel whose wires no kept operator touches
later drops out exactly, as a commuting gate does), relabelled onto the cone's own wires, and runs as an exact
density matrix of the cone. Cones that are the same circuit up to relabelling (equal canonical keys) share one
sub-tape, each cone a variant of it with its own parameters, so the simulator stacks a class into one
density-matrix program. The cones and their sub-tapes are found once per structure (``ConePlan``, in the plan
cache); a call only gathers each cone's parameters.
"""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch
from pennylane.measurements import ExpectationMP

from ....._variant import Variant
from ..._gates import typed_tensor
from ..lightcone.cones import make_cone

CONE_MIN_WIRES = 12
"""Noisy circuits on more wires than this measure Pauli-sentence expectation values cone by cone."""


def cones_apply(structure, tape) -> bool:
    """Whether ``tape`` is measured by light cones: wide, unbatched, only expectation values of Pauli sentences."""
    if len(structure.sim_wires) <= CONE_MIN_WIRES or structure.batch_size is not None:
        return False
    return all(isinstance(mp, ExpectationMP) and mp.obs is not None and mp.obs.pauli_rep is not None
               for mp in tape.measurements)


class ConePlan:
    """Per measurement, its Pauli terms: ``(measurement, word, cone index | None)``; per cone, its class sub-tape
    and the flat parameter positions (in the full tape) that feed it."""

    def __init__(self, structure, tape):
        position = {w: i for i, w in enumerate(structure.sim_wires)}
        self.terms: list[list[tuple]] = []  # per measurement: (word key, cone index or None for the identity)
        self.cones: list[tuple] = []  # (sub-tape of the class, parameter positions)
        classes: dict = {}
        for mp in tape.measurements:
            per = []
            for pw in mp.obs.pauli_rep:
                word = {position[w]: letter for w, letter in pw.items()}
                if not word:
                    per.append((pw, None))
                    continue
                cone = make_cone(structure, word)
                sub = classes.get(cone.key)
                if sub is None:
                    sub = classes[cone.key] = _class_tape(structure, tape, cone)
                positions = [j for si in cone.slots for j in range(*structure.slots[si].params)]
                per.append((pw, len(self.cones)))
                self.cones.append((sub, positions))
            self.terms.append(per)
        self.n_classes = len(classes)
        widths = [len(sub.wires) for sub, _ in self.cones]
        self.narrower = all(w < len(structure.sim_wires) for w in widths)
        """Whether every cone is narrower than the circuit (else the whole density matrix runs: a cone as wide
        as its circuit gains nothing, and measuring it by cones again would not end)."""


def _class_tape(structure, tape, cone) -> qml.tape.QuantumScript:
    """The cone's operators on wires ``0 .. k-1``, measuring its word there."""
    wire_of = {structure.sim_wires[pos]: label for pos, label in cone.labels.items()}
    ops = [tape.operations[structure.slots[si].op_index].map_wires(wire_of) for si in cone.slots]
    letters = [getattr(qml, letter)(w) for w, letter in cone.word]
    obs = qml.prod(*letters) if len(letters) > 1 else letters[0]
    return qml.tape.QuantumScript(ops, [qml.expval(obs)])


def cone_plan(structure, tape, cache) -> ConePlan:
    return cache.get(("mixed-cones", structure.key), lambda: ConePlan(structure, tape))


def run_cones(structure, group: Sequence[Variant], opts, simulate_pure, cache) -> list[tuple]:
    """Expectation values of each variant as sums of its terms' cone values (one ``simulate_pure`` call)."""
    plan = cone_plan(structure, group[0].tape, cache)
    real = torch.empty((), dtype=opts.dtype).real.dtype
    cones = [Variant(sub, [v.params[j] for j in positions]) for v in group for sub, positions in plan.cones]
    values = simulate_pure(cones, None, opts, cache) if cones else []
    one = torch.ones((), dtype=real, device=opts.device)
    out = []
    for g, v in enumerate(group):
        base = g * len(plan.cones)
        results = []
        for mp, terms in zip(v.tape.measurements, plan.terms):
            coefficients = mp.obs.pauli_rep  # the variant's own coefficients (observables are bound)
            total = torch.zeros((), dtype=real, device=opts.device)
            for pw, k in terms:
                term = one if k is None else values[base + k][0]
                total = total + typed_tensor(coefficients[pw], real, opts.device) * term
            results.append(total)
        out.append(tuple(results))
    return out

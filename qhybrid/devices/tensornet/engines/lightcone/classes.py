"""Cones grouped into classes (same canonical form), each with one sub-tape on wires ``0 .. k-1``.

A class's sub-tape is its first member's kept gates relabelled, then the basis changes that turn the
measured word into a Z word, measuring that Z word. ``table[m, j]`` is the position, in the full circuit's
flat parameter list, of the sub-tape's parameter ``j`` for member ``m``: one gather gives every member's
parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pennylane as qml
import torch
from pennylane.measurements import ExpectationMP, VarianceMP
from pennylane.wires import Wires

from ..._structure import Slot, TapeStructure, measurement_key, op_slot, tape_structure
from .cones import SYMMETRIC_GATES, Cone, cone_wires, make_cone


@dataclass
class ConeClass:
    tape: qml.tape.QuantumScript  # the sub-tape on wires 0 .. width-1
    structure: TapeStructure
    terms: list[int]  # the members' term indices, in member order
    table: torch.Tensor  # [members, sub-tape parameters] positions in the full circuit's parameters
    width: int


_BASIS_CHANGE = {"X": lambda w: [qml.Hadamard(w)], "Y": lambda w: [qml.adjoint(qml.S(w)), qml.Hadamard(w)]}
"""Gates after which measuring Z measures the letter: H Z H = X, (H S^dag)^dag Z (H S^dag) = Y."""


def _relabelled(op, structure: TapeStructure, si: int, labels: dict):
    slot = structure.slots[si]
    wires = cone_wires(slot, labels)
    if slot.name in SYMMETRIC_GATES and wires != tuple(labels[w] for w in slot.wires):
        return type(op)(*op.data, wires=Wires(wires))  # a symmetric gate on its wires in sorted order
    return op.map_wires({label: labels[p] for label, p in zip(op.wires, slot.wires)})


def class_tape(tape, structure: TapeStructure, cone: Cone) -> qml.tape.QuantumScript:
    """The cone's gates on its labels, basis changes, and the Z word it then measures."""
    ops = [_relabelled(tape.operations[structure.slots[si].op_index], structure, si, cone.labels) for si in cone.slots]
    for w, letter in cone.word:
        ops.extend(_BASIS_CHANGE[letter](w) if letter in _BASIS_CHANGE else [])
    observable = qml.prod(*(qml.Z(w) for w, _ in cone.word)) if len(cone.word) > 1 else qml.Z(cone.word[0][0])
    return qml.tape.QuantumScript(ops, [qml.expval(observable)])


def class_structure(structure: TapeStructure, cone: Cone, sub) -> TapeStructure:
    """``tape_structure(sub, Wires(range(cone.width)))`` of the cone's class tape ``sub``: its gates' slots
    are the circuit's, relabelled (each operator is classified once, for the circuit; ~5x faster, Q100 p=4's
    149 class tapes: 0.4 s before), its basis changes and measurement read as ``tape_structure`` does."""
    keys = structure.key[0]
    ops = sub.operations
    slots, out, start = [], [], 0
    for index, si in enumerate(cone.slots):
        full, k = structure.slots[si], keys[si]
        n = full.params[1] - full.params[0]
        wires = cone_wires(full, cone.labels)
        slots.append(Slot(full.kind, full.name, wires, (start, start + n), full.batched, index))
        # (an operator's settings may name its wires: read them from the relabelled one)
        out.append((full.kind, full.name, wires, full.batched, repr(ops[index].hyperparameters) if k[4] else ""))
        start += n
    position = {w: w for w in range(cone.width)}
    touched = set(sub.wires)  # (no state preparation in a cone: only its classification reads this)
    for index in range(len(cone.slots), len(ops)):
        slot, key, _ = op_slot(ops[index], index, start, position, touched)
        slots.append(slot)
        out.append(key)
        start += len(ops[index].data)
    batch = structure.batch_size if any(s.batched for s in slots) else None
    key = (tuple(out), measurement_key(sub), tuple(range(cone.width)), batch)
    return TapeStructure(key, tuple(slots), Wires(range(cone.width)), batch, start)


def group_cones(tape, structure: TapeStructure, cones: list[Cone]) -> list[ConeClass]:
    """Classes of ``cones`` (term ``t`` is ``cones[t]``), in order of their first member."""
    by_key: dict[tuple, list[int]] = {}
    for t, cone in enumerate(cones):
        by_key.setdefault(cone.key, []).append(t)
    classes = []
    for terms in by_key.values():
        rep = cones[terms[0]]
        sub = class_tape(tape, structure, rep)
        sub_structure = class_structure(structure, rep, sub)
        rows = []
        for t in terms:
            rows.append([j for si in cones[t].slots for j in range(*structure.slots[si].params)])
        table = torch.as_tensor(np.asarray(rows, dtype=np.int64).reshape(len(terms), -1))
        classes.append(ConeClass(sub, sub_structure, terms, table, rep.width))
    return classes


def measured_words(tape, structure: TapeStructure, measurements=None) -> tuple[list[dict], dict[int, list[int]]]:
    """The distinct Pauli words (simulated-wire position -> letter) that ``measurements`` (indices into
    ``tape.measurements``; default: every Pauli-sentence expval or var) read, and per measurement the
    indices of its words (a variance reads its sentence and the sentence's square)."""
    pos = {w: i for i, w in enumerate(structure.sim_wires)}
    if measurements is None:
        measurements = [m for m, mp in enumerate(tape.measurements) if cone_measurable(mp)]
    index: dict[tuple, int] = {}
    words: list[dict] = []
    per_measurement: dict[int, list[int]] = {}
    for m in measurements:
        mp = tape.measurements[m]
        terms = per_measurement[m] = []
        for ps in sentences(mp):
            for word in ps:
                if not word:
                    continue
                key = tuple(sorted((pos[w], letter) for w, letter in word.items()))
                if key not in index:
                    index[key] = len(words)
                    words.append(dict(key))
                terms.append(index[key])
    return words, per_measurement


def cone_measurable(mp) -> bool:
    """Whether ``mp`` is measured term by term (an expval or var of a Pauli sentence)."""
    return isinstance(mp, (ExpectationMP, VarianceMP)) and mp.obs is not None and mp.obs.pauli_rep is not None


def sentences(mp) -> list:
    """The Pauli sentences a cone-measurable ``mp`` reads: ``<P>``, or ``<P>`` and ``<P^2>`` for a var."""
    ps = mp.obs.pauli_rep
    return [ps] if isinstance(mp, ExpectationMP) else [ps, ps @ ps]


def tape_classes(tape, device_wires=None) -> list[ConeClass]:
    """The light-cone classes of every Pauli term ``tape`` measures, as the device's ``ConeProgram`` runs
    them (its ``classes``): for inspecting what a wide circuit costs without running it.

    >>> ring = [(i, (i + 1) % 8) for i in range(8)]
    >>> ops = [qml.Hadamard(i) for i in range(8)] + [qml.IsingZZ(0.3, wires=e) for e in ring] + [qml.RX(0.2, i) for i in range(8)]
    >>> tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in ring])
    >>> [(c.width, len(c.terms)) for c in tape_classes(tape)]
    [(4, 8)]
    """
    structure = tape_structure(tape, device_wires)
    words, _ = measured_words(tape, structure)
    return group_cones(tape, structure, [make_cone(structure, w) for w in words])


__all__ = ["ConeClass", "class_tape", "group_cones", "measured_words", "cone_measurable", "sentences", "tape_classes"]

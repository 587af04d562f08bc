"""Cones grouped into classes (same canonical form), each with one sub-tape on wires ``0 .. k-1``.

A class's sub-tape is its first member's kept gates relabelled, then the basis changes that turn the
measured word into a Z word, measuring that Z word. ``table[m, j]`` is the position, in the full circuit's
flat parameter list, of the sub-tape's parameter ``j`` for member ``m``: one gather gives every member's
parameters.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch
from pennylane.measurements import ExpectationMP, VarianceMP
from pennylane.wires import Wires

from ..._structure import Slot, TapeStructure, measurement_key, op_slot, tape_structure
from .cones import SYMMETRIC_GATES, Cone, cone_wires, make_cone


class ConeClass:
    """One class of cones: ``structure`` (its sub-tape's, on wires ``0 .. width-1``), ``terms`` (the members'
    term indices, in member order), ``table`` (``[members, sub-tape parameters]`` positions in the full
    circuit's parameters), ``width``, ``measurements`` (the sub-tape's: one expval of a Z word) and the
    sub-tape itself, ``tape``, built at first use: a class run only through its network and the circuit's
    gate matrices (``closed_classes``) never needs its relabelled operators (Q100 p=4's 149 sub-tapes: ~0.9 s
    of PennyLane operator copies)."""

    def __init__(self, source, full: TapeStructure, cone: Cone, terms: list[int], table: torch.Tensor):
        self._source, self._full, self._cone = source, full, cone
        self.tail, measurement = _tail(cone)
        self.measurements = [measurement]
        self.structure = class_structure(full, cone, source, self.tail, measurement)
        self.terms, self.table, self.width = terms, table, cone.width
        self._tape = None

    @property
    def tape(self) -> qml.tape.QuantumScript:
        """The cone's gates on its labels, basis changes, and the Z word it then measures."""
        if self._tape is None:
            self._tape = class_tape(self._source, self._full, self._cone, self.tail, self.measurements[0])
        return self._tape

    @property
    def view(self) -> "_View":
        """The sub-tape as a network program reads it (its ``measurements``; ``operations`` built only
        where an operator's settings are read)."""
        return _View(self)

    def operator(self, index: int):
        """The sub-tape's operator ``index`` for its matrix: the circuit's own for a cone gate (a gate's
        matrix is in its own wire order, whatever its wires are called), else the sub-tape's."""
        if self._tape is None and index < len(self._cone.slots):
            return self._source.operations[self._full.slots[self._cone.slots[index]].op_index]
        return self.tape.operations[index]


class _View:
    def __init__(self, c: ConeClass):
        self._class, self.measurements = c, c.measurements

    @property
    def operations(self):
        return self._class.tape.operations


_BASIS_CHANGE = {"X": lambda w: [qml.Hadamard(w)], "Y": lambda w: [qml.adjoint(qml.S(w)), qml.Hadamard(w)]}
"""Gates after which measuring Z measures the letter: H Z H = X, (H S^dag)^dag Z (H S^dag) = Y."""


def _relabelled(op, structure: TapeStructure, si: int, labels: dict):
    slot = structure.slots[si]
    wires = cone_wires(slot, labels)
    if slot.name in SYMMETRIC_GATES and wires != tuple(labels[w] for w in slot.wires):
        return type(op)(*op.data, wires=Wires(wires))  # a symmetric gate on its wires in sorted order
    return op.map_wires({label: labels[p] for label, p in zip(op.wires, slot.wires)})


def _tail(cone: Cone) -> tuple[list, object]:
    """The basis changes after the cone's gates, and the expval of the Z word the class measures."""
    ops = []
    for w, letter in cone.word:
        ops.extend(_BASIS_CHANGE[letter](w) if letter in _BASIS_CHANGE else [])
    observable = qml.prod(*(qml.Z(w) for w, _ in cone.word)) if len(cone.word) > 1 else qml.Z(cone.word[0][0])
    return ops, qml.expval(observable)


def class_tape(tape, structure: TapeStructure, cone: Cone, tail=None, measurement=None) -> qml.tape.QuantumScript:
    """The cone's gates on its labels, basis changes, and the Z word it then measures (``tail``,
    ``measurement``: the last two, where built already)."""
    ops = [_relabelled(tape.operations[structure.slots[si].op_index], structure, si, cone.labels) for si in cone.slots]
    if measurement is None:
        tail, measurement = _tail(cone)
    return qml.tape.QuantumScript(ops + list(tail), [measurement])


def class_structure(structure: TapeStructure, cone: Cone, tape, tail: list, measurement) -> TapeStructure:
    """``tape_structure`` (on wires ``0 .. width-1``) of the cone's class tape, without building it: its
    gates' slots are the circuit's (``tape``'s), relabelled (each operator is classified once, for the
    circuit), its basis changes ``tail`` and ``measurement`` read as ``tape_structure`` reads them."""
    keys = structure.key[0]
    form = cone.key[0]  # (each gate's wires on the cone's labels are in its canonical form)
    slots, out, start = [], [], 0
    for index, si in enumerate(cone.slots):
        full, k = structure.slots[si], keys[si]
        n = full.params[1] - full.params[0]
        wires = form[index][2]
        slots.append(Slot(full.kind, full.name, wires, (start, start + n), full.batched, index))
        hyper = ""
        if k[4]:  # an operator's settings may name its wires: read them from the relabelled one
            hyper = repr(_relabelled(tape.operations[full.op_index], structure, si, cone.labels).hyperparameters)
        out.append((full.kind, full.name, wires, full.batched, hyper))
        start += n
    position = {w: w for w in range(cone.width)}
    touched = set(range(cone.width))  # (no state preparation in a cone: only its classification reads this)
    for index, op in enumerate(tail, len(cone.slots)):
        slot, key, _ = op_slot(op, index, start, position, touched)
        slots.append(slot)
        out.append(key)
        start += len(op.data)
    batch = structure.batch_size if any(s.batched for s in slots) else None
    key = (tuple(out), measurement_key([measurement]), tuple(range(cone.width)), batch)
    return TapeStructure(key, tuple(slots), Wires(range(cone.width)), batch, start)


def group_cones(tape, structure: TapeStructure, cones: list[Cone]) -> list[ConeClass]:
    """Classes of ``cones`` (term ``t`` is ``cones[t]``), in order of their first member."""
    by_key: dict[tuple, list[int]] = {}
    for t, cone in enumerate(cones):
        by_key.setdefault(cone.key, []).append(t)
    classes = []
    for terms in by_key.values():
        rep = cones[terms[0]]
        rows = []
        for t in terms:
            rows.append([j for si in cones[t].slots for j in range(*structure.slots[si].params)])
        table = torch.as_tensor(np.asarray(rows, dtype=np.int64).reshape(len(terms), -1))
        classes.append(ConeClass(tape, structure, rep, terms, table))
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

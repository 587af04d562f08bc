"""Reverse light cones of measured Pauli words, and their canonical forms.

``<P>`` after a circuit depends only on the gates in the reverse light cone of ``P``'s wires: walking the
tape backwards, a gate is kept when it does not commute with a gate kept after it (or with ``P``) on a
shared wire; every other gate commutes past everything kept after it and cancels against its own
conjugate. Diagonal gates commute with each other and with Z letters, so a QAOA cost layer written edge
by edge in any order widens a cone by one layer of neighbours only.

Cones that are the same circuit up to a relabelling of wires share one sub-program. The canonical form
relabels a cone's wires walking back from the measured word (its wires first, then each gate's fresh
wires) and lists every kept gate's structure key on the new labels. Gates on disjoint wires commute, so the
sequence is first put in a normal order: each gate gets the ASAP layer of its dependency graph (diagonal
gates commute with each other, so a run of them on shared wires is one layer), and a layer's gates are
ordered by the labels their wires already have. Isomorphic cones written in different tape orders (the
edges of a graph listed in any order) then usually get the same form.
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass
from typing import Sequence

from ..._structure import Slot, TapeStructure
from ..statevector.diagonal import ANGLE_GATES, VECTOR_GATES
from .cone_walk import walk, walk_all

DIAGONAL_GATES = (ANGLE_GATES - {"PauliRot"}) | VECTOR_GATES | {"CZ", "CCZ", "PauliZ", "Z", "S", "T"}
"""Gates diagonal in the computational basis (for every parameter value): they commute with Z words and
with each other."""


SYMMETRIC_GATES = frozenset(
    {"IsingZZ", "IsingXX", "IsingYY", "IsingXY", "CZ", "CCZ", "SWAP", "ControlledPhaseShift", "MultiRZ"}
)
"""Gates whose matrix does not change when their wires are permuted: their wires are compared as a set."""


@dataclass(frozen=True)
class Cone:
    """The kept slots of one measured word (in normal order), its wires relabelled ``0 .. k-1``."""

    slots: tuple[int, ...]
    labels: dict  # simulated-wire position -> cone wire
    word: tuple[tuple[int, str], ...]  # (cone wire, letter), sorted
    key: tuple  # canonical form: equal keys are the same circuit up to relabelling

    @property
    def width(self) -> int:
        return len(self.labels)


BASIS_GATES = {
    "RX": ("X",), "PauliX": ("X",), "X": ("X",), "SX": ("X",), "IsingXX": ("X", "X"),
    "RY": ("Y",), "PauliY": ("Y",), "Y": ("Y",), "IsingYY": ("Y", "Y"),
    "CNOT": ("Z", "X"), "CRX": ("Z", "X"), "CY": ("Z", "Y"), "CRY": ("Z", "Y"), "Toffoli": ("Z", "Z", "X"),
}  # fmt: skip
"""Gates that are functions of one Pauli operator per wire (besides the diagonal ones, Z on every wire):
the basis per wire, in the gate's wire order. Two gates whose bases agree on every shared wire commute (both
are diagonal in one product basis), so an IsingXX block commutes gate by gate, a CNOT's target with RX."""


def _diagonal(slot: Slot) -> bool:
    if slot.name == "PauliRot":
        return False  # a Z-only PauliRot is diagonal, but its word is a setting: keep it simple
    return slot.name in DIAGONAL_GATES


def _bases(slot: Slot) -> tuple[str, ...] | None:
    """Per wire of the gate, the Pauli basis it is diagonal in; None for a general gate."""
    if _diagonal(slot):
        return ("Z",) * len(slot.wires)
    bases = BASIS_GATES.get(slot.name)
    return bases if bases is not None and len(bases) == len(slot.wires) else None


GENERAL = "*"
"""The action on a wire of a gate (or observable) diagonal in no single Pauli basis there."""


def cone_slots(slots: Sequence[Slot], word: dict[int, str]) -> list[int]:
    """Slot indices (tape order) in the reverse light cone of the observable ``word`` (position -> its
    Pauli letter there, or ``GENERAL`` where it is not one Pauli operator; ``"I"`` is no action).

    A gate is kept when some kept gate after it (or the observable) does not commute with it on a shared
    wire: the kept gates are the ancestors of the measurement in the circuit's dependency graph; the rest
    can be moved after every kept gate, where they commute with the observable and cancel. Two actions on
    a wire commute when both are diagonal in the same Pauli basis there (``_bases``: Z for diagonal gates,
    X for RX / IsingXX / a CNOT's target, ...); a general gate commutes with nothing on its wires.

    The walk visits only slots on wires the cone has reached (``cone_walk``), in the same reverse order.
    """
    acts: dict[int, set] = {w: {letter} for w, letter in word.items() if letter != "I"}
    return walk(slots, acts, _bases, GENERAL)[::-1]


def all_cone_slots(slots: Sequence[Slot], words: Sequence[dict[int, str]]) -> list[list[int]]:
    """``cone_slots`` of every word, in one pass over the slots (``cone_walk.walk_all``)."""
    acts = [{w: {letter} for w, letter in word.items() if letter != "I"} for word in words]
    return walk_all(slots, acts, _bases, GENERAL)


def in_dependency_order(slots: Sequence[Slot], order: Sequence[int]) -> bool:
    """Whether ``order`` (distinct slot indices) keeps every two of its gates that do not commute on a shared
    wire (``_bases``) in tape order: then it is the same circuit as the tape order (any two orders that
    agree on every such pair multiply to the same operator)."""
    at = {si: i for i, si in enumerate(order)}
    last: dict[int, dict] = {}  # wire -> action -> latest place in ``order`` of an earlier gate acting so
    for si in sorted(order):
        slot, place = slots[si], at[si]
        bases = _bases(slot) or (GENERAL,) * len(slot.wires)
        for w, b in zip(slot.wires, bases):
            for action, before in last.get(w, _EMPTY).items():
                if before > place and (action != b or b == GENERAL):
                    return False
        for w, b in zip(slot.wires, bases):
            seen = last.setdefault(w, {})
            if seen.get(b, -1) < place:
                seen[b] = place
    return True


_EMPTY: dict = {}


_NONE: frozenset = frozenset()


def _layers(slots: Sequence[Slot], kept: list[int]) -> list[list[int]]:
    """``kept`` in ASAP layers of its dependency graph. Two gates depend on each other when they share a
    wire where their bases differ (``_bases``), so a layer's gates commute pairwise and any order of a
    layer, layers in order, is the same circuit."""
    last: dict[int, dict] = {}  # wire -> basis (or GENERAL) -> highest layer of a gate acting so on it
    layers: list[list[int]] = []
    for si in kept:
        slot = slots[si]
        bases = _bases(slot) or (GENERAL,) * len(slot.wires)
        at = 1 + max(
            (layer for w, b in zip(slot.wires, bases) for basis, layer in last.get(w, {}).items() if basis != b or b == GENERAL),
            default=-1,
        )
        for w, b in zip(slot.wires, bases):
            seen = last.setdefault(w, {})
            seen[b] = max(seen.get(b, -1), at)
        while len(layers) <= at:
            layers.append([])
        layers[at].append(si)
    return layers


WL_MAX_ROUNDS = 64
"""Colour-refinement rounds at most (it stops as soon as a round splits no colour class)."""


def _colours(slots: Sequence[Slot], keys, layers: list[list[int]], word: dict[int, str]) -> tuple[dict, dict]:
    """Relabelling-invariant colours of the cone's gates (slot -> colour) and wires (wire -> colour):
    colour refinement (1-WL) on the gate-wire incidence graph, gates coloured by kind and ASAP layer, their
    wires by operand position. Used only to break ties: equal canonical forms are equal circuits anyway.
    The first colours are ``_stable_hash``es; the rounds hash tuples of ints (``_mix``), equal in every
    process and far faster than hashing each round's tuples' text (Q100 p=4's 150 cones: 562k such hashes).
    Gates and wires are kept in flat lists indexed by position (no tuple keys): the same colours as keyed
    dictionaries, 2x faster."""
    gates: list[int] = []
    gate_colour: list[int] = []
    gate_wires: list[tuple] = []
    symmetric: list[bool] = []
    wire_gates: dict[int, list] = {}
    for at, layer in enumerate(layers):
        for si in layer:
            k = keys[si]
            slot = slots[si]
            sym = slot.name in SYMMETRIC_GATES
            g = len(gates)
            gates.append(si)
            gate_colour.append(_stable_hash((k[0], k[1], k[3], k[4], slot.params[1] - slot.params[0], at)))
            gate_wires.append(slot.wires)
            symmetric.append(sym)
            for pos, w in enumerate(slot.wires):
                wire_gates.setdefault(w, []).append((at, 0 if sym else pos, g))
    wires = list(set(wire_gates) | set(word))
    first = {letter: _stable_hash(("w", letter)) for letter in set(word.values()) | {"I"}}
    wire_colour = {w: first[word.get(w, "I")] for w in wires}
    classes = len(set(gate_colour).union(wire_colour.values()))
    incidence = [(w, sorted(wire_gates.get(w, ()))) for w in wires]  # (at, pos) first: colours break ties only
    for _ in range(WL_MAX_ROUNDS):
        new_gates = []
        for g, ws in enumerate(gate_wires):
            around = [wire_colour[w] for w in ws]
            if symmetric[g]:
                around.sort()
            new_gates.append(hash((gate_colour[g], *around)))
        new_wires = {}
        for w, seen in incidence:
            entries = sorted((at, pos, gate_colour[g]) for at, pos, g in seen)
            new_wires[w] = hash((wire_colour[w], *[x for entry in entries for x in entry]))
        gate_colour, wire_colour = new_gates, new_wires
        count = len(set(gate_colour).union(wire_colour.values()))
        if count == classes:
            break
        classes = count
    return dict(zip(gates, gate_colour)), wire_colour


def _mix(start: int, values) -> int:
    """A hash of ``start`` then ``values`` (ints): Python's hash of a tuple of ints, which, unlike a
    string's, does not depend on the process's hash seed (in C: ~10x faster than mixing in Python). A
    Python build that hashes differently only labels cones differently: their networks' paths on disk
    are then not found (each entry is checked against its structure), never wrong."""
    return hash((start, *values))


def _stable_hash(value) -> int:
    """A hash of ``value`` (ints, strings, tuples of them) equal in every process: Python's ``hash`` of a
    string changes with each process's seed, which made the tie-breaking colours, and so a class's
    canonical wire order and network, differ between processes (their paths on disk were never found)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "little")


def make_cone(structure: TapeStructure, word: dict[int, str], kept: list[int] | None = None) -> Cone:
    """The cone of ``word`` (simulated-wire position -> letter) with its canonical form (``kept``: its
    slots, ``cone_slots(structure.slots, word)``, where the caller has them).

    Labels are given walking back from the measured word: its wires first, then, layer by layer from the
    last, each gate's fresh wires, taking first the gates on the smallest labels already given (ties
    broken by refinement colours, which do not depend on the wires' names)."""
    slots = structure.slots
    keys = structure.key[0]
    kept = cone_slots(slots, word) if kept is None else kept
    layers = _layers(slots, kept)
    gate_colour, wire_colour = _colours(slots, keys, layers, word)
    labels: dict[int, int] = {}
    for w in sorted(word, key=lambda w: (word[w], wire_colour[w], w)):
        labels[w] = len(labels)
    picked = [_pick(slots, layer, labels, gate_colour) for layer in reversed(layers)]
    order = [si for layer in reversed(picked) for si in layer]
    return labelled_cone(structure, order, labels, word)


def labelled_cone(structure: TapeStructure, order: Sequence[int], labels: dict, word: dict[int, str]) -> Cone:
    """The ``Cone`` of ``word`` whose kept slots are ``order`` (in that order) and wires ``labels``, with its
    canonical form (``make_cone``'s, or a stored cone's once checked: ``stored.py``)."""
    slots, keys = structure.slots, structure.key[0]
    form = []
    for si in order:
        k, slot = keys[si], slots[si]
        wires = tuple(labels[w] for w in slot.wires)
        if len(wires) > 1 and slot.name in SYMMETRIC_GATES:
            wires = tuple(sorted(wires))
        form.append((k[0], k[1], wires, k[3], k[4], slot.params[1] - slot.params[0]))
    form = tuple(form)
    measured = tuple(sorted((labels[w], letter) for w, letter in word.items()))
    return Cone(tuple(order), labels, measured, (form, measured))


def _pick(slots: Sequence[Slot], layer: list[int], labels: dict, colour: dict) -> list[int]:
    """The layer's gates in the order ``make_cone`` takes them: repeatedly the gate of smallest ``_rank``
    (ties: colour, then place in the layer), labelling its fresh wires as it is taken. A heap of keys: a
    gate's key only falls when one of its wires gets a label, and it is then pushed again (the stale entry
    is skipped); the same order as scanning every pending gate per pick, which cost O(layer^2) ranks (Q100
    p=4's 150 cones: 537k ranks, a third of their labelling time)."""
    waiting: dict[int, list[int]] = {}  # unlabelled wire -> places of the layer's gates on it
    for place, si in enumerate(layer):
        for w in slots[si].wires:
            if w not in labels:
                waiting.setdefault(w, []).append(place)

    def entry(place: int) -> tuple:
        si = layer[place]
        return (*_rank(slots[si], labels), colour[si], place)

    current = [entry(place) for place in range(len(layer))]
    heap = list(current)
    heapq.heapify(heap)
    taken = [False] * len(layer)
    out = []
    while heap:
        top = heapq.heappop(heap)
        place = top[-1]
        if taken[place] or current[place] != top:
            continue
        taken[place] = True
        si = layer[place]
        out.append(si)
        for w in slots[si].wires:
            if w not in labels:
                labels[w] = len(labels)
                for other in waiting.get(w, ()):
                    if not taken[other]:
                        current[other] = entry(other)
                        heapq.heappush(heap, current[other])
    return out


def cone_wires(slot: Slot, labels: dict) -> tuple[int, ...]:
    """The slot's wires as cone labels (sorted for a gate whose wires commute)."""
    out = tuple(labels[w] for w in slot.wires)
    return tuple(sorted(out)) if slot.name in SYMMETRIC_GATES else out


def _rank(slot: Slot, labels: dict) -> tuple:
    """A gate's place inside a layer: its smallest known label, then its known labels in wire order
    (fresh wires last; sorted for a symmetric gate)."""
    known = [labels.get(w, 1 << 30) for w in slot.wires]
    if slot.name in SYMMETRIC_GATES:
        known.sort()
    return (min(known), tuple(known))


__all__ = ["Cone", "make_cone", "labelled_cone", "cone_slots", "all_cone_slots", "in_dependency_order", "cone_wires", "DIAGONAL_GATES", "SYMMETRIC_GATES", "BASIS_GATES", "GENERAL"]

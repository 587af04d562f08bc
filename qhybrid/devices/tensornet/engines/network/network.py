"""Tape structure to tensor network: which tensor carries which indices.

Indices are integers. Index 0 is the stack index (several tapes of one structure run as one network),
index 1 the broadcast batch index; both are hyperedges kept by every intermediate that touches them.
A wire still in |0> when a gate first acts on it is not a tensor of its own: the gate's input axis is
sliced at 0 instead. Closed networks <psi|O|psi> keep only the backward light cone of the observed
wires; the rest of the circuit cancels against its own conjugate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..._structure import Slot, TapeStructure
from ..lightcone.cones import DIAGONAL_GATES, GENERAL, cone_slots

STACK = 0
BATCH = 1

DIAGONAL_HYPEREDGES = True
"""Diagonal gates (and Z / I caps) enter networks as their diagonal on the wire indices they act on, with
no new index (a hyperedge where several share a wire): a QAOA cost layer adds no index at all. False: every
gate is its dense ``[out..., in...]`` tensor (kept for tests that compare the two)."""

DIAGONAL_LETTERS = frozenset("IZ")
"""Observable letters diagonal in the computational basis: their caps tie the bra index to the ket's."""


def diagonal_slots(structure: TapeStructure, tape=None) -> frozenset[int]:
    """Slots whose gate is diagonal in the computational basis for every parameter value (a Z / I
    ``PauliRot`` too where ``tape`` gives its word).

    >>> import pennylane as qml
    >>> from qhybrid.devices.tensornet._structure import tape_structure
    >>> t = qml.tape.QuantumScript([qml.H(0), qml.IsingZZ(0.3, [0, 1])], [qml.expval(qml.Z(0))])
    >>> sorted(diagonal_slots(tape_structure(t, None)))
    [1]
    """
    out = set()
    for si, slot in enumerate(structure.slots):
        if slot.kind not in ("fast", "const", "matrix"):
            continue
        if slot.name in DIAGONAL_GATES:
            out.add(si)
        elif slot.name == "PauliRot" and tape is not None:
            word = tape.operations[slot.op_index].hyperparameters.get("pauli_word", "")
            if word and set(word) <= DIAGONAL_LETTERS:
                out.add(si)
    return frozenset(out)


@dataclass(frozen=True)
class Operand:
    """Where one network tensor's value comes from."""

    kind: str  # "slot" | "zero" | "pauli" | "mpo" | "matrix"
    slot: int = -1
    conj: bool = False
    select: tuple | None = None  # indexing that fixes fresh input axes to |0>
    letter: str = ""  # Pauli letter for kind "pauli"
    data: tuple = ()  # (shape, ((left, right, letter, coefficient), ...)) for kind "mpo"
    diagonal: bool = False  # only the diagonal of a gate / cap: one index per wire, shared by ket and bra


@dataclass
class Network:
    operands: list[Operand] = field(default_factory=list)
    inputs: list[tuple[int, ...]] = field(default_factory=list)
    output: tuple[int, ...] = ()
    sizes: dict[int, int] = field(default_factory=dict)
    lead: tuple[int, ...] = ()  # the lead indices (STACK, BATCH) present in the output
    positions: list[int] = field(default_factory=list)  # lowest wire each tensor touches (sweep order)

    def add(self, operand: Operand, indices, position: int = 0) -> None:
        self.operands.append(operand)
        self.inputs.append(tuple(indices))
        self.positions.append(position)


class _Builder:
    def __init__(self, structure: TapeStructure, stacked: frozenset[int], stack_size: int, diagonal=frozenset()):
        self.structure = structure
        self.stacked = stacked
        self.diagonal = diagonal if DIAGONAL_HYPEREDGES else frozenset()
        self.net = Network(sizes={STACK: stack_size or 1, BATCH: structure.batch_size or 1})
        self._next = 2

    def new(self) -> int:
        i = self._next
        self._next += 1
        self.net.sizes[i] = 2
        return i

    def lead_of(self, index: int, slot: Slot) -> list[int]:
        return ([STACK] if index in self.stacked else []) + ([BATCH] if slot.batched else [])

    def pass_(self, kept: Sequence[int], conj: bool) -> dict[int, int]:
        """Add the circuit's tensors (conjugated for the bra); returns each touched wire's last index."""
        cur: dict[int, int] = {}
        for si in kept:
            slot = self.structure.slots[si]
            lead = self.lead_of(si, slot)
            if slot.kind == "phase":
                self.net.add(Operand("slot", si, conj), lead, 0)
                continue
            if si in self.diagonal:
                self._diagonal(si, slot, lead, cur, conj)
                continue
            out = [self.new() for _ in slot.wires]
            if slot.kind == "prep":
                self.net.add(Operand("slot", si, conj), lead + out, min(slot.wires, default=0))
            else:
                ins = [cur.get(w) for w in slot.wires]
                select = None
                if any(i is None for i in ins):
                    select = (slice(None),) * (len(lead) + len(out)) + tuple(
                        0 if i is None else slice(None) for i in ins
                    )
                self.net.add(
                    Operand("slot", si, conj, select),
                    lead + out + [i for i in ins if i is not None],
                    min(slot.wires),
                )
            cur.update(zip(slot.wires, out))
        return cur

    def mirror(self, start: int, count: int, ket: dict[int, int]) -> dict[int, int]:
        """The bra pass as a copy of the ket pass (its first ``count`` operands, which made the indices from
        ``start`` on): each operand conjugated, each index it made shifted by the number made, which is what
        ``pass_(kept, conj=True)`` builds, without walking the slots again. Returns the bra's last indices."""
        shift = self._next - start
        net = self.net
        for j in range(count):
            o = net.operands[j]
            net.add(
                Operand(o.kind, o.slot, True, o.select, o.letter, o.data, o.diagonal),
                tuple(i + shift if i >= start else i for i in net.inputs[j]),
                net.positions[j],
            )
        for i in range(start, self._next):
            net.sizes[i + shift] = net.sizes[i]
        self._next += shift
        return {w: i + shift if i >= start else i for w, i in ket.items()}

    def _diagonal(self, si: int, slot: Slot, lead: list[int], cur: dict[int, int], conj: bool) -> None:
        """A diagonal gate as its diagonal on the wires' current indices (no new index). A wire still in
        |0> stays there: the diagonal is read at 0 on it (a phase that the rest of the network carries)."""
        ins = [cur.get(w) for w in slot.wires]
        select = None
        if any(i is None for i in ins):
            select = (slice(None),) * len(lead) + tuple(0 if i is None else slice(None) for i in ins)
        self.net.add(
            Operand("slot", si, conj, select, diagonal=True), lead + [i for i in ins if i is not None], min(slot.wires)
        )

    def zero(self, conj: bool, wire: int = 0) -> int:
        i = self.new()
        self.net.add(Operand("zero", conj=conj), [i], wire)
        return i

    def finish(self, output_rest: Sequence[int]) -> Network:
        present = {i for ix in self.net.inputs for i in ix}
        self.net.lead = tuple(i for i in (STACK, BATCH) if i in present)
        self.net.output = self.net.lead + tuple(output_rest)
        return self.net


def ket_network(structure: TapeStructure, stacked: frozenset[int], stack_size: int, diagonal=frozenset()) -> Network:
    """The open network of the final state, output indices ``lead + one per simulated wire``; the slots in
    ``diagonal`` (see :func:`diagonal_slots`) enter as hyperedge tensors."""
    b = _Builder(structure, stacked, stack_size, diagonal)
    cur = b.pass_(range(len(structure.slots)), conj=False)
    rest = [cur[w] if w in cur else b.zero(False, w) for w in range(len(structure.sim_wires))]
    return b.finish(rest)


def light_cone(slots: Sequence[Slot], wires: Sequence[int], letters: Sequence[str] = ()) -> list[int]:
    """Slots that can influence ``<psi|O|psi>`` for an observable ``O`` on ``wires`` (global phases cancel).

    The one light-cone walker of the engine (``lightcone.cones.cone_slots``): ``letters`` gives, per wire,
    the Pauli letter ``O`` is a function of there (gates diagonal in that basis commute with it), or
    ``GENERAL``; without letters ``O`` acts generally on every wire."""
    return cone_slots(slots, {w: (letters[k] if letters else GENERAL) for k, w in enumerate(wires)})


def _diagonal_cap_wires(cap: str, wires: Sequence[int], letters: Sequence[str]) -> set[int]:
    """Measured wires where a Pauli cap is diagonal (every term's letter Z or I there)."""
    if cap not in ("pauli", "paulisum"):
        return set()
    return {w for w, letter in zip(wires, letters) if letter in DIAGONAL_LETTERS}


def _letters(cap: str, word, n: int) -> tuple[str, ...]:
    """Per measured wire, the Pauli letter the cap is a function of there (a word's letter; a sentence's one
    letter besides I on that wire), else ``GENERAL``."""
    if cap == "pauli":
        return tuple(word)
    if cap == "paulisum":
        out = []
        for k in range(n):
            letters = {w[k] for w in word} - {"I"}
            out.append(letters.pop() if len(letters) == 1 else GENERAL if letters else "I")
        return tuple(out)
    return (GENERAL,) * n


def closed_network(
    structure: TapeStructure,
    stacked: frozenset[int],
    stack_size: int,
    cap: str,
    wires: Sequence[int],
    word="",
    coeffs: Sequence[float] = (),
    diagonal: frozenset[int] = frozenset(),
) -> Network:
    """<psi| cap |psi> over the light cone of ``wires``.

    The slots in ``diagonal`` (see :func:`diagonal_slots`) enter as their diagonals on the wire indices
    (hyperedges), in ket and bra alike; so do caps that are diagonal on a wire (Z / I letters: that wire's
    bra index is its ket index).

    ``cap`` is "pauli" (``word`` gives one letter per wire), "paulisum" (``word`` is a tuple of such
    strings, one per term, with "I" where a term leaves a wire alone, ``coeffs`` their coefficients:
    the sentence becomes one matrix-product operator),
    "matrix" (one observable tensor with
    bra indices then ket indices) or "probs" (the measured wires stay open, ket and bra tied).
    """
    b = _Builder(structure, stacked, stack_size, diagonal)
    letters = _letters(cap, word, len(wires))
    kept = light_cone(structure.slots, wires, letters)
    start = b._next
    ket = b.pass_(kept, conj=False)
    first_bra = len(b.net.inputs)
    bra = b.mirror(start, first_bra, ket)
    for w in wires:
        if w not in ket:
            ket[w] = b.zero(False, w)
            bra[w] = b.zero(True, w)
    flat = _diagonal_cap_wires(cap, wires, letters) if DIAGONAL_HYPEREDGES else set()
    tie = {bra[w]: ket[w] for w in ket if w not in wires or cap == "probs" or w in flat}
    for n in range(first_bra, len(b.net.inputs)):
        b.net.inputs[n] = tuple(tie.get(i, i) for i in b.net.inputs[n])
    if cap == "paulisum":
        # a whole Pauli sentence as one matrix-product operator along ``wires``: one network, not one per word
        prev = None
        last = len(wires) - 1
        for k, (w, data) in enumerate(zip(wires, pauli_sum_mpo(word, coeffs))):
            ix = [prev] if k > 0 else []
            if k < last:
                prev = b.new()
                b.net.sizes[prev] = data[0][1]
                ix.append(prev)
            if w in flat:
                b.net.add(Operand("mpo", data=data, diagonal=True), ix + [ket[w]], w)
            else:
                b.net.add(Operand("mpo", data=data), ix + [bra[w], ket[w]], w)
        return b.finish(())
    if cap == "pauli":
        for w, letter in zip(wires, word):
            if w in flat:
                b.net.add(Operand("pauli", letter=letter, diagonal=True), [ket[w]], w)
            else:
                b.net.add(Operand("pauli", letter=letter), [bra[w], ket[w]], w)
        return b.finish(())
    if cap == "matrix":
        b.net.add(Operand("matrix"), [bra[w] for w in wires] + [ket[w] for w in wires], min(wires))
        return b.finish(())
    if cap == "probs":
        return b.finish([ket[w] for w in wires])
    raise ValueError(f"unknown cap {cap!r}")


def pauli_sum_mpo(words: Sequence[str], coeffs: Sequence[float]):
    """Sum_t c_t P_t (each word one letter per site, "I" where it acts trivially) as an MPO.

    Bond states: 0 = no term started, 1 = a term finished, 2 + t = term t in progress. Per site, a
    tensor [left, right, bra, ket] given as (shape, entries); the first site's left and the last site's
    right dimension are 1 (state 0, resp. "finished") and are dropped. One-site terms need bond 2.
    """
    n_sites = len(words[0]) if words else 0
    spans = []
    for word in words:
        sites = [k for k, c in enumerate(word) if c != "I"]
        spans.append((sites[0], sites[-1]))
    bonds = []
    for k in range(n_sites - 1):
        bonds.append([0, 1] + [2 + t for t, (a, z) in enumerate(spans) if a <= k < z])
    out = []
    for k in range(n_sites):
        left = [0] if k == 0 else bonds[k - 1]
        right = [1] if k == n_sites - 1 else bonds[k]
        lpos, rpos = {s: i for i, s in enumerate(left)}, {s: i for i, s in enumerate(right)}
        entries = []

        def put(ls, rs, letter, c):
            if ls in lpos and rs in rpos:
                entries.append((lpos[ls], rpos[rs], letter, float(c)))

        put(0, 0, "I", 1.0)
        put(1, 1, "I", 1.0)
        for t, (a, z) in enumerate(spans):
            letter = words[t][k]
            if a == k == z:
                put(0, 1, letter, coeffs[t])
            elif a == k:
                put(0, 2 + t, letter, coeffs[t])
            elif a < k < z:
                put(2 + t, 2 + t, letter, 1.0)
            elif a < k == z:
                put(2 + t, 1, letter, 1.0)
        out.append(((len(left), len(right)), tuple(entries)))
    return out

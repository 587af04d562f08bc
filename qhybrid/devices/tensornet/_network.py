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

from ._structure import Slot, TapeStructure

STACK = 0
BATCH = 1


@dataclass(frozen=True)
class Operand:
    """Where one network tensor's value comes from."""

    kind: str  # "slot" | "zero" | "pauli" | "matrix"
    slot: int = -1
    conj: bool = False
    select: tuple | None = None  # indexing that fixes fresh input axes to |0>
    letter: str = ""  # Pauli letter for kind "pauli"


@dataclass
class Network:
    operands: list[Operand] = field(default_factory=list)
    inputs: list[tuple[int, ...]] = field(default_factory=list)
    output: tuple[int, ...] = ()
    sizes: dict[int, int] = field(default_factory=dict)
    lead: tuple[int, ...] = ()  # the lead indices (STACK, BATCH) present in the output

    def add(self, operand: Operand, indices) -> None:
        self.operands.append(operand)
        self.inputs.append(tuple(indices))


class _Builder:
    def __init__(self, structure: TapeStructure, stacked: frozenset[int], stack_size: int):
        self.structure = structure
        self.stacked = stacked
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
                self.net.add(Operand("slot", si, conj), lead)
                continue
            out = [self.new() for _ in slot.wires]
            if slot.kind == "prep":
                self.net.add(Operand("slot", si, conj), lead + out)
            else:
                ins = [cur.get(w) for w in slot.wires]
                select = None
                if any(i is None for i in ins):
                    select = (slice(None),) * (len(lead) + len(out)) + tuple(
                        0 if i is None else slice(None) for i in ins
                    )
                self.net.add(Operand("slot", si, conj, select), lead + out + [i for i in ins if i is not None])
            cur.update(zip(slot.wires, out))
        return cur

    def zero(self, conj: bool) -> int:
        i = self.new()
        self.net.add(Operand("zero", conj=conj), [i])
        return i

    def finish(self, output_rest: Sequence[int]) -> Network:
        present = {i for ix in self.net.inputs for i in ix}
        self.net.lead = tuple(i for i in (STACK, BATCH) if i in present)
        self.net.output = self.net.lead + tuple(output_rest)
        return self.net


def ket_network(structure: TapeStructure, stacked: frozenset[int], stack_size: int) -> Network:
    """The open network of the final state, output indices ``lead + one per simulated wire``."""
    b = _Builder(structure, stacked, stack_size)
    cur = b.pass_(range(len(structure.slots)), conj=False)
    rest = [cur[w] if w in cur else b.zero(False) for w in range(len(structure.sim_wires))]
    return b.finish(rest)


def light_cone(slots: Sequence[Slot], wires: Sequence[int]) -> list[int]:
    """Slots that can influence measurements on ``wires`` (global phases cancel in <psi|..|psi>)."""
    active, kept = set(wires), []
    for si in range(len(slots) - 1, -1, -1):
        slot = slots[si]
        if slot.kind != "phase" and not active.isdisjoint(slot.wires):
            kept.append(si)
            active.update(slot.wires)
    return kept[::-1]


def closed_network(
    structure: TapeStructure,
    stacked: frozenset[int],
    stack_size: int,
    cap: str,
    wires: Sequence[int],
    word: str = "",
) -> Network:
    """<psi| cap |psi> over the light cone of ``wires``.

    ``cap`` is "pauli" (``word`` gives one letter per wire), "matrix" (one observable tensor with
    bra indices then ket indices) or "probs" (the measured wires stay open, ket and bra tied).
    """
    b = _Builder(structure, stacked, stack_size)
    kept = light_cone(structure.slots, wires)
    ket = b.pass_(kept, conj=False)
    first_bra = len(b.net.inputs)
    bra = b.pass_(kept, conj=True)
    for w in wires:
        if w not in ket:
            ket[w] = b.zero(False)
            bra[w] = b.zero(True)
    tie = {bra[w]: ket[w] for w in ket if w not in wires or cap == "probs"}
    for n in range(first_bra, len(b.net.inputs)):
        b.net.inputs[n] = tuple(tie.get(i, i) for i in b.net.inputs[n])
    if cap == "pauli":
        for w, letter in zip(wires, word):
            b.net.add(Operand("pauli", letter=letter), [bra[w], ket[w]])
        return b.finish(())
    if cap == "matrix":
        b.net.add(Operand("matrix"), [bra[w] for w in wires] + [ket[w] for w in wires])
        return b.finish(())
    if cap == "probs":
        return b.finish([ket[w] for w in wires])
    raise ValueError(f"unknown cap {cap!r}")

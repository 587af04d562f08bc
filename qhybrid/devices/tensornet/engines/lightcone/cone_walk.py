"""The reverse light-cone walk over a circuit's slots, visiting only the slots on wires the cone has reached.

``cones.cone_slots`` decides, slot by slot from the last one, whether a gate belongs to an observable's
light cone. A slot on no wire the cone has reached so far is never kept, so the walk need not look at it:
it follows each reached wire down its own list of slots (a max-heap of slot positions keeps the global
reverse order, which the keep rule needs), and a wire reached at slot ``s`` is followed from its slot just
before ``s``. A word's cone is a small part of a wide circuit (Q200 p=3: ~2,600 slots, a cone a few hundred),
and the walk is run once per measured word and network (1,200 walks on Q200 p=3's first step, 4.8 s when
each scanned every slot). The per-circuit index (each slot's bases and its predecessor on each of its
wires) is built once per slot tuple and kept for the last few circuits (tuples only: a list could change
under the same identity).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

INDEX_KEPT = 4
"""Slot tuples whose walk index is kept (a program measures words of one circuit, a process a few)."""

_INDEX: list[tuple[object, tuple]] = []  # (slots, index), most recent last


def _walk_index(slots: Sequence, bases_of: Callable) -> tuple:
    """(bases, predecessors, last): per slot its bases (None for a general gate, ``False`` for a phase
    slot, which the walk passes), per slot and wire position the previous slot on that wire (-1: none),
    and per wire its last slot. Kept only for tuples (a list could change under the same identity)."""
    for i, (held, index) in enumerate(_INDEX):
        if held is slots:
            if i != len(_INDEX) - 1:
                _INDEX.append(_INDEX.pop(i))
            return index
    bases, preds, last = [], [], {}
    for si, slot in enumerate(slots):
        bases.append(False if slot.kind == "phase" else bases_of(slot))
        preds.append(tuple(last.get(w, -1) for w in slot.wires))
        for w in slot.wires:
            last[w] = si
    index = (bases, preds, last)
    if isinstance(slots, tuple):
        _INDEX.append((slots, index))
        del _INDEX[:-INDEX_KEPT]
    return index


def walk(slots: Sequence, acts: dict, bases_of: Callable, general: str) -> list[int]:
    """The kept slot positions, last first, of the walk ``cones.cone_slots`` describes; ``acts`` (wire -> set
    of actions, the observable's) is updated in place; ``general``: the action of a general gate."""
    bases, preds, last = _walk_index(slots, bases_of)
    heap = [-last[w] for w in acts if w in last]
    heapq.heapify(heap)
    seen = set()
    kept = []
    while heap:
        si = -heapq.heappop(heap)
        if si in seen:
            continue
        seen.add(si)
        slot_bases = bases[si]
        wires = slots[si].wires
        if slot_bases is not False:
            if slot_bases is None:
                keep = any(acts.get(w) for w in wires)
            else:  # some action on a shared wire other than this gate's basis there
                keep = False
                for w, b in zip(wires, slot_bases):
                    seen_acts = acts.get(w)
                    if seen_acts and (len(seen_acts) > 1 or b not in seen_acts):
                        keep = True
                        break
            if keep:
                kept.append(si)
                for k, w in enumerate(wires):
                    acts.setdefault(w, set()).add(general if slot_bases is None else slot_bases[k])
        for w, before in zip(wires, preds[si]):
            if before >= 0 and acts.get(w):
                heapq.heappush(heap, -before)
    return kept


__all__ = ["walk", "INDEX_KEPT"]

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


def walk_all(slots: Sequence, acts_of: list[dict], bases_of: Callable, general: str) -> list[list[int]]:
    """``walk`` for many observables at once: per observable its kept slot positions, in tape order. One
    reverse pass over every slot, the observables' actions held per wire and action as bitsets over the
    observables, so the keep rule of a slot is decided for all of them by a few integer operations (the
    checks of a stored program's cones: Q100 p=4's 150 walks took 0.1-0.2 s one by one)."""
    bases = _walk_index(slots, bases_of)[0]
    masks: dict[int, dict[str, int]] = {}  # wire -> action -> observables acting so there
    for t, acts in enumerate(acts_of):
        for w, letters in acts.items():
            on = masks.setdefault(w, {})
            for letter in letters:
                on[letter] = on.get(letter, 0) | (1 << t)
    kept_by = {}
    for si in range(len(slots) - 1, -1, -1):
        slot_bases = bases[si]
        if slot_bases is False:
            continue
        wires, keep = slots[si].wires, 0
        for k, w in enumerate(wires):
            on = masks.get(w)
            if on:
                if slot_bases is None:
                    for m in on.values():
                        keep |= m
                else:  # some action on the wire other than this gate's basis there
                    b = slot_bases[k]
                    for x, m in on.items():
                        if x != b:
                            keep |= m
        if keep:
            kept_by[si] = keep
            for k, w in enumerate(wires):
                action = general if slot_bases is None else slot_bases[k]
                on = masks.setdefault(w, {})
                on[action] = on.get(action, 0) | keep
    out: list[list[int]] = [[] for _ in acts_of]
    for si in sorted(kept_by):
        m = kept_by[si]
        while m:
            low = m & -m
            out[low.bit_length() - 1].append(si)
            m ^= low
    return out


__all__ = ["walk", "walk_all", "INDEX_KEPT"]

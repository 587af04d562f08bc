"""The light-cone walk that visits only reached wires (engines/lightcone/cone_walk.py) keeps exactly the
slots of a scan over every slot, on random circuits of diagonal, one-basis, general and phase slots."""

import random

import pytest

from qhybrid.devices.tensornet._structure import Slot
from qhybrid.devices.tensornet.engines.lightcone import cone_walk, cones

GATES = [("RZ", 1), ("IsingZZ", 2), ("CZ", 2), ("RX", 1), ("RY", 1), ("IsingXX", 2), ("CNOT", 2), ("CRY", 2),
         ("Toffoli", 3), ("Rot", 1), ("SWAP", 2), ("QubitUnitary", 2), ("GlobalPhase", 0)]  # fmt: skip


def _scan(slots, word):
    """The reference: every slot from the last, kept by the rule ``cones.cone_slots`` documents."""
    acts = {w: {letter} for w, letter in word.items() if letter != "I"}
    kept = []
    for si in range(len(slots) - 1, -1, -1):
        slot = slots[si]
        if slot.kind == "phase":
            continue
        bases = cones._bases(slot)
        if bases is None:
            keep = any(acts.get(w) for w in slot.wires)
        else:
            keep = any(acts.get(w) and (len(acts[w]) > 1 or b not in acts[w]) for w, b in zip(slot.wires, bases))
        if keep:
            kept.append(si)
            for k, w in enumerate(slot.wires):
                acts.setdefault(w, set()).add(cones.GENERAL if bases is None else bases[k])
    return kept[::-1]


def _random_slots(rng, n_wires, n_slots):
    slots = []
    for i in range(n_slots):
        name, arity = rng.choice([g for g in GATES if g[1] <= n_wires])
        kind = "phase" if arity == 0 else ("matrix" if name == "QubitUnitary" else "fast")
        slots.append(Slot(kind, name, tuple(rng.sample(range(n_wires), arity)), (0, 0), False, i))
    return tuple(slots)


@pytest.mark.parametrize("seed", range(40))
def test_walk_keeps_what_a_full_scan_keeps(seed):
    rng = random.Random(seed)
    n_wires = rng.randint(2, 12)
    slots = _random_slots(rng, n_wires, rng.randint(0, 120))
    for _ in range(6):
        support = rng.sample(range(n_wires), rng.randint(1, min(3, n_wires)))
        word = {w: rng.choice(["X", "Y", "Z", "I", cones.GENERAL]) for w in support}
        want = _scan(slots, word)
        assert cones.cone_slots(slots, word) == want
        assert cones.cone_slots(list(slots), word) == want  # a list: not kept in the index, same walk


def test_index_kept_for_the_last_tuples_only():
    rng = random.Random(7)
    tuples = [_random_slots(rng, 6, 30) for _ in range(cone_walk.INDEX_KEPT + 2)]
    for slots in tuples:
        cones.cone_slots(slots, {0: "Z"})
    held = [s for s, _ in cone_walk._INDEX]
    assert len(held) == cone_walk.INDEX_KEPT and all(a is b for a, b in zip(held, tuples[-cone_walk.INDEX_KEPT:]))
    cones.cone_slots(list(tuples[0]), {0: "Z"})
    assert all(a is b for a, b in zip((s for s, _ in cone_walk._INDEX), tuples[-cone_walk.INDEX_KEPT:]))

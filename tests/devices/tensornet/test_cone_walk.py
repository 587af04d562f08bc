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


@pytest.mark.parametrize("seed", range(20))
def test_all_words_in_one_pass_keep_what_each_walk_keeps(seed):
    rng = random.Random(100 + seed)
    n_wires = rng.randint(2, 12)
    slots = _random_slots(rng, n_wires, rng.randint(0, 120))
    words = []
    for _ in range(rng.randint(1, 70)):  # more words than one machine word of bits
        support = rng.sample(range(n_wires), rng.randint(1, min(3, n_wires)))
        words.append({w: rng.choice(["X", "Y", "Z", "I", cones.GENERAL]) for w in support})
    assert cones.all_cone_slots(slots, words) == [_scan(slots, word) for word in words]


def _conflict(a, b) -> bool:
    """Whether two slots fail to commute by the bases rule on some shared wire (the reference)."""
    ba = cones._bases(a) or (cones.GENERAL,) * len(a.wires)
    bb = cones._bases(b) or (cones.GENERAL,) * len(b.wires)
    on_b = dict(zip(b.wires, bb))
    return any(w in on_b and (x != on_b[w] or x == cones.GENERAL) for w, x in zip(a.wires, ba))


@pytest.mark.parametrize("seed", range(30))
def test_dependency_order_is_every_conflicting_pair_in_tape_order(seed):
    rng = random.Random(200 + seed)
    slots = _random_slots(rng, rng.randint(2, 6), rng.randint(2, 30))
    kept = sorted(rng.sample(range(len(slots)), rng.randint(1, len(slots))))
    for _ in range(20):
        order = list(kept)
        if rng.random() < 0.8:  # a few swaps of neighbours: sometimes of commuting gates, sometimes not
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(max(1, len(order) - 1))
                order[i : i + 2] = order[i : i + 2][::-1]
        place = {si: i for i, si in enumerate(order)}
        want = all(place[a] < place[b] for a in kept for b in kept if a < b and _conflict(slots[a], slots[b]))
        assert cones.in_dependency_order(slots, order) == want

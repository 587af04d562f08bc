"""A light-cone program's cones and engine-choice prices kept on disk: a second process neither labels
cones (``cones.make_cone``), prices classes (``choice.network_cost``) nor judges the whole-circuit
alternative again (``whole.whole_candidates``).

An entry belongs to a circuit structure as ``describe`` writes it in plain JSON: the gates (kind, name,
wire positions, parameter span, broadcast, settings), the measured Pauli words per measurement, the stack,
dtype, device, backend, whether gradients are recorded, and the rules and constants that decide engines.
Its file name is the SHA-256 of that description; the entry holds the description too, compared on
reading, so a colliding or forged name never lends one circuit another's cones. It keeps:

* per measured term, its cone: the kept gates (slot indices) in the canonical order and the cone's wires
  in label order;
* per class, the price of its network (flops with the backward, bytes of its largest intermediate) where
  the engine choice priced one: the state vector's side and the decision are made again at load, under
  the reader's ``max_memory`` (not part of the description), and a class the hint cannot decide is priced
  again.

Only programs whose whole-circuit alternative was settled without building anything (no measurement
besides Pauli sentences, none of them a ``whole_candidates``) are kept: that decision depends on the
structure alone.

Nothing read is trusted. Each cone is checked to be its term's light cone: the same gates ``cone_slots``
finds (every term's in one pass, ``all_cone_slots``), in an order that keeps every two non-commuting gates
in tape order (``in_dependency_order``: so the same circuit), labels a bijection
from exactly its wires onto ``0..width-1``; classes are then formed again from the cones' canonical forms
(members of one class are the same circuit up to relabelling, whatever the entry says). A price only
steers the choice between two engines that give the same values (each checks its memory before
allocating). An entry that fails any check is ignored and rewritten. Entries are plain JSON (nothing is
executed), written atomically.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..network import network as _network
from ..network.path_cache import json_digest, write_atomically
from ..network.pathfind import PathSettings
from . import choice as _choice
from . import whole as _whole
from .cones import Cone, all_cone_slots, cone_slots, in_dependency_order, labelled_cone

FORMAT = 1
"""Entry format; entries of another format are ignored (change it when cones are labelled differently)."""

FOLDER = "cones"
"""Where entries live: this folder of the path store's directory (``path_cache``; none without one)."""


class StoreStats:
    """Entries read (``hits``), looked up and not usable (``misses``: absent, another structure's, or
    failing a check) and written (``writes``) since the last ``reset``: for tests and diagnostics."""

    def __init__(self):
        self.reset()

    def reset(self) -> "StoreStats":
        self.hits = self.misses = self.writes = 0
        return self

    def counted(self, got):
        """``got`` (what a load read, or None), counted as a hit or a miss."""
        if got is None:
            self.misses += 1
        else:
            self.hits += 1
        return got


STATS = StoreStats()


def store_of(opts) -> "ConeStore | None":
    """The store beside the device's path store (None where paths are not kept)."""
    paths = PathSettings.of(opts.optimizer).store
    return None if paths is None else ConeStore(Path(paths.directory) / FOLDER)


def describe(program, structure, tape, opts, rule, words, per_measurement, gradient: bool) -> dict:
    """The structure as plain JSON: everything the cones, the classes, their prices and the whole-circuit
    decision depend on (``program``: the ``ConeProgram`` being built, for its kind, stack and rules)."""
    keys = structure.key[0]
    slots = [[s.kind, s.name, list(s.wires), list(s.params), s.batched, k[4]] for s, k in zip(structure.slots, keys)]
    measurements = []
    for m, mp in enumerate(tape.measurements):
        wires = [structure.sim_wires.index(w) for w in mp.wires] if mp.wires else []
        measurements.append([type(mp).__name__, per_measurement.get(m), wires])
    settings = PathSettings.of(opts.optimizer)
    return {
        "program": type(program).__name__,
        "slots": slots,
        "wires": len(structure.sim_wires),
        "batch": structure.batch_size,
        "words": [sorted([w, letter] for w, letter in word.items()) for word in words],
        "measurements": measurements,
        "stack": [sorted(program.stacked), program.stack_size],
        "dtype": str(opts.dtype),
        "device": str(opts.device),
        "backend": str(opts.backend),
        "method": settings.method,
        "gradient": bool(gradient),
        "rule": rule,
        "candidate_wires": program.candidate_wires,
        "whole_max_elements": _whole.WHOLE_NETWORK_MAX_ELEMENTS,
        "hyperedges": bool(_network.DIAGONAL_HYPEREDGES),
        "step_flops": _choice.NETWORK_STEP_FLOPS,
    }


def cone_key(description: dict) -> str:
    """The entry's key (its file's name) for ``description``."""
    return json_digest(description)


class Stored:
    """What an entry gives a program: the cones of its kept terms (checked) and each class's network price
    (by its first term): ``(flops, bytes)``, ``"none"`` (no network measures it) or None (not priced)."""

    def __init__(self, cones: list[Cone], prices: dict):
        self.cones, self.prices = cones, prices


class ConeStore:
    """A directory of light-cone program entries, one JSON file per described structure."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def _file(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, description: dict, structure, words: list, kept: list) -> Stored | None:
        """The entry for ``description`` with its cones checked against ``structure`` (``words[t]``: term
        ``t``'s word; ``kept``: the terms measured by cones, in order), or None (absent, unreadable, for
        another structure, or a cone that is not its term's light cone)."""
        return STATS.counted(self._read(description, structure, words, kept))

    def _read(self, description: dict, structure, words: list, kept: list) -> Stored | None:
        key = json_digest(description)
        try:
            entry = json.loads(self._file(key).read_text())
            if entry.get("format") != FORMAT or entry.get("key") != key or entry.get("description") != description:
                return None
            stored = entry["cones"]
            if not isinstance(stored, list) or len(stored) != len(kept):
                return None
            cones = []
            found = all_cone_slots(structure.slots, [words[t] for t in kept])
            for t, item, slots in zip(kept, stored, found):
                cone = checked_cone(structure, words[t], item[0], item[1], slots)
                if cone is None:
                    return None
                cones.append(cone)
            prices = {}
            for term, price in entry["prices"]:
                if price is not None and price != "none":
                    price = (float(price[0]), float(price[1]))
                prices[int(term)] = price
            return Stored(cones, prices)
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None

    def save(self, description: dict, cones: list[Cone], classes, choices) -> None:
        """Write the entry atomically (an unwritable directory only means nothing is kept)."""
        key = json_digest(description)
        prices = []
        for c, ch in zip(classes, choices):
            if ch.network_flops is not None:
                price = [ch.network_flops, ch.network_bytes]
            else:
                price = "none" if ch.reason == _choice.NO_NETWORK else None
            prices.append([c.terms[0], price])
        inverse = [sorted(cone.labels, key=cone.labels.get) for cone in cones]
        entry = {
            "format": FORMAT, "key": key, "description": description,
            "cones": [[list(cone.slots), wires] for cone, wires in zip(cones, inverse)], "prices": prices,
        }  # fmt: skip
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(self._file(key), json.dumps(entry, separators=(",", ":")).encode())
            STATS.writes += 1
        except OSError:
            pass


def checked_cone(structure, word: dict, order, wires, kept: list[int] | None = None) -> Cone | None:
    """The cone of ``word`` with the stored gate ``order`` and wires in label order ``wires``, or None
    where they are not its light cone in an order equal to the circuit's, labelled one-to-one; ``kept``:
    the word's ``cone_slots`` where the caller found them already (``all_cone_slots``)."""
    if not all(isinstance(si, int) for si in order) or not all(isinstance(w, int) for w in wires):
        return None
    if kept is None:
        kept = cone_slots(structure.slots, word)
    if sorted(order) != kept or not in_dependency_order(structure.slots, order):
        return None
    labels = {w: i for i, w in enumerate(wires)}
    touched = set(word).union(*(structure.slots[si].wires for si in kept))
    if len(labels) != len(wires) or set(labels) != touched:
        return None
    return labelled_cone(structure, order, labels, word)


def priced_choice(what: str, c, price, opts, gradient: bool):
    """The class's engine choice from a stored network price, decided again under ``opts``; None where the
    price cannot decide it (a class not priced before whose state vector is no longer sure)."""
    itemsize = opts.dtype.itemsize
    flops, peak = _choice.state_side(c.structure, c.structure.batch_size or 1, itemsize, gradient)
    sure = _choice.state_sure(what, flops, peak, opts.max_memory, gradient)
    if sure is not None:
        return sure
    if price is None:
        return None
    net = None if price == "none" else price
    if net is not None and not all(map(math.isfinite, net)):
        return None
    return _choice.decide(what, flops, peak, net, opts.max_memory)


__all__ = ["ConeStore", "Stored", "STATS", "StoreStats", "store_of", "describe", "checked_cone", "priced_choice", "cone_key", "FORMAT"]

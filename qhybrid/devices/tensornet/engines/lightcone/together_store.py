"""Closed classes' ``ClassesTogether`` kept on disk: a second process loads the compiled schedule of its
cone classes' networks instead of building their programs, networks and ``ManyTrees`` again.

A second process of Q100 p=4 (cones and prices read from ``stored.py``, paths from ``path_cache``) spent
5-6 s of its 8-9 s first result rebuilding what the first process had built: every class's closed
network and plan (the paths read and priced again), then the leaf table's recipe and the ``ManyTrees``
tables. Those follow from the circuit structure, the classes run together, the options and the code
alone, so they are kept, per such description, in ``<path store>/together/<sha256>.json`` (the numbers,
``many_store.to_plain``'s, and the leaf table's recipe: each fast gate kind's parameter positions and the
constant tensors' values) beside ``<sha256>.bin`` (the position tables, int64, read copy-on-write mapped).

The description names the light-cone program's own entry (``stored.py``'s key: gates, measured words,
stack, dtype, device, backend, gradient, engine rules), the classes (their terms, in order) and the
parameter rows they run over, the dtype, device, memory target, path settings and planning time, and a
digest of the source of every module whose code decides the tables (``SOURCES``): a changed circuit,
graph, depth, observable, dtype, option or code never reads another's entry. The entry holds its
description, compared on reading, so a colliding or forged name lends nothing either; the positions'
CRC-32 and size must match, and so must the entry's own text's (a truncated or damaged file is ignored:
one flipped digit of a constant gave another value), and ``many_store.from_plain`` checks
every table's bounds and shapes before anything runs, so a damaged entry cannot read or write outside
its buffers. What the checks cannot tell is a well-formed entry written to give other values: the
store trusts its directory as far as that (the path store's paths, by contrast, are checked as paths).
An entry failing a check is ignored and rewritten; written atomically (positions first, then the entry).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ..network import many, many_sequence, many_store, many_tiny
from ..network.path_cache import json_digest, write_atomically
from ..network.pathfind import PathSettings
from .stored import StoreStats

FORMAT = 2
"""Entry format; entries of another format are ignored (2: the entry's own text checked by a CRC-32)."""

FOLDER = "together"
"""Where entries live: this folder of the path store's directory."""

SOURCES = (
    "qhybrid.devices.tensornet.engines.lightcone.closed_classes",
    "qhybrid.devices.tensornet.engines.lightcone.together_store",
    "qhybrid.devices.tensornet.engines.lightcone.classes",
    "qhybrid.devices.tensornet.engines.lightcone.cones",
    "qhybrid.devices.tensornet.engines.network.many",
    "qhybrid.devices.tensornet.engines.network.many_waves",
    "qhybrid.devices.tensornet.engines.network.many_sequence",
    "qhybrid.devices.tensornet.engines.network.many_tiny",
    "qhybrid.devices.tensornet.engines.network.many_store",
    "qhybrid.devices.tensornet.engines.network.fuse",
    "qhybrid.devices.tensornet.engines.network.tree",
    "qhybrid.devices.tensornet.engines.network.plan",
    "qhybrid.devices.tensornet.engines.network.network",
    "qhybrid.devices.tensornet.engines.network.together",
    "qhybrid.devices.tensornet._values",
    "qhybrid.devices.tensornet._gates",
)
"""Modules whose code decides the kept tables (networks, trees, schedules, the leaf table's layout)."""

STATS = StoreStats()
"""This store's loads, misses and writes (the cone store keeps its own, ``stored.STATS``)."""


def code_digest() -> str:
    """SHA-256 of the source files of ``SOURCES`` as they were when this module was imported (read then, not
    at first use: a file edited while a process runs must not name that process's tables)."""
    return _CODE[0]


def _source_digest() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        spec = importlib.util.find_spec(name)
        path = getattr(spec, "origin", None)
        h.update(name.encode() + b"\0" + (Path(path).read_bytes() if path else b"?") + b"\0")
    return h.hexdigest()


_CODE: list[str] = [_source_digest()]


def store_of(program) -> "TogetherStore | None":
    """The store beside the program's path store, where the program's cones are kept (``cone_key``)."""
    paths = PathSettings.of(program.opts.optimizer).store
    if paths is None or getattr(program, "cone_key", None) is None:
        return None
    return TogetherStore(Path(paths.directory) / FOLDER)


def describe(program, classes, dtype, device, rows) -> dict:
    """Everything a ``ClassesTogether`` of ``classes`` (over parameter ``rows``, None: the members' own)
    depends on, as plain JSON."""
    # (not the memory target, which follows the memory free: the schedule's own need is checked against
    # the reader's target on loading, as ``ManyTrees`` checks it on building)
    settings = replace(PathSettings.of(program.opts.optimizer), store=None, max_elements=None)
    return {
        "format": FORMAT,
        "cones": program.cone_key,
        "classes": [[int(t) for t in c.terms] for c in classes],
        "tables": _tables(classes),
        "rows": None if rows is None else [[list(r.shape), np.asarray(r).reshape(-1).tolist()] for r in rows],
        "dtype": str(dtype),
        "device": str(device),
        "paths": repr(settings),
        "plan_time": repr(float(program.opts.plan_time)),
        "code": code_digest(),
        "constants": _constants(),
    }


class TogetherStore:
    """A directory of kept ``ClassesTogether`` schedules, one entry per description."""

    def __init__(self, directory):
        self.directory = Path(directory)

    def load(self, description: dict, dtype, device, max_elements: float) -> tuple | None:
        """``(constants, fast gate kinds' parameter positions, ManyTrees, plan flops)`` of the
        ``ClassesTogether`` kept for ``description`` (checked), or None; None too where its intermediates
        exceed ``max_elements``."""
        return STATS.counted(self._read(description, dtype, device, max_elements))

    def _read(self, description: dict, dtype, device, max_elements: float) -> tuple | None:
        key = json_digest(description)
        try:
            entry = json.loads((self.directory / f"{key}.json").read_text())
            if entry.pop("digest", None) != _digest(entry):  # (a flipped digit of a constant or a table position)
                return None
            if entry.get("key") != key or entry.get("description") != description:
                return None
            # (a plain array over the mapping: slicing a ``memmap`` costs its ``__array_finalize__`` each time)
            flat = np.memmap(self.directory / f"{key}.bin", dtype=np.int64, mode="c").view(np.ndarray)
            if flat.size != entry["count"] or zlib.crc32(flat) != entry["crc"]:
                return None
            trees = many_store.from_plain(entry["trees"], flat)
            if trees.need > max_elements:  # (``ManyTrees``' memory guard, under the reader's target)
                return None
            trees.keep_waves = trees.keep_waves and trees.need + trees.small_read <= max_elements
            constants = _complex(entry["constants"], dtype, device)
            fast, at = {}, constants.numel()
            for name, dim, keys in entry["fast"]:
                index = torch.tensor(keys, dtype=torch.long, device=device).reshape(len(keys), -1)
                if not isinstance(name, str) or index.numel() and int(index.min()) < 0:
                    return None
                fast[name] = index
                at += len(keys) * int(dim) ** 2
            if at != trees.table_size:
                return None
            return constants, fast, trees, float(entry["flops"])
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, RuntimeError):
            return None

    def save(self, description: dict, together) -> None:
        """Keep ``together``'s schedule (an unwritable directory only means nothing is kept)."""
        key = json_digest(description)
        meta, flat = many_store.to_plain(together.trees)
        dims = together._dims
        entry = {
            "key": key, "description": description, "count": int(flat.size), "crc": zlib.crc32(flat), "trees": meta,
            "constants": _plain_complex(together.constants), "flops": float(together.plan_flops),
            "fast": [[name, dims[name], list(map(list, rows))] for name, rows in together._fast.items()],
        }  # fmt: skip
        entry["digest"] = _digest(entry)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(self.directory / f"{key}.bin", flat.tobytes())
            write_atomically(self.directory / f"{key}.json", json.dumps(entry, separators=(",", ":")).encode())
            STATS.writes += 1
        except OSError:
            pass


def _digest(entry: dict) -> int:
    """CRC-32 of the entry's text: a damaged entry that still parses (a constant 0.7071 read as 0.6071, a gate
    reading its neighbour's parameter, a wave's span cut short) is ignored, as a damaged ``.bin`` is."""
    return zlib.crc32(json.dumps(entry, separators=(",", ":")).encode())


def _constants() -> list:
    """The tuning constants the schedule follows, as they are now (a test may change them in place)."""
    return [many.BIG_STEP_ELEMENTS, many_tiny.TINY_PRODUCTS, many_sequence.MAX_COPY_RUNS, many.WAVE_BUFFERS, many.SEQUENCE_LIVE]


def _tables(classes) -> str:
    """SHA-256 of the classes' parameter tables (each member's gates' parameter positions, in the order its
    network reads them)."""
    h = hashlib.sha256()
    for c in classes:
        table = np.ascontiguousarray(c.table.cpu().numpy(), dtype=np.int64)
        h.update(repr(table.shape).encode() + table.tobytes())
    return h.hexdigest()




def _plain_complex(t: torch.Tensor) -> list:
    t = torch.view_as_real(t.detach().cpu().to(torch.complex128)).reshape(-1)
    return [float(x) for x in t.tolist()]


def _complex(values: list, dtype, device) -> torch.Tensor:
    if not all(isinstance(x, float) for x in values) or len(values) % 2:
        raise ValueError("constants are not complex numbers")
    real = torch.tensor(values, dtype=torch.float64).reshape(-1, 2)
    return torch.view_as_complex(real).to(dtype=dtype, device=device)


__all__ = ["TogetherStore", "STATS", "store_of", "describe", "code_digest", "FORMAT", "SOURCES"]

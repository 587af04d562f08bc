"""Contraction paths kept on disk by network structure: a second process plans nothing and gets identical
results; corrupt or mismatching entries are ignored; the device option turns the store off or moves it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.network import pathfind as _pathfind
from qhybrid.devices.tensornet.engines.network.path_cache import PathStore, structure_key, valid_path

ROOT = Path(__file__).resolve().parents[3]
WIRES = 6

# One process: a 6-wire circuit measured by closed light-cone networks (the state-vector limit set to 0),
# every search made worth its time; prints the results (exact reprs) and what the planner did.
SCRIPT = r"""
import json, sys, torch, pennylane as qml, qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.network import pathfind
_simulate.STATE_MODE_MAX_WIRES = 0
pathfind.FLOP_RATE = 1.0
def f(x, w):
    qml.AngleEmbedding(x, wires=range(6), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(6))
    return [qml.expval(qml.Z(i)) for i in range(6)]
g = torch.Generator().manual_seed(5)
x = torch.rand(3, 6, generator=g, dtype=torch.float64)
w = torch.rand(2, 6, 3, generator=g, dtype=torch.float64) * 6
dev = qhybrid.device("tensornet", wires=6, plan_time=1.0, path_cache=sys.argv[1])  # room for a search under load
out = torch.stack(list(qhybrid.qnode(dev, diff_method=None)(f)(x, w)))
s = pathfind.STATS
print(json.dumps({"values": [repr(v) for v in out.flatten().tolist()], "quick": s.quick, "searches": s.searches,
                  "disk_hits": s.disk_hits, "disk_writes": s.disk_writes}))
"""


def _run(directory) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(directory)], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _reference() -> torch.Tensor:
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(WIRES), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return [qml.expval(qml.Z(i)) for i in range(WIRES)]

    g = torch.Generator().manual_seed(5)
    x = torch.rand(3, WIRES, generator=g, dtype=torch.float64)
    w = torch.rand(2, WIRES, 3, generator=g, dtype=torch.float64) * 6
    return torch.stack(list(qml.QNode(f, qml.device("default.qubit", wires=WIRES), interface="torch")(x, w)))


def test_a_second_process_takes_the_paths_from_disk_and_ignores_bad_entries(tmp_path):
    first = _run(tmp_path)
    assert first["disk_hits"] == 0 and first["searches"] >= 1 and first["disk_writes"] == WIRES
    assert len(list(tmp_path.glob("*.json"))) == WIRES  # one entry per closed network (one per wire)
    got = torch.tensor([float(v) for v in first["values"]], dtype=torch.float64).reshape(WIRES, 3)
    torch.testing.assert_close(got, _reference(), atol=1e-10, rtol=0)

    second = _run(tmp_path)
    assert second["disk_hits"] == WIRES
    assert second["searches"] == 0 and second["quick"] == 0 and second["disk_writes"] == 0  # planned nothing
    assert second["values"] == first["values"]  # bit for bit: the same paths

    files = sorted(tmp_path.glob("*.json"))
    files[0].write_text("{not json")
    entry = json.loads(files[1].read_text())
    entry["path"] = [[0, 99]]  # not a contraction of this network
    files[1].write_text(json.dumps(entry))
    files[3].write_text(files[2].read_text())  # another structure's entry under this name
    files[4].write_bytes(b"\x00\xff" * 10)
    third = _run(tmp_path)
    assert third["disk_hits"] == WIRES - 4 and third["disk_writes"] == 4  # the bad four planned and rewritten
    # the four re-planned within a time budget may take another (as good) path: equal to rounding, not bits
    again = torch.tensor([float(v) for v in third["values"]], dtype=torch.float64).reshape(WIRES, 3)
    torch.testing.assert_close(again, got, atol=1e-12, rtol=0)


def test_structure_key_ignores_index_numbering_but_not_extents():
    a = structure_key([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
    assert a == structure_key([(7, 5), (5, 9)], (7, 9), {7: 2, 5: 3, 9: 4})
    assert a != structure_key([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 2, 2: 4})
    assert a != structure_key([(0, 1), (1, 2)], (0,), {0: 2, 1: 3, 2: 4})


def test_valid_path():
    assert valid_path([[0, 1], [0, 1]], 3) and valid_path([(0,)], 1)
    assert not valid_path([[0, 1]], 3)  # two tensors left
    assert not valid_path([[0, 0], [0, 1]], 3) and not valid_path([[0, 3], [0, 1]], 3)
    assert not valid_path("01", 2) and not valid_path([[0, "1"]], 2) and not valid_path([[]], 1)


def test_store_round_trip_and_unwritable_directory(tmp_path):
    inputs, output, sizes = [(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 3, 2: 4, 3: 5}
    store = PathStore(tmp_path / "new" / "dir")
    assert store.load(inputs, output, sizes) is None
    store.save(inputs, output, sizes, ((1, 2), (0, 1)), searched=False)
    assert store.load(inputs, output, sizes) == (((1, 2), (0, 1)), False, ())
    assert not list((tmp_path / "new" / "dir").glob(".*.tmp"))  # the temporary file was renamed
    blocker = tmp_path / "file"
    blocker.write_text("")
    PathStore(blocker / "sub").save(inputs, output, sizes, ((1, 2), (0, 1)), searched=True)  # no error


def test_device_option(tmp_path, monkeypatch):
    monkeypatch.setenv("QHYBRID_CACHE_DIR", str(tmp_path / "env"))
    assert qhybrid.device("tensornet", wires=2).path_cache.directory == tmp_path / "env" / "paths"
    assert qhybrid.device("tensornet", wires=2, path_cache=tmp_path / "x").path_cache.directory == tmp_path / "x"
    assert qhybrid.device("tensornet", wires=2, path_cache=False).path_cache is None
    assert qml.device("qhybrid.tensornet", wires=2, path_cache=False).path_cache is None
    with pytest.raises(ValueError, match="path_cache must be True"):
        qhybrid.device("tensornet", wires=2, path_cache=3)


def test_no_store_writes_nothing(tmp_path, monkeypatch):
    from qhybrid.devices.tensornet import _simulate

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setenv("QHYBRID_CACHE_DIR", str(tmp_path))
    stats = _pathfind.reset_stats()
    dev = qhybrid.device("tensornet", wires=WIRES, path_cache=False)

    @qhybrid.qnode(dev, diff_method=None)
    def f(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return [qml.expval(qml.Z(i)) for i in range(WIRES)]

    f(torch.rand(2, WIRES, 3, dtype=torch.float64))
    assert stats.disk_writes == 0 and not list(tmp_path.rglob("*.json"))


def test_isomorphic_networks_are_planned_once():
    """Networks equal up to index numbering (isomorphic light cones) share one planning."""
    ring = [(i, (i + 1) % 20) for i in range(20)]
    probs = [
        _pathfind.Problem.of(ring, (), {i: 2 for i in range(20)}),
        _pathfind.Problem.of([(a + 100, b + 100) for a, b in ring], (), {i + 100: 2 for i in range(20)}),
        _pathfind.Problem.of(ring, (), {i: 3 for i in range(20)}),  # other extents: planned on its own
    ]
    stats = _pathfind.reset_stats()
    found = _pathfind.find_paths(probs, "greedy", plan_time=0)
    assert stats.shared == 1 and stats.quick == 2
    assert found[0].path == found[1].path


def test_keys_never_lend_a_path_to_another_structure(tmp_path):
    """Structures that differ anywhere get different keys, and an entry is checked against the reader's
    canonical structure, so even a forged (or colliding) key cannot hand a path to another network."""
    base = ([(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 3, 2: 4, 3: 5})
    variants = [
        ([(1, 0), (1, 2), (2, 3)], (0, 3), base[2]),  # one tensor's index order
        ([(1, 2), (0, 1), (2, 3)], (0, 3), base[2]),  # tensor order
        ([(0, 1), (1, 2), (2, 3)], (3, 0), base[2]),  # output order
        ([(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 3, 2: 4, 3: 6}),  # an extent
        ([(0, 1), (1, 2), (2, 1)], (0,), {0: 2, 1: 3, 2: 4}),  # a hyperedge where there was a bond
    ]
    keys = {structure_key(*base)} | {structure_key(*v) for v in variants}
    assert len(keys) == 1 + len(variants)
    store = PathStore(tmp_path)
    store.save(*base, ((0, 1), (0, 1)), searched=True)
    for v in variants:  # every other structure's file made a copy of base's entry, its key forged
        entry = json.loads((tmp_path / f"{structure_key(*base)}.json").read_text())
        entry["structure"] = structure_key(*v)
        (tmp_path / f"{structure_key(*v)}.json").write_text(json.dumps(entry))
        assert store.load(*v) is None
    assert store.load(*base) == (((0, 1), (0, 1)), True, ())


def test_sliced_indices_are_stored_in_canonical_labels(tmp_path):
    inputs, output, sizes = [(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 8, 2: 8, 3: 2}
    store = PathStore(tmp_path)
    store.save(inputs, output, sizes, ((0, 1), (0, 1)), searched=True, sliced=(2,))
    renamed = [(10, 11), (11, 12), (12, 13)], (10, 13), {10: 2, 11: 8, 12: 8, 13: 2}
    assert store.load(*renamed).sliced == (12,)  # the same index, in the reader's numbering


@pytest.mark.parametrize("damage", ["an index named twice", "an output index"])
def test_a_damaged_sliced_entry_is_ignored(tmp_path, damage):
    """The sliced indices of a stored path: a name twice (one flipped bit of ``[5, 7]``) counted every slice
    twice, silently (a value and gradient twice default.qubit's); an output index broke the contraction."""
    inputs, output, sizes = [(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 8, 2: 8, 3: 2}
    store = PathStore(tmp_path)
    store.save(inputs, output, sizes, ((0, 1), (0, 1)), searched=True, sliced=(2,))
    assert store.load(inputs, output, sizes).sliced == (2,)
    (path,) = [p for p in tmp_path.rglob("*.json")]
    entry = json.loads(path.read_text())
    entry["sliced"] = entry["sliced"] * 2 if damage == "an index named twice" else [entry["canonical"]["output"][0]]
    path.write_text(json.dumps(entry))
    assert store.load(inputs, output, sizes) is None

"""Closed classes' compiled schedules kept on disk (engines/lightcone/together_store.py, network/many_store.py):
a second device or process loads them and builds no class program, the same values bit for bit and equal to
default.qubit; a changed graph, depth, observable, dtype or code never loads another's entry; corrupt or
forged entries are ignored and rewritten."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from _second_process import run_json
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import closed_classes, together_store, whole
from qhybrid.devices.tensornet.engines.network import many

EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (0, 4), (2, 6), (1, 7)]


def _circuit(edges=EDGES, layers=2, words=None, spread=0.0):
    """QAOA-shaped with CRZ among the IsingZZ (two gate kinds); ``spread`` 0: members of a class share rows."""
    words = words if words is not None else [qml.Z(u) @ qml.Z(v) for u, v in edges] + [qml.X(3), qml.Y(5) @ qml.Z(6)]

    def circuit(gamma, beta):
        for w in range(8):
            qml.Hadamard(w)
        for layer in range(layers):
            for k, (u, v) in enumerate(edges):
                angle = gamma[layer] * (1 + spread * k)
                (qml.CRZ if k % 3 == 2 else qml.IsingZZ)(angle, wires=[u, v])
            for w in range(8):
                qml.RX(beta[layer], wires=w)
                qml.RY(0.3 * beta[layer] + spread * w, wires=w)
        return qml.expval(qml.Hamiltonian([0.5 + 0.1 * k for k in range(len(words))], words))

    return circuit


def _angles(layers, real=torch.float64):
    gamma = torch.linspace(0.4, -0.9, layers, dtype=torch.float64).to(real)
    beta = torch.linspace(1.1, 0.3, layers, dtype=torch.float64).to(real)
    return gamma, beta


def _run(path, circuit, layers=2, dtype=torch.complex128):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    g, b = (a.clone().requires_grad_() for a in _angles(layers, real))
    dev = qhybrid.device("tensornet", wires=8, path_cache=path, dtype=dtype)
    value = qhybrid.qnode(dev)(circuit)(g, b)
    return (float(value.detach()), *torch.autograd.grad(value, (g, b)))


def _check(got, circuit, layers=2, tol=1e-10):
    g, b = (a.clone().requires_grad_() for a in _angles(layers))
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(g, b)
    want = (float(want.detach()), *torch.autograd.grad(want, (g, b)))
    assert abs(got[0] - want[0]) < tol
    for a, w in zip(got[1:], want[1:]):
        assert torch.allclose(a.to(torch.float64), w, atol=tol, rtol=0)


def _same(a, b):
    return a[0] == b[0] and all(torch.equal(x, y) for x, y in zip(a[1:], b[1:]))


@pytest.fixture
def built(monkeypatch):
    """Every cone class a closed network (none a whole-circuit one); counts class programs built for running
    together (``_pairs``: none where a schedule is loaded); the store's counters zeroed."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    calls = []
    real = closed_classes._pairs
    monkeypatch.setattr(closed_classes, "_pairs", lambda *a: calls.append(1) or real(*a))
    together_store.STATS.reset()
    return calls


def _entries(root: Path) -> list[Path]:
    return sorted((root / together_store.FOLDER).glob("*.json"))


@pytest.mark.parametrize("spread", [0.0, 0.1])  # shared rows / every member its own row
def test_a_second_device_loads_the_schedule(tmp_path, built, spread):
    circuit = _circuit(spread=spread)
    first = _run(tmp_path, circuit)
    stats = together_store.STATS
    assert built and stats.writes >= 1 and stats.hits == 0 and len(_entries(tmp_path)) == stats.writes
    _check(first, circuit)
    built.clear()
    second = _run(tmp_path, circuit)
    assert not built and stats.hits >= 1  # nothing built: every together run loaded
    assert _same(first, second)
    _check(second, circuit)


CHANGES = {  # what differs from the first circuit: another structure, never the first one's entry
    "graph": dict(circuit=_circuit(edges=EDGES[:-1] + [(3, 7)])),
    "depth": dict(circuit=_circuit(layers=3), layers=3),
    "observable": dict(circuit=_circuit(words=[qml.Z(u) @ qml.Z(v) for u, v in EDGES] + [qml.X(2), qml.Y(5) @ qml.Z(6)])),
    "dtype": dict(circuit=_circuit(), dtype=torch.complex64),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_circuit_or_dtype_builds_its_own(tmp_path, built, change):
    _run(tmp_path, _circuit())
    before = set(_entries(tmp_path))
    built.clear()
    case = CHANGES[change]
    got = _run(tmp_path, case["circuit"], case.get("layers", 2), case.get("dtype", torch.complex128))
    assert built and together_store.STATS.hits == 0 and set(_entries(tmp_path)) > before
    _check(got, case["circuit"], case.get("layers", 2), 1e-10 if change != "dtype" else 2e-5)


@pytest.mark.parametrize("what", ["code", "constant"])
def test_changed_code_or_constants_build_again(tmp_path, built, monkeypatch, what):
    first = _run(tmp_path, _circuit())
    if what == "code":
        monkeypatch.setattr(together_store, "_CODE", ["another version of the code"])
    else:
        monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 16)
    built.clear()
    again = _run(tmp_path, _circuit())
    assert built and together_store.STATS.hits == 0
    assert abs(first[0] - again[0]) < 1e-12 and all(torch.allclose(a, b, atol=1e-12, rtol=0) for a, b in zip(first[1:], again[1:]))


def _largest(root: Path) -> Path:
    return max(_entries(root), key=lambda p: p.with_suffix(".bin").stat().st_size)


def _forge(path: Path, how: str) -> None:
    """Spoil an entry as a damaged file or an attacker might."""
    entry = json.loads(path.read_text())
    bin_path = path.with_suffix(".bin")
    flat = np.fromfile(bin_path, dtype=np.int64)
    if how == "garbage":
        path.write_bytes(b"\x00\xff{not json")
        return
    if how == "truncated positions":
        bin_path.write_bytes(flat[:-3].tobytes())
        return
    if how == "damaged positions":  # the CRC tells
        flat[len(flat) // 2] += 1
        bin_path.write_bytes(flat.tobytes())
        return
    if how == "position outside the buffer":  # with its CRC made to match: the bounds tell
        flat[0] = entry["trees"]["small_size"] + 5
        entry["crc"] = zlib.crc32(flat)
        bin_path.write_bytes(flat.tobytes())
    elif how == "a step reading a later result":
        steps = entry["trees"]["steps"]
        held = next(s for s in range(len(steps)) if steps[s][0][0] >= 0 or steps[s][1][0] >= 0)
        side = 0 if steps[held][0][0] >= 0 else 1
        steps[held][side][0] = held + 1
    elif how == "group shape":  # one matrix product's rows, or one tiny part's results, one more
        wave = next((w for w in entry["trees"]["waves"] if w[2]), None)
        if wave is not None:
            wave[2][0][3] += 1
        else:
            next(w for w in entry["trees"]["waves"] if w[6])[6][0][0] += 1
    elif how == "another description":
        entry["description"]["classes"] = entry["description"]["classes"][::-1]
    elif how == "need beyond memory":
        entry["trees"]["need"] = 10**30
    elif how == "a damaged constant":  # one flipped digit, the entry's CRC left as it was: the CRC tells
        entry["constants"][0] = entry["constants"][0] * 0.9 + 0.1
        path.write_text(json.dumps(entry))
        return
    elif how == "a wave's span cut short":  # likewise (it crashed the run: a tensor of 1022 elements, not 1024)
        wave = max(entry["trees"]["waves"], key=lambda w: w[4][1] - w[4][0])  # (its first operand's span)
        wave[4][1] -= 1
        path.write_text(json.dumps(entry))
        return
    entry.pop("digest", None)  # a forger makes the entry's CRC match: the other checks tell
    entry["digest"] = together_store._digest(entry)
    path.write_text(json.dumps(entry))


FORGERIES = ["garbage", "truncated positions", "damaged positions", "position outside the buffer",
             "a step reading a later result", "group shape", "another description", "need beyond memory",
             "a damaged constant", "a wave's span cut short"]  # fmt: skip


@pytest.mark.parametrize("how", FORGERIES + ["another entry under this name"])
def test_corrupt_or_forged_entries_are_ignored_and_rewritten(tmp_path, built, how, monkeypatch):
    if how == "a step reading a later result":
        monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 16)  # large steps too (the sequence's tables)
    circuit = _circuit(spread=0.1)
    first = _run(tmp_path, circuit)
    path = _largest(tmp_path)
    if how == "another entry under this name":  # a valid entry of another circuit, under this one's name
        _run(tmp_path, _circuit(spread=0.1, layers=3), layers=3)
        other = max((p for p in _entries(tmp_path) if p.stem != path.stem), key=lambda p: p.with_suffix(".bin").stat().st_size)
        path.write_text(other.read_text())
        path.with_suffix(".bin").write_bytes(other.with_suffix(".bin").read_bytes())
    else:
        _forge(path, how)
    together_store.STATS.reset()
    built.clear()
    got = _run(tmp_path, circuit)
    if how != "need beyond memory":  # (that one is not rewritten: it was fine, only too large here)
        assert together_store.STATS.writes >= 1
    assert built and together_store.STATS.misses >= 1
    assert _same(first, got)
    _check(got, circuit)


def test_a_second_process_loads_the_schedule(tmp_path):
    script = r"""
import json, sys, torch, qhybrid
sys.path.insert(0, sys.argv[2])
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import together_store, whole
from test_together_store import _circuit, _run
_simulate.STATE_MODE_MAX_WIRES, whole.WHOLE_NETWORK_MAX_ELEMENTS = 0, 0
got = _run(sys.argv[1], _circuit(spread=0.1))
s = together_store.STATS
print(json.dumps({"hits": s.hits, "writes": s.writes, "value": repr(got[0]),
                  "grads": [repr(x) for g in got[1:] for x in g.tolist()]}))
"""
    first, second = (run_json(script, tmp_path, Path(__file__).parent) for _ in range(2))
    assert first["hits"] == 0 and first["writes"] >= 1 and second["hits"] >= 1 and second["writes"] == 0
    assert second["value"] == first["value"] and second["grads"] == first["grads"]

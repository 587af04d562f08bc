"""Light-cone programs kept on disk (engines/lightcone/stored.py): a second device or process reads the
cones and class prices, a changed structure misses, corrupt or forged entries are ignored and rewritten,
and results equal default.qubit throughout."""

from __future__ import annotations

import json
from pathlib import Path

import pennylane as qml
import pytest
import torch

import qhybrid
from _second_process import run_json
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import cones as _cones
from qhybrid.devices.tensornet.engines.lightcone import program as _program
from qhybrid.devices.tensornet.engines.lightcone import stored, whole

EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 0), (0, 4), (2, 6), (1, 5)]
WIRES = 8


def _circuit(edges=EDGES, extra=False):
    """QAOA-shaped, one Hamiltonian with Z, X and Y words (basis changes in the class tapes); ``extra``:
    one more gate (another structure)."""
    words = [qml.Z(u) @ qml.Z(v) for u, v in edges] + [qml.X(3), qml.Y(5) @ qml.Z(6)]

    def circuit(gamma, beta):
        for w in range(WIRES):
            qml.Hadamard(w)
        for layer in range(2):
            for k, (u, v) in enumerate(edges):
                qml.IsingZZ(gamma[layer] * (1 + 0.1 * k), wires=[u, v])
            for w in range(WIRES):
                qml.RX(beta[layer] * (1 + 0.05 * w), wires=w)
        if extra:
            qml.CNOT(wires=[0, 3])
        return qml.expval(qml.Hamiltonian([0.5 + 0.1 * k for k in range(len(words))], words))

    return circuit


ANGLES = (torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([1.1, 0.3], dtype=torch.float64))


def _value_and_grads(device, circuit):
    g, b = (a.clone().requires_grad_() for a in ANGLES)
    value = qhybrid.qnode(device)(circuit)(g, b)
    return (float(value.detach()), *torch.autograd.grad(value, (g, b)))


def _check_default_qubit(got, circuit):
    g, b = (a.clone().requires_grad_() for a in ANGLES)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(g, b)
    want = (float(want.detach()), *torch.autograd.grad(want, (g, b)))
    assert abs(got[0] - want[0]) < 1e-10
    for a, w in zip(got[1:], want[1:]):
        assert torch.allclose(a, w, atol=1e-10, rtol=0)


@pytest.fixture
def cones_program(monkeypatch):
    """Light cones for every circuit (no whole-circuit state vector nor network), the store's counters zeroed."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    return stored.STATS.reset()


def _entries(root: Path) -> list[Path]:
    return sorted((root / stored.FOLDER).glob("*.json"))


def test_a_second_device_reads_the_cones_and_a_changed_structure_misses(tmp_path, cones_program, monkeypatch):
    stats = cones_program
    first = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit())
    assert (stats.hits, stats.misses, stats.writes) == (0, 1, 1) and len(_entries(tmp_path)) == 1
    _check_default_qubit(first, _circuit())

    labelled = []  # a second device reads the cones: none is labelled again
    monkeypatch.setattr(_program, "make_cone", lambda *a: labelled.append(1) or _cones.make_cone(*a))
    second = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit())
    assert stats.hits == 1 and stats.writes == 1 and not labelled
    assert second[0] == first[0] and all(torch.equal(a, b) for a, b in zip(first[1:], second[1:]))

    changed = _circuit(extra=True)  # one more gate: another structure, another entry
    got = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), changed)
    assert stats.hits == 1 and stats.writes == 2 and labelled and len(_entries(tmp_path)) == 2
    _check_default_qubit(got, changed)


def test_no_store_without_a_path_store(tmp_path, cones_program):
    _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=False), _circuit())
    assert (cones_program.hits, cones_program.misses, cones_program.writes) == (0, 0, 0)


def _forge(entry: dict, how: str) -> None:
    """Spoil a stored entry as a corrupt file or an attacker might."""
    cones = entry["cones"]
    widest = max(range(len(cones)), key=lambda k: len(cones[k][0]))
    order, wires = cones[widest]
    if how == "missing gate":
        order.pop(len(order) // 2)
    elif how == "gates out of order":  # an IsingZZ before the Hadamard it follows on the circuit
        order.reverse()
    elif how == "labels swapped with a stranger":
        wires[-1] = max(range(WIRES), key=lambda w: w not in wires)
    elif how == "another description":
        entry["description"]["wires"] += 1
    elif how == "two cones swapped":  # two terms' cones exchanged: each is some other term's light cone
        cones[0], cones[1] = cones[1], cones[0]
    elif how == "not a list":
        entry["cones"] = {"0": 1}


FORGERIES = ["missing gate", "gates out of order", "labels swapped with a stranger", "another description",
             "two cones swapped", "not a list"]  # fmt: skip


@pytest.mark.parametrize("how", FORGERIES + ["garbage", "another structure's entry"])
def test_corrupt_or_forged_entries_are_ignored_and_rewritten(how, tmp_path, cones_program):
    stats = cones_program
    first = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit())
    (path,) = _entries(tmp_path)
    if how == "garbage":
        path.write_bytes(b"\x00\xff{not json")
    elif how == "another structure's entry":  # a valid entry of another circuit, under this circuit's name
        _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit(extra=True))
        other = next(p for p in _entries(tmp_path) if p != path)
        path.write_text(other.read_text())
    else:
        entry = json.loads(path.read_text())
        _forge(entry, how)
        path.write_text(json.dumps(entry))
    writes = stats.writes
    got = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit())
    assert stats.hits == 0 and stats.writes == writes + 1  # ignored, then rewritten
    assert got[0] == first[0] and all(torch.equal(a, b) for a, b in zip(first[1:], got[1:]))
    _check_default_qubit(got, _circuit())
    again = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path), _circuit())
    assert stats.hits == 1 and again[0] == first[0]  # the rewritten entry is good


def test_checked_cone_refuses_what_is_not_the_light_cone():
    tape = qml.tape.QuantumScript(
        [qml.H(0), qml.H(1), qml.IsingZZ(0.3, [0, 1]), qml.RX(0.2, 1), qml.CNOT([1, 2]), qml.RY(0.1, 3)],
        [qml.expval(qml.Z(1))],
    )
    structure = _simulate.tape_structure(tape, None)
    word = {1: "Z"}
    cone = _cones.make_cone(structure, word)
    wires = sorted(cone.labels, key=cone.labels.get)
    good = stored.checked_cone(structure, word, list(cone.slots), wires)
    assert good is not None and good.key == cone.key and good.labels == cone.labels
    assert stored.checked_cone(structure, word, list(cone.slots)[1:], wires) is None  # a gate missing
    assert stored.checked_cone(structure, word, list(cone.slots) + [5], wires) is None  # a gate outside it
    assert stored.checked_cone(structure, word, list(reversed(cone.slots)), wires) is None  # reordered
    assert stored.checked_cone(structure, word, list(cone.slots), wires + [3]) is None  # a wire outside it
    assert stored.checked_cone(structure, word, list(cone.slots), wires[:-1]) is None  # a wire unlabelled
    assert stored.checked_cone(structure, word, list(cone.slots), [wires[0]] * len(wires)) is None  # not 1-to-1


def test_stored_prices_are_decided_again_under_the_readers_memory(tmp_path, monkeypatch):
    """By cost (no width rule): classes whose state vector does not fit ``max_memory`` are priced networks;
    read back under a larger ``max_memory`` the stored prices decide them again without pricing anything.
    Values equal default.qubit both times."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", None)
    cones = _simulate.EngineChoice("whole circuit", "light cones", "this test", None, None, None, None)
    monkeypatch.setattr(_simulate, "_choose_whole", lambda *a: cones)  # (8 wires: else one state vector)
    monkeypatch.setattr(_program, "WHOLE_NETWORK_CANDIDATE_WIRES", 64)  # nor a whole-circuit network
    stats = stored.STATS.reset()
    circuit = _circuit()
    priced = []
    real = _program.choose_class
    monkeypatch.setattr(_program, "choose_class", lambda *a: priced.append(1) or real(*a))
    # 4 KiB: no room for the state vector of a class of 6 wires or more
    small = qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path, max_memory=4096.0)
    got = _value_and_grads(small, circuit)
    _check_default_qubit(got, circuit)
    first = [c for c in small.plan_cache_info().engines if c.what.startswith("cone class")]
    assert stats.writes == 1 and priced and any(c.engine == "closed network" for c in first)
    calls = len(priced)

    large = qhybrid.device("tensornet", wires=WIRES, path_cache=tmp_path, max_memory=float(1 << 30))
    got = _value_and_grads(large, circuit)
    _check_default_qubit(got, circuit)
    read = [c for c in large.plan_cache_info().engines if c.what.startswith("cone class")]
    assert stats.hits == 1 and len(priced) == calls  # decided from the stored prices: nothing priced again
    assert [c.what for c in read] == [c.what for c in first]
    assert all(c.engine == "state vector" for c in read)  # every class's state vector fits now, and is cheaper


def test_a_second_process_reads_the_cones(tmp_path):
    script = r"""
import json, sys, torch, pennylane as qml, qhybrid
sys.path.insert(0, sys.argv[2])
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import stored, whole
from test_cone_store import _circuit, _value_and_grads, WIRES
_simulate.STATE_MODE_MAX_WIRES, whole.WHOLE_NETWORK_MAX_ELEMENTS = 0, 0
got = _value_and_grads(qhybrid.device("tensornet", wires=WIRES, path_cache=sys.argv[1]), _circuit())
print(json.dumps({"hits": stored.STATS.hits, "writes": stored.STATS.writes, "value": repr(got[0]),
                  "grads": [repr(x) for g in got[1:] for x in g.tolist()]}))
"""
    first, second = (run_json(script, tmp_path, Path(__file__).parent) for _ in range(2))
    assert (first["hits"], first["writes"]) == (0, 1) and (second["hits"], second["writes"]) == (1, 0)
    assert second["value"] == first["value"] and second["grads"] == first["grads"]

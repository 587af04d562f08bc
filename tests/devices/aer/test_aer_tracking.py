"""qml.Tracker on qhybrid.aer and qhybrid.tensornet records what default.qubit records for the same circuits:
the same history of batches, simulations, executions, shots, resources and errors (all but ``results``),
for shot vectors (one execution, though qhybrid.aer runs one Aer job per setting), broadcast batches,
measurements that need several executions, forward and parameter-shift derivatives, through the PennyLane
plugin (PennyLane's own ``simulator_tracking``) and through ``qhybrid.qnode`` (``devices/_tracking``)."""

from __future__ import annotations

import importlib.util

import pennylane as qml
import pytest
import torch

import qhybrid

SHOTS = [None, 10, (10, 20), ((5, 2), 7)]
_NO_QISKIT = pytest.mark.skipif(importlib.util.find_spec("qiskit") is None, reason="the aer extra (qiskit) is not installed")
NAMES = [pytest.param("aer", marks=_NO_QISKIT), "tensornet"]


pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _one(x, w):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(w[0], 1)
    return qml.expval(qml.Z(1))


def _two_groups(x, w):  # default.qubit counts two executions: expval(Z1) and probs(0) are two groups
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(w[0], 1)
    qml.RZ(w[1], 0)
    return qml.expval(qml.Z(1)), qml.probs(wires=[0])


def _sum(x, w):  # non-commuting terms: qhybrid.aer samples them in two groups, default.qubit counts two
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(w[0], 1)
    return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(0))


def _history(qnode, dev, broadcast: bool, backward: bool) -> dict:
    x = torch.tensor([0.3, 0.5] if broadcast else 0.3, dtype=torch.float64, requires_grad=not broadcast)
    w = torch.tensor([0.2, 0.4], dtype=torch.float64, requires_grad=True)
    with qml.Tracker(dev) as tracker:
        out = qnode(x, w)
        if backward:
            leaves = out if isinstance(out, tuple) else (out,)
            flat = [t for leaf in leaves for t in (leaf if isinstance(leaf, tuple) else (leaf,))]
            sum(t.sum() for t in flat).backward()
    return {k: v for k, v in tracker.history.items() if k != "results"}  # results: sampled, and recorded later


def _plugin(name, body, shots, broadcast, backward) -> dict:
    dev = qml.device(name, wires=2)
    qnode = qml.set_shots(qml.QNode(body, dev, interface="torch", diff_method="parameter-shift"), shots)
    return _history(qnode, dev, broadcast, backward)


CASES = [
    pytest.param(body, shots, broadcast, backward, id=f"{body.__name__}-{shots}-{'b' if broadcast else ''}{'g' if backward else ''}")
    for body in (_one, _two_groups, _sum)
    for shots in SHOTS
    for broadcast in (False, True)
    for backward in (False, True)
    if body is not _sum or shots is not None or not broadcast  # keep the suite lean
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("body, shots, broadcast, backward", CASES)
def test_plugin_tracker_matches_default_qubit(name, body, shots, broadcast, backward):
    got = _plugin(f"qhybrid.{name}", body, shots, broadcast, backward)
    assert got == _plugin("default.qubit", body, shots, broadcast, backward)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("body, shots, broadcast, backward", CASES)
def test_qnode_tracker_matches_default_qubit(name, body, shots, broadcast, backward):
    dev = qhybrid.device(name, wires=2, shots=shots)
    got = _history(qhybrid.qnode(dev, diff_method="parameter-shift")(body), dev, broadcast, backward)
    assert got == _plugin("default.qubit", body, shots, broadcast, backward)


@_NO_QISKIT
def test_a_shot_vector_is_one_execution_on_the_plugin_path():
    """The records the stock tracker made before qhybrid.aer kept shot vectors whole until ``execute``:
    (10, 20) shots counted as two executions."""
    dev = qml.device("qhybrid.aer", wires=2)
    qnode = qml.set_shots(qml.QNode(_one, dev, interface="torch", diff_method="parameter-shift"), (10, 20))
    history = _history(qnode, dev, broadcast=False, backward=True)
    assert history["executions"] == [1] * 5 and history["shots"] == [30] * 5 and history["batches"] == [1, 1]


def test_adjoint_qnode_records_its_one_forward_run():
    """qhybrid's adjoint keeps what the backward needs from the forward: one device call in all, recorded as
    a run of the circuit (default.qubit's adjoint records an execute-and-derivatives batch instead)."""
    dev = qhybrid.device("tensornet", wires=2)
    history = _history(qhybrid.qnode(dev, diff_method="adjoint")(_two_groups), dev, broadcast=False, backward=True)
    assert history["batches"] == [1] and history["executions"] == [2] and len(history["resources"]) == 1

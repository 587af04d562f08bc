"""qml.counts under shots, unbatched and batched, through ``qhybrid.qnode`` and the PennyLane plugin, on
tensornet and aer: the shape PennyLane's default.qubit gives (a dict, or a list of dicts over the batch).

Angles 0 and pi make the outcomes certain, so the counts are exact whatever the seed; a third angle checks
the totals and the outcome keys of a random draw.
"""

from __future__ import annotations

import math

import pennylane as qml
import pytest
import torch

import qhybrid

SHOTS = 40


pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _body(x):
    qml.RX(x, 0)
    qml.Hadamard(1)
    qml.Hadamard(1)  # wire 1 stays |0>: its bit is always 0
    return qml.counts(wires=[0, 1])


def _qhybrid(name):
    return qhybrid.qnode(qhybrid.device(name, wires=2, shots=SHOTS, seed=7))(_body)


def _plugin(name):
    return qml.set_shots(qml.QNode(_body, qml.device(f"qhybrid.{name}", wires=2, seed=7), interface="torch"), SHOTS)


def _reference():
    return qml.set_shots(qml.QNode(_body, qml.device("default.qubit", wires=2, seed=7), interface="torch"), SHOTS)


def _plain(counts: dict) -> dict:
    return {str(k): int(v) for k, v in counts.items()}


@pytest.mark.parametrize("name", ["tensornet", "aer"])
@pytest.mark.parametrize("entry", [_qhybrid, _plugin])
def test_batched_counts_are_a_list_of_dicts_like_default_qubit(name, entry):
    x = torch.tensor([0.0, math.pi, 1.1], dtype=torch.float64)
    got = entry(name)(x)
    ref = _reference()(x)
    assert isinstance(got, list) and len(got) == len(ref) == 3
    assert all(isinstance(c, dict) for c in got)
    assert _plain(got[0]) == _plain(ref[0]) == {"00": SHOTS}
    assert _plain(got[1]) == _plain(ref[1]) == {"10": SHOTS}
    assert sum(_plain(got[2]).values()) == SHOTS and set(_plain(got[2])) <= {"00", "10"}


@pytest.mark.parametrize("name", ["tensornet", "aer"])
@pytest.mark.parametrize("entry", [_qhybrid, _plugin])
def test_unbatched_counts_are_a_dict_like_default_qubit(name, entry):
    x = torch.tensor(math.pi, dtype=torch.float64)
    got = entry(name)(x)
    assert isinstance(got, dict)
    assert _plain(got) == _plain(_reference()(x)) == {"10": SHOTS}


@pytest.mark.parametrize("name", ["tensornet", "aer"])
def test_counts_beside_a_differentiable_sample_mean(name):
    """counts next to another sampled measurement: both come back, in the qfunc's order."""

    @qhybrid.qnode(qhybrid.device(name, wires=2, shots=SHOTS, seed=7), diff_method="parameter-shift")
    def f(x):
        qml.RX(x, 0)
        return qml.counts(wires=[0]), qml.expval(qml.Z(0))

    counts, ev = f(torch.tensor([0.0, math.pi], dtype=torch.float64))
    assert [_plain(c) for c in counts] == [{"0": SHOTS}, {"1": SHOTS}]
    assert torch.allclose(ev, torch.tensor([1.0, -1.0], dtype=torch.float64))

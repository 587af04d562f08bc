"""method="mps" knows its memory before it allocates (issue 41, finding 4): the plan's worst case bounds every bond,
and a split that would take the state past max_memory is refused with the numbers and the fix."""

import re

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from _reference import brickwork
from qhybrid.devices.tensornet.engines.mps.memory import fitting_cap, worst_case
from qhybrid.errors import ContractionTooLargeError


def _brickwork(n: int, depth: int, seed: int = 0):
    return brickwork(n, depth, seed)


def test_worst_case_bounds_each_cut_by_both_sides():
    bound = worst_case(((0, 2), (1, 2), (0, 2)), 3, None)
    assert bound.bond == 2  # a 3-site chain: 2**min(k, n - k) = 2
    assert worst_case(((0, 2),) * 5, 10, None).bond == 2  # one cut, one wire on its left
    assert worst_case(((0, 3),), 6, 1).bond == 1


def test_refused_split_names_its_size_the_worst_case_and_a_cap_that_fits():
    dev = qhybrid.device("tensornet", wires=30, method="mps", max_memory=3e5)
    with pytest.raises(ContractionTooLargeError) as info:
        qml.QNode(_brickwork(30, 10), dev)()
    msg = str(info.value)
    assert re.search(r"needs about [\d.]+ KiB at split \d+ of 145 of this circuit on 30 wires", msg)
    assert "above max_memory=293.0 KiB: refused before allocating it" in msg
    assert "its bonds may grow to 1024 (about 306.7 MiB in the worst case)" in msg
    cap = int(re.search(r"set max_bond_dim=(\d+) \(its worst case fits\)", msg).group(1))
    assert "cutoff=" in msg and "raise the device's max_memory" in msg
    # the cap it names does fit: the same circuit runs under the same max_memory
    capped = qhybrid.device("tensornet", wires=30, method="mps", max_memory=3e5, max_bond_dim=cap)
    qml.QNode(_brickwork(30, 10), capped)()
    assert capped.last_truncation.max_bond <= cap


def test_a_worst_case_above_max_memory_runs_while_the_true_bonds_fit():
    """An uncapped circuit is not refused by its worst case (2**15 here) while its Schmidt ranks stay small."""
    dev = qhybrid.device("tensornet", wires=30, method="mps", max_memory=2e6)
    qml.QNode(_brickwork(30, 10), dev)()
    assert dev.last_truncation.max_bond == 32
    (entry,) = [c for c in dev.plan_cache_info().engines if c.engine == "matrix product state"]
    assert "checked split by split against max_memory" in entry.reason


def test_keeping_every_zero_is_refused_early():
    dev = qhybrid.device("tensornet", wires=30, method="mps", max_memory=1e6, cutoff=0)
    with pytest.raises(ContractionTooLargeError, match=r"With no bond cap and cutoff=0, its bonds may grow to 1024"):
        qml.QNode(_brickwork(30, 10), dev)()


def test_a_capped_circuit_within_max_memory_is_not_checked_split_by_split():
    dev = qhybrid.device("tensornet", wires=40, method="mps", max_bond_dim=8)
    qml.QNode(_brickwork(40, 12), dev)()
    (entry,) = [c for c in dev.plan_cache_info().engines if c.engine == "matrix product state"]
    assert "bonds at most 8" in entry.reason and "(within max_memory)" in entry.reason


def test_fitting_cap_is_the_largest_that_fits():
    spans = tuple((w, 2) for d in range(8) for w in range(d % 2, 15, 2))
    per = 16
    limit = worst_case(spans, 16, 16).peak * per
    assert fitting_cap(spans, 16, per, limit) == 16
    assert fitting_cap(spans, 16, per, limit - 1) == 15
    assert fitting_cap(spans, 16, per, 10) is None


def test_sampling_is_guarded_too():
    dev = qhybrid.device("tensornet", wires=30, method="mps", max_memory=3e5, cutoff=0)
    with pytest.raises(ContractionTooLargeError, match="refused before allocating it"):
        qml.QNode(_brickwork(30, 10), dev, shots=10)()


def test_gradients_still_flow_with_the_guard_on():
    n = 10
    dev = qhybrid.device("tensornet", wires=n, method="mps", max_memory=5e4)  # worst case 158.6 KiB, bonds 8
    w = torch.rand(n, dtype=torch.float64, requires_grad=True)

    def circuit(w):
        for d in range(6):
            for i in range(n):
                qml.RY(w[i] * (d + 1), i)
            for i in range(d % 2, n - 1, 2):
                qml.CNOT([i, i + 1])
        return qml.expval(qml.Z(n // 2))

    ours = qhybrid.qnode(dev)(circuit)(w)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(w)
    assert torch.allclose(ours, ref, atol=1e-10)
    assert torch.allclose(torch.autograd.grad(ours, w)[0], torch.autograd.grad(ref, w)[0], atol=1e-10)
    (entry,) = [c for c in dev.plan_cache_info().engines if c.engine == "matrix product state"]
    assert "checked split by split" in entry.reason

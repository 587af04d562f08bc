"""Noise channels on method="mps" (issue 41, finding 5): refused by name with the fix under noise="exact" (was an
empty MatrixUndefinedError from PennyLane), and run as trajectories, one MPS batched over them, under
noise="trajectories": the same draws as the exact methods' trajectories, so the same numbers."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import UnsupportedOperationError


def _noisy(w):
    qml.RX(w, 0)
    qml.Hadamard(2)
    qml.CNOT([0, 2])
    qml.DepolarizingChannel(0.2, 2)
    qml.BitFlip(0.1, 0)
    qml.CNOT([2, 1])
    qml.RY(w, 1)
    return qml.expval(qml.Z(0) @ qml.Z(1)), qml.probs(wires=[1, 2])


def test_a_channel_is_refused_by_name_with_the_fix():
    dev = qhybrid.device("tensornet", wires=3, method="mps")
    with pytest.raises(UnsupportedOperationError) as info:
        qml.QNode(_noisy, dev)(0.3)
    msg = str(info.value)
    assert "DepolarizingChannel on wires [2] is a noise channel" in msg
    assert "method='mps' simulates pure states and has no channels" in msg
    assert "method='auto'" in msg and "noise='trajectories'" in msg


def test_a_channel_with_shots_is_refused_by_name():
    dev = qhybrid.device("tensornet", wires=3, method="mps")
    with pytest.raises(UnsupportedOperationError, match="DepolarizingChannel on wires \\[2\\] is a noise channel"):
        qml.QNode(_noisy, dev, shots=20)(0.3)


def test_trajectories_on_mps_equal_the_exact_methods_trajectories():
    w = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    runs = []
    for method in ("auto", "mps"):
        dev = qhybrid.device("tensornet", wires=3, method=method, noise="trajectories", trajectories=64, seed=7)
        out = qhybrid.qnode(dev)(_noisy)(w)
        grad = torch.autograd.grad(out[0], w)[0]
        runs.append((out, grad, dev))
    (a, ga, _), (b, gb, dev) = runs
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-10)
    assert torch.allclose(ga, gb, atol=1e-10)
    assert len(dev.trajectory_standard_errors) == 1
    engines = [c.engine for c in dev.plan_cache_info().engines]
    assert engines == ["trajectories", "matrix product state"]


def test_trajectories_on_mps_are_near_default_mixed():
    dev = qhybrid.device("tensornet", wires=3, method="mps", noise="trajectories", trajectories=2000, seed=3)
    ours = qml.QNode(_noisy, dev)(0.4)
    ref = qml.QNode(_noisy, qml.device("default.mixed", wires=3))(0.4)
    (err_z, err_p) = dev.trajectory_standard_errors[-1]
    assert abs(float(ours[0]) - float(ref[0])) <= 4 * float(err_z) + 1e-12
    assert np.all(np.abs(np.asarray(ours[1]) - np.asarray(ref[1])) <= 4 * np.asarray(err_p) + 1e-12)

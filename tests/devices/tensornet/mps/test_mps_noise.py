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


def test_entropies_and_purity_on_mps_equal_default_qubit():
    """They read the state of the tape's wires (the other device wires are |0>): refused before with a message
    that asked for qml.state()."""

    def circuit(x):
        qml.RY(x, 0)
        qml.CNOT([0, 2])
        qml.RX(0.3, 2)
        return qml.vn_entropy(wires=[0]), qml.purity(wires=[2]), qml.mutual_info(wires0=[0], wires1=[2])

    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qhybrid.device("tensornet", wires=5, method="mps"))(x)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=5), interface="torch")(x)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-10)
    assert torch.allclose(torch.autograd.grad(ours[0], x)[0], torch.autograd.grad(ref[0], x)[0], atol=1e-10)


def test_a_classical_shadow_with_shots_is_refused_by_name():
    dev = qhybrid.device("tensornet", wires=2, method="mps")

    @qml.qnode(dev, shots=10)
    def circuit():
        qml.Hadamard(0)
        return qml.classical_shadow(wires=[0])

    with pytest.raises(UnsupportedOperationError, match="ClassicalShadowMP on wires \\[0\\] is not sampled by method='mps'"):
        circuit()


def test_numpy_integers_and_bad_cutoff_types():
    dev = qhybrid.device("tensornet", wires=2, method="mps", max_bond_dim=np.int64(4))
    assert dev._mps.max_bond_dim == 4 and type(dev._mps.max_bond_dim) is int
    with pytest.raises(ValueError, match="cutoff must be a number in \\[0, 1\\)"):
        qhybrid.device("tensornet", wires=2, method="mps", cutoff="1e-3")


@pytest.mark.parametrize("method", ["auto", "mps"])
def test_trajectories_with_shots_are_refused_with_the_fix(method):
    """With shots the sampler asked for the trajectories' state and was told qml.state() is not linear."""
    dev = qhybrid.device("tensornet", wires=3, method=method, noise="trajectories", trajectories=4)
    with pytest.raises(UnsupportedOperationError, match="noise='trajectories' gives analytic trajectory means"):
        qml.QNode(_noisy, dev, shots=10)(0.3)

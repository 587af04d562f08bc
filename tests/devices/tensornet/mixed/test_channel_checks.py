"""A channel that is none is refused by name before it is simulated (issue 41: the closed-form superoperators gave
numbers for DepolarizingChannel(1.5); a QubitChannel with 4 x 4 Kraus operators on one wire failed inside torch)."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import GradientError


def _with(channel):
    def circuit():
        qml.Hadamard(0)
        channel()
        return qml.expval(qml.Z(0))

    return circuit


@pytest.mark.parametrize("noise", ["exact", "trajectories"])
@pytest.mark.parametrize(
    "channel, match",
    [
        (lambda: qml.DepolarizingChannel(1.5, 0), r"DepolarizingChannel\(1.5\) on wires \[0\] is not a channel: p must"),
        (lambda: qml.AmplitudeDamping(-0.1, 0), r"AmplitudeDamping\(-0.1\) on wires \[0\] is not a channel"),
        (lambda: qml.QubitChannel([np.eye(4)], wires=0), r"QubitChannel on wires \[0\] has Kraus operators of shape"),
    ],
)
def test_invalid_channels_are_refused_by_name(noise, channel, match):
    if noise == "trajectories" and "Amplitude" in match:
        pytest.skip("not a mixture of unitaries: trajectories refuse it for that")
    dev = qhybrid.device("tensornet", wires=1, noise=noise, trajectories=4 if noise == "trajectories" else None)
    with pytest.raises(ValueError, match=match):
        qml.QNode(_with(channel), dev)()


def test_valid_strengths_at_the_edges_run():
    dev = qhybrid.device("tensornet", wires=1)
    for p in (0.0, 1.0):
        out = qml.QNode(_with(lambda: qml.BitFlip(p, 0)), dev)()
        ref = qml.QNode(_with(lambda: qml.BitFlip(p, 0)), qml.device("default.mixed", wires=1))()
        assert abs(float(out) - float(ref)) < 1e-12


def test_a_trainable_strength_is_not_read_on_the_host():
    dev = qhybrid.device("tensornet", wires=1)
    p = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    out = qml.QNode(_with(lambda: qml.DepolarizingChannel(p, 0)), dev)()
    out.backward()
    assert p.grad is not None


def test_a_strength_without_shift_rule_under_shots_is_not_sent_back_to_adjoint_alone():
    """A trainable AmplitudeDamping strength with shots: parameter-shift said "use adjoint", and adjoint with shots
    said "use parameter-shift". The hint now says where a derivative exists: adjoint or backprop on exact results."""
    dev = qhybrid.device("tensornet", wires=1, shots=100, seed=1)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(p):
        qml.RX(0.4, 0)
        qml.AmplitudeDamping(p, 0)
        return qml.expval(qml.Z(0))

    p = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradientError, match=r"AmplitudeDamping parameter 0 has no parameter-shift rule.*exact results \(shots=None\)"):
        f(p).backward()

"""A batch axis on a channel's strengths is refused by name (default.mixed takes none either): alone it was read as
its first sample (PennyLane counts a circuit's batch from its gates), beside a batch of gates of the same size or
another one silently the first strength again, and under trajectories an opaque error."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

def _circuit(x, p):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.AmplitudeDamping(p[..., 0], 0)
    qml.DepolarizingChannel(p[..., 1], 1)
    return qml.expval(qml.Z(0) + qml.X(1)), qml.expval(qml.Z(1))


P = torch.tensor([[0.1, 0.2], [0.4, 0.05], [0.7, 0.3]], dtype=torch.float64)


@pytest.mark.parametrize("static", [False, True])
def test_a_batch_in_the_channels_alone_is_refused(static):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), static_structure=static)(_circuit)
    with pytest.raises(ValueError, match=r"AmplitudeDamping on wires \[0\] has parameters with a batch axis"):
        f(torch.tensor(0.3, dtype=torch.float64), P)


@pytest.mark.parametrize("gates", [2, 3])  # another size, and the same size (read as the first strength too)
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_a_batch_of_strengths_beside_a_batch_of_gates_is_refused(gates, diff_method):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(_circuit)
    with pytest.raises(ValueError, match="batch axis"):
        f(torch.linspace(0.3, 2.0, gates, dtype=torch.float64), P)


def test_trajectories_refuse_a_batch_of_strengths():
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2, noise="trajectories", trajectories=8, seed=1))(_circuit)
    with pytest.raises(ValueError, match="batch axis"):
        f(torch.tensor([0.3, 1.2, 2.0], dtype=torch.float64), P)


def test_the_plugin_refuses_it_too():
    f = qml.QNode(_circuit, qml.device("qhybrid.tensornet", wires=2))
    with pytest.raises(ValueError, match="batch axis"):
        f(0.3, P.numpy())


def test_mps_trajectories_refuse_it_too():
    dev = qhybrid.device("tensornet", wires=2, method="mps", noise="trajectories", trajectories=8, seed=1)
    with pytest.raises(ValueError, match="batch axis"):
        qhybrid.qnode(dev)(_circuit)(torch.tensor([0.3, 1.2, 2.0], dtype=torch.float64), P)

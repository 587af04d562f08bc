"""A numpy array handed to a gate or a measurement as a constant, then written in place by its owner, leaves no
trace in what qhybrid keeps: matrices made once per value (``_gates._cached``) own their memory, so a later, equal
array reads its own values. (``torch.as_tensor`` of a complex128 array shares its memory: the cached
``QubitUnitary`` matrix followed the user's buffer, -0.990 for 0.955; found by a fuzzing helper, 2026-11-29.)
Reference: default.qubit, to 1e-10."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid


def _ry(t):
    return np.array(qml.matrix(qml.RY(t, 0)))


BUILDERS = {
    "QubitUnitary": lambda a: (qml.QubitUnitary(a, wires=0), qml.expval(qml.Z(0))),
    "ControlledQubitUnitary": lambda a: (
        qml.ControlledQubitUnitary(a, wires=[1, 0]),
        qml.expval(qml.Z(0)),
    ),
    "DiagonalQubitUnitary": lambda a: (
        qml.DiagonalQubitUnitary(np.exp(1j * np.angle(np.diag(a) + 0.5)), wires=0),
        qml.expval(qml.Y(0)),
    ),
    "Hermitian": lambda a: (qml.Identity(0), qml.expval(qml.Hermitian(a + a.conj().T, wires=0))),
    "StatePrep": lambda a: (qml.StatePrep(a[:, 0], wires=0), qml.expval(qml.X(0))),
}


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_later_equal_array_reads_its_own_values(kind, diff_method):
    def node_of(array, dev):
        def circuit(x):
            qml.Hadamard(1)
            qml.RX(x, wires=1)
            return BUILDERS[kind](array)[1]  # (the gate queues itself)

        if dev == "qhybrid":
            return qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
        return qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")

    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    a = _ry(0.3)
    node_of(a, "qhybrid")(x)  # the matrix made for a's value
    a[:] = _ry(3.0)  # the owner reuses its buffer
    b = _ry(0.3)  # a new array equal to a's old value
    for array in (b, a):
        ours = node_of(array, "qhybrid")(x)
        ref = node_of(array.copy(), "default.qubit")(x)
        assert float(ours.detach()) == pytest.approx(float(ref.detach()), abs=1e-10), kind

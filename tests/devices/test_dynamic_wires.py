"""Devices without wires take PennyLane's standard order (``map_to_standard_wires``): labels that are already 0..n-1
in label order, others as the tape first uses them. ``qml.probs()`` and ``qml.state()`` of ``RY(., 1); RY(., 0)``
came back in the order [1, 0] (found by a fuzzing helper), against default.qubit to 1e-10."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

WIRES = {"labels 0..n-1": (2, 0, 1), "a gap": (3, 0, 1), "strings": ("b", "a", "c")}


def _circuit(wires, measure):
    a, b, c = wires

    def circuit(x):
        qml.RY(x[0], a)
        qml.RY(x[1], b)
        qml.CNOT([a, c])
        qml.RX(x[2], c)
        return measure()

    return circuit


MEASURES = {"probs": qml.probs, "state": qml.state}


@pytest.mark.parametrize("method", ["auto", "mps"])
@pytest.mark.parametrize("plugin", [False, True])
@pytest.mark.parametrize("measure", list(MEASURES))
@pytest.mark.parametrize("labels", list(WIRES))
def test_tensornet_without_wires(labels, measure, plugin, method):
    circuit = _circuit(WIRES[labels], MEASURES[measure])
    x = torch.tensor([0.3, 1.1, 0.5], dtype=torch.float64)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(x)
    if plugin:
        got = qml.QNode(circuit, qml.device("qhybrid.tensornet", method=method), interface="torch")(x)
    else:
        got = qhybrid.qnode(qhybrid.device("tensornet", method=method))(circuit)(x)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("labels", list(WIRES))
def test_aer_without_wires(labels):
    pytest.importorskip("qiskit_aer", reason="the aer extra is not installed")
    circuit = _circuit(WIRES[labels], qml.probs)
    x = torch.tensor([0.3, 1.1, 0.5], dtype=torch.float64)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(x)
    got = qml.QNode(circuit, qml.device("qhybrid.aer"), interface="torch")(x)
    torch.testing.assert_close(torch.as_tensor(got, dtype=torch.float64), want, atol=1e-10, rtol=0)

"""Found by fuzzing qhybrid as a plain PennyLane device against default.qubit (2026-11-28): with
``interface="torch"`` and backprop (or "best"), a circuit with nothing trainable returned a numpy array where
default.qubit returns a torch tensor (then ``torch.autograd.functional.jacobian`` refused the output)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch


@pytest.mark.parametrize("diff_method", ["backprop", "best", "adjoint", "parameter-shift"])
@pytest.mark.parametrize("body", ["hamiltonian", "constant angle"])
def test_constant_circuits_return_torch_tensors(diff_method, body):
    def circuit(p):
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        if body == "constant angle":
            qml.RX(0.3, 0)
            return qml.expval(qml.Z(0))
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(0))

    p = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method)(p)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method=diff_method)(p)
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)
    jac = torch.autograd.functional.jacobian(
        qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method), p
    )
    assert torch.equal(jac, torch.zeros(2, dtype=torch.float64))

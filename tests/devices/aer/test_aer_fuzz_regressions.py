"""Bugs the fuzzing found on the Aer device, pinned: non-Hermitian observables were read as 0 (refused by name now,
as on tensornet), and a batched, sampled run measuring a variance beside another basis crashed in the backward
(Aer's sampled batched results are numpy arrays)."""

from __future__ import annotations

import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")
import torch  # noqa: E402

import qhybrid  # noqa: E402
from qhybrid.errors import UnsupportedOperationError  # noqa: E402


@pytest.mark.parametrize("shots", [None, 1000])
@pytest.mark.parametrize("obs", [lambda: qml.Z(0) @ qml.X(0), lambda: qml.Hamiltonian([1j], [qml.Z(0)])], ids=["ZX", "1j Z"])
def test_a_non_hermitian_observable_is_refused(obs, shots):
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(obs())

    f = qhybrid.qnode(qhybrid.device("aer", wires=1, shots=shots, seed=1))(circuit)
    with pytest.raises(UnsupportedOperationError, match="not Hermitian"):
        f(torch.tensor(0.3, dtype=torch.float64))


def test_a_sampled_batched_variance_beside_another_basis_differentiates():
    def circuit(x):
        qml.RY(x, 0)
        return qml.expval(qml.X(0)), qml.var(qml.Z(0))

    dev = qhybrid.device("aer", wires=1, shots=40000, seed=3)
    x = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    a, b = qhybrid.qnode(dev, diff_method="parameter-shift")(circuit)(x)
    (a.sum() + b.sum()).backward()
    exact = torch.cos(x.detach()) + torch.sin(2 * x.detach())  # d/dx [sin x + sin^2 x]
    assert float((x.grad - exact).abs().max()) < 0.05

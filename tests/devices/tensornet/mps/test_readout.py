"""Measurements read from the MPS equal default.qubit's: Pauli words over any span, Hamiltonians (with
trainable coefficients), var, probs of few wires in any order, state, density_matrix, Hermitian."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from _reference import run_both

N = 7


def _prepare(w):
    qml.StronglyEntanglingLayers(w, wires=range(N))


def _weights():
    return torch.rand(2, N, 3, dtype=torch.float64, requires_grad=True)


def test_words_hamiltonians_and_var():
    coeffs = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64, requires_grad=True)
    herm = np.array([[1, 2j, 0, 0], [-2j, 3, 0, 1], [0, 0, 0, 0], [0, 1, 0, 1.0]])

    def circuit(w, c):
        _prepare(w)
        h = qml.Hamiltonian(c, [qml.PauliZ(0) @ qml.PauliZ(6), qml.PauliY(2), qml.PauliX(1) @ qml.PauliX(3)])
        return [
            qml.expval(qml.prod(*[qml.PauliZ(i) for i in range(N)])),
            qml.expval(h),
            qml.var(qml.Hamiltonian([0.3, -0.7, 1.1], h.ops)),  # default.qubit's var of torch coefficients fails
            qml.var(qml.PauliX(2) @ qml.PauliY(5)),
            qml.expval(qml.Hermitian(herm, wires=[5, 1])),
            qml.var(qml.Hermitian(herm, wires=[1, 3])),
            qml.expval(qml.sum(qml.s_prod(0.5, qml.Hadamard(3)), qml.PauliZ(4))),
        ]

    w = _weights()
    ours, ref, _ = run_both(circuit, N, w, coeffs)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-10)
    g1 = torch.autograd.grad(sum(ours), [w, coeffs])
    g2 = torch.autograd.grad(sum(ref), [w, coeffs])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-10)


def test_probs_state_and_density_matrix():
    def circuit(w):
        _prepare(w)
        return [qml.probs(wires=[4, 0, 2]), qml.probs(), qml.state(), qml.density_matrix(wires=[3, 1])]

    w = _weights()
    ours, ref, _ = run_both(circuit, N, w)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-10)


def test_state_beyond_memory_is_refused_with_its_size():
    dev = qhybrid.device("tensornet", wires=30, method="mps", max_memory=2**20)

    @qhybrid.qnode(dev)
    def circuit():
        qml.Hadamard(0)
        return qml.state()

    with pytest.raises(MemoryError, match="state vector"):
        circuit()


def test_unsupported_measurement_names_itself():
    dev = qhybrid.device("tensornet", wires=2, method="mps")

    @qhybrid.qnode(dev)
    def circuit():
        qml.Hadamard(0)
        return qml.probs(op=qml.PauliX(0) @ qml.PauliY(1))

    with pytest.raises(qml.exceptions.DeviceError, match="ProbabilityMP is not measured by method='mps'"):
        circuit()

"""Shift rules from the generator's exact spectrum, and composite gates with trainable parameters.

PennyLane rounds an operator's frequencies to six decimals and, where a generator's coefficients are tensors,
leaves them repeated with zeros among them: a rule built from those was up to 1e-9 off. An ``Evolution`` of a
Hamiltonian with coefficients (PennyLane's binding fails on it) and a fractional power of a rotation (its matrix is
scipy's, no torch) run with trainable parameters; values and gradients against default.qubit (or the exact
derivative) to 1e-10."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import scipy.linalg
import torch

import qhybrid
from qhybrid.gradients.frequencies import distinct_frequencies
from qhybrid.gradients.parameter_shift import shift_rule

TOL = 1e-10


def test_frequencies_are_distinct_nonzero_floats():
    one = torch.tensor(1.5232, dtype=torch.float64)
    assert distinct_frequencies((one, one, torch.tensor(0.0), 0.0, one * (1 + 1e-14))) == (1.5232,)
    assert distinct_frequencies((0.5, 1.0, 1, 0.5)) == (0.5, 1.0)


@pytest.mark.parametrize("coefficients", ["floats", "tensor"])
def test_an_evolutions_rule_has_its_generators_exact_frequency(coefficients):
    c = [0.3, 0.70001]
    H = qml.dot(c if coefficients == "floats" else torch.tensor(c, dtype=torch.float64), [qml.X(0) @ qml.Y(1), qml.Z(1)])
    (coefficient, _, shift), _ = shift_rule(qml.evolve(H, 0.4), 0)
    frequency = 2 * np.hypot(*c)  # eigenvalues +-|c| (the two terms anticommute)
    assert abs(shift - np.pi / (2 * frequency)) < 1e-14 and abs(coefficient - frequency / 2) < 1e-14


def _evolution_body(H, batched):
    def body(t):
        qml.Hadamard(0)
        qml.evolve(H, t * torch.tensor([1.0, 2.0], dtype=torch.float64) if batched else t)
        qml.IsingXY(t, wires=[0, 1])
        return qml.expval(qml.Z(1) @ qml.X(0))

    return body


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("coefficients", ["floats", "tensor"])
def test_a_trainable_evolution_of_a_hamiltonian_matches_the_exact_derivative(coefficients, diff_method, batched):
    c = [0.3, 0.70001]
    H = qml.dot(c if coefficients == "floats" else torch.tensor(c, dtype=torch.float64), [qml.X(0) @ qml.Y(1), qml.Z(1)])
    body = _evolution_body(H, batched)
    t = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(body)(t)
    (g,) = torch.autograd.grad(got.sum(), t)
    # the exact values from scipy's expm; the derivative against default.qubit's backprop (exact here)
    Hm = qml.matrix(qml.dot(c, [qml.X(0) @ qml.Y(1), qml.Z(1)]), wire_order=[0, 1])
    O = qml.matrix(qml.Z(1) @ qml.X(0), wire_order=[0, 1])
    U2 = qml.matrix(qml.IsingXY(0.4, wires=[0, 1]), wire_order=[0, 1])
    values = []
    for scale in ([1.0, 2.0] if batched else [1.0]):
        psi = U2 @ scipy.linalg.expm(-1j * 0.4 * scale * Hm) @ qml.matrix(qml.Hadamard(0), wire_order=[0, 1])[:, 0]
        values.append((psi.conj() @ O @ psi).real)
    torch.testing.assert_close(got.detach(), torch.tensor(values, dtype=torch.float64).reshape(got.shape), atol=TOL, rtol=0)
    ref = qml.QNode(body, qml.device("default.qubit", wires=2), interface="torch")
    u = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    (h,) = torch.autograd.grad(ref(u).sum(), u)
    assert abs(float(g) - float(h)) < TOL


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("via", ["qnode", "plugin"])
def test_a_fractional_power_of_a_rotation_is_its_rotation_of_the_scaled_angle(diff_method, via):
    def body(t):
        qml.Hadamard(0)
        qml.pow(qml.RX(t, 0), 0.5)
        qml.CNOT([0, 1])
        qml.pow(qml.CRY(2 * t, wires=[0, 1]), 1.5)
        return qml.expval(qml.Z(1) @ qml.X(0) + 0.5 * qml.Y(0))

    if via == "qnode":
        ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(body)
    else:
        ours = qml.QNode(body, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method)
    ref = qml.QNode(body, qml.device("default.qubit", wires=2), interface="torch")
    t, u = (torch.tensor(0.7, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got, want = ours(t), ref(u)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    assert abs(float(torch.autograd.grad(got, t)[0] - torch.autograd.grad(want, u)[0])) < TOL

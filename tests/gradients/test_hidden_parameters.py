"""Tensors an operator holds outside its own parameters (``qml.evolve``'s generator coefficients): trainable ones are
refused by name under adjoint and parameter-shift (``c.grad`` stayed None, silently; found by a fuzzing helper) and
differentiated by backprop; untrained ones that change between calls run on every method (parameter-shift raised
PennyLane's "only one element tensors can be converted" reading the gate's rule). Against default.qubit to 1e-10."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import GradientError

from _circuits import check_untrained_constants

TOL = 1e-10


def _circuit(x, c):
    qml.Hadamard(1)
    qml.evolve(qml.Hamiltonian(c, [qml.X(0), qml.Z(0)]), x[0])
    qml.RY(x[1], 0)
    return qml.expval(qml.Y(0))


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_trainable_generator_coefficients_are_refused(diff_method, static):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(_circuit)
    x = torch.tensor([0.4, 0.7], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradientError, match="Evolution holds trainable tensors outside its own parameters"):
        node(x, c).backward()


def test_backprop_differentiates_them():
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="backprop")(_circuit)
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    x = torch.tensor([0.4, 0.7], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    got, want = ours(x, c), ref(x, c)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got, (x, c)), torch.autograd.grad(want, (x, c))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_untrained_generator_coefficients_that_change(diff_method, static):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(_circuit)
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    check_untrained_constants(ours, ref, [0.4, 0.7], ([0.3, 0.5], [1.2, -0.4], [-0.7, 2.0]), TOL)


def _trotter(x, c):
    qml.Hadamard(0)
    qml.TrotterProduct(qml.dot(c, [qml.X(0) @ qml.X(1), qml.Z(0)]), x[0], n=2, order=2)
    return qml.expval(qml.Y(0))


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_a_trotter_product_of_trainable_coefficients(diff_method):
    """It decomposes into evolutions of the coefficients: adjoint gave them no gradient (None), parameter-shift
    crashed ("Can't call numpy() on Tensor that requires grad"); both refuse them by name now, backprop takes them."""
    x = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(_trotter)
    with pytest.raises(GradientError, match="trainable tensors outside its own parameters"):
        node(x, c).backward()
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="backprop")(_trotter)
    ref = qml.QNode(_trotter, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    got, want = ours(x, c), ref(x, c)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got, (x, c)), torch.autograd.grad(want, (x, c))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)
    check_untrained_constants(node, ref, [0.7], ([0.3, 0.5], [1.1, -0.2]), TOL)

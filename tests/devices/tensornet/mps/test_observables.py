"""Observables as terms: coefficients and per-site matrices in operator order, and their dense form."""

import pennylane as qml
import torch

from qhybrid.devices.tensornet.engines.mps.observables import dense_on, observable_terms, one_site_product, squared


def test_hamiltonian_terms_and_dense_form():
    h = qml.Hamiltonian([0.5, -2.0], [qml.PauliX(0) @ qml.PauliY(2), qml.Hermitian(qml.matrix(qml.CNOT([1, 2])), [2, 1])])
    site_of = {0: 0, 1: 1, 2: 2}
    terms = observable_terms(h, site_of, torch.complex128, "cpu")
    assert [float(c) for c, _ in terms] == [0.5, -2.0]
    assert one_site_product(terms[0][1]) is not None and one_site_product(terms[1][1]) is None
    total = sum(c * dense_on(f, [0, 1, 2], torch.complex128, "cpu") for c, f in terms)
    assert torch.allclose(total, torch.as_tensor(qml.matrix(h, wire_order=[0, 1, 2]), dtype=torch.complex128))
    square = sum(c * dense_on(f, [0, 1, 2], torch.complex128, "cpu") for c, f in squared(terms))
    assert torch.allclose(square, total @ total)


def test_products_on_one_wire_multiply_in_order():
    op = qml.prod(qml.PauliX(0), qml.PauliY(0))  # X @ Y = iZ
    ((coeff, factors),) = observable_terms(op, {0: 0}, torch.complex128, "cpu")
    ops = one_site_product(factors)
    assert torch.allclose(ops[0], 1j * torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128))

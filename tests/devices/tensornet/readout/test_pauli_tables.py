"""Pauli sentences as flip-group tables (readout/pauli_tables.py) against default.qubit: values and gradients
for circuit parameters and Hamiltonian coefficients, broadcast, float32 and float64."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.readout import pauli_tables


def _random_sentence(rng, n: int, terms: int):
    """Random Pauli words on ``n`` wires (Y-odd words and the identity among them) and coefficients."""
    words = [qml.Identity(0)]
    for _ in range(terms - 1):
        letters = rng.choice(list("IXYZ"), size=n)
        ops = [getattr(qml, L)(w) for w, L in enumerate(letters) if L != "I"] or [qml.Z(int(rng.integers(n)))]
        words.append(qml.prod(*ops) if len(ops) > 1 else ops[0])
    return rng.normal(size=terms), words


def _circuit(n, words, wires_perm):
    def circuit(x, coeffs):
        qml.BasisState(np.array([1, 0] * (n // 2) + [0] * (n % 2)), wires=range(n))
        for w in range(n):
            qml.RY(x[..., w], wires=wires_perm[w])
        for w in range(n - 1):
            qml.CNOT(wires=[wires_perm[w], wires_perm[w + 1]])
        qml.SingleExcitation(x[..., 0] * 0.7, wires=[wires_perm[0], wires_perm[2]])
        qml.DoubleExcitation(x[..., 1] * 0.3, wires=[wires_perm[3], wires_perm[1], wires_perm[0], wires_perm[2]])
        return qml.expval(qml.dot(coeffs, words))

    return circuit


@pytest.fixture
def counted(monkeypatch):
    """Counts the table expectation values actually taken (the tests must reach the new path)."""
    calls = []
    real = pauli_tables.pauli_expval

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr("qhybrid.devices.tensornet.readout.measure.pauli_expval", spy)
    monkeypatch.setattr("qhybrid.devices.tensornet._simulate.pauli_expval", spy)  # trainable coefficients
    return calls


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("trainable_coeffs", [False, True])
def test_random_sentences_match_default_qubit(seed, trainable_coeffs, counted):
    rng = np.random.default_rng(seed)
    n = 5
    c, words = _random_sentence(rng, n, 30)
    circuit = _circuit(n, words, list(rng.permutation(n)))
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x0 = torch.tensor(rng.normal(size=n), dtype=torch.float64)
    for step in range(2):  # the second call is served from the caches
        out = []
        for f in (ours, ref):
            x = (x0 + step).clone().requires_grad_()
            coeffs = torch.tensor(c, dtype=torch.float64, requires_grad=True) if trainable_coeffs else c
            v = f(x, coeffs)
            v.backward()
            out.append((v.detach(), x.grad, coeffs.grad if trainable_coeffs else None))
        (va, ga, ca), (vb, gb, cb) = out
        assert abs(float(va - vb)) < 1e-10
        assert torch.allclose(ga, gb, atol=1e-10, rtol=0)
        if trainable_coeffs:
            assert torch.allclose(ca, cb, atol=1e-10, rtol=0)
    assert len(counted) == 2


def test_broadcast_and_float32(counted):
    rng = np.random.default_rng(7)
    n = 4
    c, words = _random_sentence(rng, n, 25)
    circuit = _circuit(n, words, [2, 0, 3, 1])
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x0 = torch.tensor(rng.normal(size=(3, n)), dtype=torch.float64)
    xb = x0.clone().requires_grad_()
    vb = ref(xb, c)
    vb.sum().backward()
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
        complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, dtype=complex_dtype))(circuit)
        xa = x0.to(dtype).clone().requires_grad_()
        va = ours(xa, c)
        va.sum().backward()
        assert va.shape == (3,) and va.dtype == dtype
        assert torch.allclose(va.double(), vb.detach(), atol=tol, rtol=0)
        assert torch.allclose(xa.grad.double(), xb.grad, atol=tol, rtol=0)
    assert len(counted) == 2


def test_table_groups_words_by_flip_mask():
    H = qml.dot([1.0, 2.0, 3.0, 4.0], [qml.X(0) @ qml.X(1), qml.Y(0) @ qml.Y(1), qml.Z(0), qml.X(0) @ qml.Y(1)])
    table = pauli_tables.pauli_table(H.pauli_rep, {0: 0, 1: 1})
    assert sorted(table.groups.tolist()) == [0, 3]  # {Z0} and {XX, YY, XY}
    psi = torch.randn(2, 4, dtype=torch.complex128)
    psi = psi / psi.norm(dim=1, keepdim=True)
    want = [float(torch.vdot(p, torch.as_tensor(qml.matrix(H, wire_order=[0, 1]), dtype=psi.dtype) @ p).real) for p in psi]
    got = pauli_tables.pauli_expval(psi, table, table.coefficients(H.pauli_rep))
    assert np.allclose(got.numpy(), want, atol=1e-12)


def test_z_only_and_oversized_sentences_keep_their_paths():
    z = qml.dot([1.0, 0.5], [qml.Z(0) @ qml.Z(1), qml.Z(1)])
    assert pauli_tables.pauli_table(z.pauli_rep, {0: 0, 1: 1}) is None  # the sign-matrix path reads it
    wide = qml.X(0) @ qml.X(1)
    positions = {w: w for w in range(30)}
    assert pauli_tables.pauli_table(wide.pauli_rep, positions) is None  # a [1, 2**30] table: word by word

"""The Pauli-basis Heisenberg walk (``engines.mixed.pauli``): Clifford permutation tables against dense
conjugation, transfer matrices against the superoperator, and walked batches (Clifford and not, two-wire gates
and channels, float32) against default.mixed."""

from functools import reduce

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mixed import heisenberg, pauli, program, sparse_walk
from qhybrid.devices.tensornet.engines.statevector.blocks import _full_monomial, _monomial

from _noisy import apply_spec, first_params, random_spec

TOL = 1e-10
_P = {0: np.eye(2), 1: np.array([[0, 1], [1, 0]]), 2: np.array([[0, -1j], [1j, 0]]), 3: np.diag([1, -1])}


def _pauli_matrix(index: int, n: int) -> np.ndarray:
    return reduce(np.kron, [_P[(index >> (2 * (n - 1 - w))) & 3] for w in range(n)]).astype(complex)


def _permutation(ops, n):
    """``(src, vals)`` of a product of permutation gates (applied in order), as the program composes them."""
    src, vals = np.arange(1 << n), np.ones(1 << n, dtype=complex)
    for op in ops:
        s, v = _full_monomial(n, op.wires.tolist(), *_monomial(np.asarray(qml.matrix(op))))
        src, vals = src[s], v * vals[s]
    return src, vals


@pytest.mark.parametrize(
    "ops, n",
    [
        ([qml.CNOT([0, 1])], 3),
        ([qml.CZ([2, 0]), qml.CNOT([1, 2]), qml.SWAP([0, 1]), qml.CNOT([2, 0])], 3),
        # five wires (the tables' halves of 2 and 3 wires), phases (CY: +-i) and a ring
        ([qml.CY([4, 1]), qml.CNOT([0, 1]), qml.CNOT([1, 2]), qml.CZ([2, 3]), qml.CNOT([3, 4]), qml.CNOT([4, 0])], 5),
    ],
)
def test_clifford_images_conjugate_every_pauli_string(ops, n):
    src, vals = _permutation(ops, n)
    u = np.zeros((1 << n, 1 << n), dtype=complex)
    u[np.arange(1 << n), src] = vals  # psi'[x] = vals[x] psi[src[x]]
    rows, signs = pauli.clifford_images(src, vals, n)
    for p in range(4**n):
        np.testing.assert_allclose(u @ _pauli_matrix(p, n) @ u.conj().T, signs[p] * _pauli_matrix(rows[p], n), atol=1e-12)


def test_a_toffoli_is_not_clifford():
    assert pauli.clifford_images(*_permutation([qml.Toffoli([0, 1, 2])], 3), 3) is None


def test_transfer_matrix_steps_pauli_coefficients_back():
    g = torch.Generator().manual_seed(3)
    u = torch.linalg.qr(torch.randn(4, 4, dtype=torch.complex128, generator=g))[0]
    o = torch.randn(4, 4, dtype=torch.complex128, generator=g)
    o = o + o.mH  # an observable on two wires
    coefficients = torch.stack([torch.trace(torch.as_tensor(_pauli_matrix(p, 2)) @ o).real for p in range(16)]) / 4
    r = pauli.transfer_back(pauli.unitary_superoperator(u), 2, interleaved=False)
    back = u.mH @ o @ u
    expected = torch.stack([torch.trace(torch.as_tensor(_pauli_matrix(p, 2)) @ back).real for p in range(16)]) / 4
    torch.testing.assert_close(r @ coefficients, expected, atol=1e-12, rtol=0)


@pytest.fixture
def walks(monkeypatch):
    """Which batches walked in the Pauli basis (one entry per walk)."""
    seen = []
    original = heisenberg.walked_expvals

    def walk(*args, **kwargs):
        seen.append(True)
        return original(*args, **kwargs)

    monkeypatch.setattr(heisenberg, "walked_expvals", walk)
    return seen


def _compare(circuit, n, args, leaves, dtype=torch.complex128, tol=TOL):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, dtype=dtype), diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=n), interface="torch")
    a, b = torch.stack(ours(*args)), torch.stack(ref(*args))
    torch.testing.assert_close(a, b.to(a.dtype), atol=tol, rtol=0)
    for g, r in zip(torch.autograd.grad(a.sin().sum(), leaves), torch.autograd.grad(b.sin().sum(), leaves)):
        finite = ~torch.isnan(r)
        torch.testing.assert_close(g[finite], r[finite].to(g.dtype), atol=tol, rtol=0)


@pytest.mark.parametrize("seed, sparse_share", [(21, 1 / 16), (22, 1.0), (23, 0.0)])
def test_random_noisy_batch_walks_in_the_pauli_basis(seed, sparse_share, walks, monkeypatch):
    """Mixed sparse-then-dense, all sparse, and all dense walks (the sparse start's cut-off moved)."""
    monkeypatch.setattr(sparse_walk, "SPARSE_WALK_MAX_FRACTION", sparse_share)
    n = 4
    ops = random_spec(seed, n, depth=14)
    params = first_params(ops)
    x = torch.rand(12, n, dtype=torch.float64, requires_grad=True)

    def circuit(params, x):
        apply_spec(ops, params, x)
        qml.AmplitudeDamping(0.1, wires=0)
        qml.CNOT([0, 3])
        qml.CZ([1, 2])
        apply_spec(ops, params)
        return qml.expval(qml.Hamiltonian([0.3, -0.7], [qml.X(0) @ qml.Y(3), qml.Z(2)])), qml.expval(qml.Y(1))

    _compare(circuit, n, (params, x), [x, *(p for p in params if p is not None)])
    assert walks, "the batch did not walk in the Pauli basis"


def test_a_toffoli_walks_in_the_computational_basis(walks, monkeypatch):
    heisenberg_calls = []
    original = program.heisenberg_expvals
    monkeypatch.setattr(program, "heisenberg_expvals", lambda *a: heisenberg_calls.append(1) or original(*a))
    n = 3
    x = torch.rand(8, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(n, dtype=torch.float64, requires_grad=True)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        for q in range(n):
            qml.RX(w[q], q)
            qml.DepolarizingChannel(0.05, q)
        qml.Toffoli([0, 1, 2])
        qml.CNOT([2, 0])
        qml.PhaseDamping(0.2, 1)
        return qml.expval(qml.Z(2) @ qml.X(0)), qml.expval(qml.Y(1))

    _compare(circuit, n, (x, w), [x, w])
    assert heisenberg_calls and not walks, "the batch did not walk back in the computational basis"


def test_float32_walk_matches_to_single_precision(walks):
    n = 3
    x = torch.rand(8, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        for q in range(n):
            qml.BitFlip(0.1, q)
        return [qml.expval(qml.Z(q)) for q in range(n)]

    _compare(circuit, n, (x, w), [x, w], dtype=torch.complex64, tol=1e-5)
    assert walks


_H = 3.05 * qml.X(0) - 0.43 * (qml.Y(0) @ qml.Y(1))


def _squared(x, toffoli):
    qml.RY(x[..., 0], wires=0)
    qml.CNOT([0, 1])
    qml.RX(x[..., 1], 1)
    if toffoli:
        qml.Toffoli([0, 1, 2])
    qml.DepolarizingChannel(0.2, wires=1)
    return qml.expval(qml.prod(_H, _H))


@pytest.mark.parametrize("toffoli", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_complex_typed_coefficients_of_a_hermitian_observable(batched, toffoli):
    """``qml.prod(H, H)``'s Pauli sentence holds ``Z0 Y1: 0j`` (the cross terms cancelled): the readouts took the
    coefficient as a real number and raised "must be real number, not complex" (every readout of the engine: one
    circuit, the Pauli-basis walk, the computational-basis walk with a Toffoli; found by a fuzzing helper)."""
    x = torch.tensor([[0.3, 0.4], [1.2, -0.7], [2.0, 0.1]] if batched else [0.3, 0.4], dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="backprop")(_squared)(x, toffoli)
    want = qml.QNode(_squared, qml.device("default.mixed", wires=3), interface="torch", diff_method="backprop")(x, toffoli)
    torch.testing.assert_close(got, want.real, atol=TOL, rtol=0)
    if not toffoli:  # (default.mixed's gradients through the Toffoli's exact zeros are NaN)
        g, h = torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.real.sum(), x)[0]
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_parameter_shift_of_a_noisy_variance():
    """The variance's shift rule measures ``H @ H`` (complex-typed coefficients, above): it raised."""

    def circuit(p):
        qml.RY(p[2], wires=0)
        qml.RX(p[3], wires=1)
        qml.CNOT([0, 1])
        qml.DepolarizingChannel(p[0], wires=1)
        qml.PhaseShift(p[1], wires=1)
        return qml.var(_H)

    p = torch.tensor([0.2, 0.3, 0.7, 1.1], dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(circuit)(p)
    want = qml.QNode(circuit, qml.device("default.mixed", wires=2), interface="torch", diff_method="backprop")(p)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(got, p)[0], torch.autograd.grad(want, p)[0], atol=TOL, rtol=0)

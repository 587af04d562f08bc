"""Purity, von Neumann entropy and mutual information (``readout/entropies.py``): measured through the density matrix
of their wires, with default.qubit's values and gradients on random circuits, on wire labels that are not
positions, batched, beside other measurements, through both gradient methods and on a wide circuit."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _random_circuit(seed: int, wires: list, layers: int = 3):
    rng = np.random.default_rng(seed)
    plan = [(rng.choice(["RX", "RY", "RZ"]), rng.integers(len(wires)), rng.integers(4)) for _ in range(layers * len(wires))]
    pairs = [tuple(rng.choice(len(wires), 2, replace=False)) for _ in range(layers * 2)]

    def gates(w):
        for (kind, i, k), (a, b) in zip(plan, pairs * len(wires)):
            getattr(qml, kind)(w[..., k] * (1 + i), wires=wires[i])
            qml.IsingXX(w[..., (k + 1) % 4], wires=[wires[a], wires[b]])  # (IsingXY: default.qubit fails batched)
            qml.CNOT([wires[b], wires[a]])

    return gates


def _compare(circuit, wires, w, diff_method, **device_kwargs):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=wires, **device_kwargs), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch", diff_method="backprop")
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    got, want = ours(a), ref(b)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, v in zip(got, want):
        assert g.shape == v.shape
        torch.testing.assert_close(g, v, atol=TOL, rtol=0)
    weights = torch.tensor([1.0, -0.7, 0.4, 2.0], dtype=torch.float64)
    sum(c * g.sum() for c, g in zip(weights, got)).backward()
    sum(c * v.sum() for c, v in zip(weights, want)).backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)
    return got


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("seed", [0, 1])
def test_entropies_match_default_qubit(seed, diff_method):
    wires = ["a", 7, "c", 2]

    def circuit(w):
        _random_circuit(seed, wires)(w)
        return (
            qml.purity(wires=["c"]),
            qml.vn_entropy(wires=[7, "a"], log_base=2),
            qml.mutual_info(wires0=[2], wires1=["a", "c"]),
            qml.expval(qml.Z("a") @ qml.X(2)),
        )

    w = torch.tensor(np.random.default_rng(seed).uniform(-2, 2, 4), dtype=torch.float64)
    purity, entropy, info, _ = _compare(circuit, wires, w, diff_method)
    assert 0.5 - 1e-12 <= float(purity) < 1 - 1e-3 and float(entropy) > 1e-3 and float(info) > 1e-3  # not trivial


def test_one_entropy_alone_and_batched():
    def circuit(w):
        _random_circuit(3, [0, 1, 2])(w)
        return qml.vn_entropy(wires=[1])

    w = torch.tensor(np.random.default_rng(3).uniform(-2, 2, (5, 4)), dtype=torch.float64)
    (got,) = _compare(circuit, 3, w, "adjoint")
    assert got.shape == (5,)


def test_a_wide_circuits_local_entropy_matches_default_qubit():
    """18 wires: the device reads the wires' density matrices off its light cones, not a whole state (default.qubit's
    own entropy builds the 2^18 x 2^18 matrix: its reduced density matrices and PennyLane's formulas are the
    reference)."""
    n = 18

    def gates(w):
        for i in range(n):
            qml.RY(w[i % 4] * (1 + i % 3), i)
        for layer in range(2):
            for i in range(layer, n - 1, 2):
                qml.IsingXY(w[(i + layer) % 4], [i, i + 1])

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(lambda w: (gates(w), qml.vn_entropy([8, 9]), qml.purity([3]))[1:])
    ref = qml.QNode(
        lambda w: (gates(w), qml.density_matrix([8, 9]), qml.density_matrix([3]))[1:],
        qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop",
    )
    w = torch.tensor([0.4, -1.1, 0.8, 1.7], dtype=torch.float64)
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    entropy, purity = ours(a)
    rho2, rho1 = ref(b)
    want = (qml.math.vn_entropy(rho2, indices=[0, 1], c_dtype=rho2.dtype), qml.math.purity(rho1, indices=[0], c_dtype=rho1.dtype))
    for g, v in zip((entropy, purity), want):
        torch.testing.assert_close(g, v, atol=TOL, rtol=0)
    (entropy - 0.5 * purity).backward()
    (want[0] - 0.5 * want[1]).backward()
    torch.testing.assert_close(a.grad, b.grad, atol=TOL, rtol=0)
    assert float(entropy) > 1e-3


def test_pennylanes_own_qnode_on_the_plugin_device():
    def circuit(w):
        _random_circuit(5, [0, 1, 2])(w)
        return qml.purity(wires=[0, 2])

    w = torch.tensor([0.3, -0.2, 1.4, 0.9], dtype=torch.float64)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=3), interface="torch", diff_method="adjoint")
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch")
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    va, vb = ours(a), ref(b)
    va.backward(), vb.backward()
    assert abs(float(va.detach() - vb.detach())) < TOL and torch.allclose(a.grad, b.grad, atol=TOL, rtol=0)


@pytest.mark.parametrize("method", ["auto", "mps"])
def test_single_precision_results_are_float32(method):
    """A complex64 device's results are float32; PennyLane's purity of a complex64 density matrix is float64 (its
    entropies float32), and came back so (found by a fuzzing helper). Values against default.qubit to 1e-6."""

    def circuit(p):
        qml.RY(p[0], 0)
        qml.CNOT([0, 1])
        qml.RX(p[1], 1)
        return qml.purity(wires=[0]), qml.vn_entropy(wires=[0]), qml.mutual_info(wires0=[0], wires1=[1])

    p = torch.tensor([0.3, 0.5], dtype=torch.float32, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2, dtype=torch.complex64, method=method))(circuit)(p)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(p.double())
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), w, atol=1e-6, rtol=0)

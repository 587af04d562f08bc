"""method="mps" with cutoff=None drops numerically zero Schmidt values: bonds stay at the Schmidt ranks (issue 41,
finding 4: 30 wires at depth 10 grew to bond 1024 with every zero kept), results stay default.qubit's."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mps.settings import DEFAULT_CUTOFF
from qhybrid.devices.tensornet.engines.mps.svd import split

from _reference import brickwork, random_ops, run_both


def _brickwork(n: int, depth: int, seed: int = 0):
    """The brickwork with <Z_0>, <Z_{n/2}> and <X_1 X_{n-2}> read out."""
    def measure(n):
        return [qml.expval(qml.Z(0)), qml.expval(qml.Z(n // 2)), qml.expval(qml.X(1) @ qml.X(n - 2))]

    return brickwork(n, depth, seed, measure)


def test_a_shallow_wide_circuit_keeps_its_schmidt_ranks():
    dev = qhybrid.device("tensornet", wires=30, method="mps")  # defaults: no cap, cutoff=None
    qml.QNode(_brickwork(30, 10), dev)()
    report = dev.last_truncation
    assert report.max_bond == 32  # 2**5: with the zeros kept, 1024
    assert 0 <= report.discarded_weight < 1e-20 and report.fidelity <= 1


@pytest.mark.parametrize("cutoff", [None, 1e-12])
def test_an_explicit_tiny_cutoff_cuts_the_gram_noise_too(cutoff):
    """The Gram route's eigenvalues put zeros at 1e-8: with them, a cutoff of 1e-12 kept bond 13 here."""
    dev = qhybrid.device("tensornet", wires=20, method="mps", cutoff=cutoff)
    qml.QNode(_brickwork(20, 6), dev)()
    assert dev.last_truncation.max_bond == 8


def test_cutoff_zero_keeps_every_value_and_the_plan_bound_is_exact():
    dev = qhybrid.device("tensornet", wires=12, method="mps", cutoff=0)
    qml.QNode(_brickwork(12, 6), dev)()
    assert dev.last_truncation.max_bond == 64  # padded: 2**min(k, n - k)
    (entry,) = [c for c in dev.plan_cache_info().engines if c.engine == "matrix product state"]
    assert "bonds at most 64" in entry.reason and "cutoff=0" in entry.reason


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options", [None, {"cutoff": 0, "max_bond_dim": 16}], ids=["zeros-dropped", "padded-bonds"])
def test_random_circuits_and_gradients_equal_default_qubit(seed, options):
    """Zero Schmidt values dropped (the default cutoff), or kept with bonds fixed by structure (``cutoff=0``: padded
    bonds, singular R in tall centre moves, taken by the SVD split)."""
    rng = np.random.default_rng(seed)
    n = 8
    ops = random_ops(n, 40, rng, lambda: float(rng.uniform(-np.pi, np.pi)))
    w = torch.tensor(rng.uniform(-1, 1, size=n), dtype=torch.float64, requires_grad=True)

    def circuit(w):
        for i in range(n):
            qml.RY(w[i], i)
        for op in ops:
            qml.apply(op)
        for i in range(n - 1):
            qml.CRX(w[i], [i, i + 1])
        return [qml.expval(qml.Z(i)) for i in range(n)] + [qml.expval(qml.X(0) @ qml.Y(n - 1)), qml.probs(wires=[2, 5])]

    ours, ref, dev = run_both(circuit, n, w, mps_options=options)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-10)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), w)[0]
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), w)[0]
    assert torch.allclose(g1, g2, atol=1e-10)
    assert dev.last_truncation.discarded_weight < 1e-20  # numerical zeros at most


def test_a_small_genuine_schmidt_value_is_kept():
    """A value of 1e-9 relative is no zero: it stays (its Gram vector is unresolved: the split refactors by SVD)."""
    theta = torch.zeros(1, 8, 8, dtype=torch.complex128)
    for i, s in enumerate([1.0, 0.3, 1e-9]):
        theta[0, i, (3 * i) % 8] = s
    left, right, discarded, k = split(theta, None, DEFAULT_CUTOFF[torch.complex128], "right")
    assert k == 3
    assert torch.allclose(left @ right, theta, atol=1e-15)
    noisy = theta + 1e-16 * torch.randn(1, 8, 8, dtype=torch.complex128)
    assert split(noisy, None, DEFAULT_CUTOFF[torch.complex128], "right")[3] == 3


def test_single_precision_drops_its_zeros_too():
    dev = qhybrid.device("tensornet", wires=16, method="mps", dtype=torch.complex64)
    out = qml.QNode(_brickwork(16, 4), dev)()
    assert dev.last_truncation.max_bond == 4
    ref = qml.QNode(_brickwork(16, 4), qml.device("default.qubit", wires=16))()
    assert np.allclose(np.asarray(out, dtype=float), np.asarray(ref, dtype=float), atol=1e-5)

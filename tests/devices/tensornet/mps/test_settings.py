"""The device options of method="mps", and the truncation they cause: reported, bounded, warned about."""

import contextlib
import warnings

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mps.settings import TruncationWarning


@pytest.mark.parametrize(
    "options, match",
    [
        ({"method": "dmrg"}, "method must be one of"),
        ({"max_bond_dim": 8}, "apply to method='mps' only"),
        ({"method": "mps", "max_bond_dim": 0}, "max_bond_dim must be a positive int"),
        ({"method": "mps", "cutoff": -1.0}, "cutoff must be a number"),
    ],
)
def test_bad_options_are_refused(options, match):
    with pytest.raises(ValueError, match=match):
        qhybrid.device("tensornet", wires=2, **options)


def _entangled(theta):
    """|psi> = cos(t/2)|0000> + sin(t/2)|0110>: Schmidt coefficients cos(t/2), sin(t/2) across bond 1|2."""
    qml.RY(theta, wires=1)
    qml.CNOT([1, 2])
    return [qml.expval(qml.PauliZ(2)), qml.expval(qml.PauliZ(1) @ qml.PauliZ(2))]


def test_known_truncation_discarded_weight_and_error_bound():
    theta = torch.tensor(0.9, dtype=torch.float64)
    exact = qhybrid.qnode(qhybrid.device("tensornet", wires=4, method="mps"))(_entangled)(theta)
    dev = qhybrid.device("tensornet", wires=4, method="mps", max_bond_dim=1)
    with pytest.warns(TruncationWarning, match="discarded a weight of 0.189"):
        approx = qhybrid.qnode(dev)(_entangled)(theta)
    eps = dev.last_truncation.discarded_weight
    assert eps == pytest.approx(np.sin(0.45) ** 2, abs=1e-12)
    assert dev.last_truncation.fidelity == pytest.approx(1 - eps, abs=1e-12)
    assert dev.last_truncation.max_bond == 1
    # pure states at fidelity 1 - eps are 2 sqrt(eps) apart in trace distance: every |<O>| <= 1 error is bounded
    for a, b in zip(approx, exact):
        assert abs(float(a - b)) <= 2 * np.sqrt(eps) + 1e-12
    assert float(approx[0]) == pytest.approx(1.0, abs=1e-12)  # the kept Schmidt vector |00> on wires 1, 2


def test_errors_shrink_with_bond_dimension_and_vanish_with_the_discarded_weight():
    n = 10
    w = torch.rand(3, n, 3, dtype=torch.float64)

    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    exact = torch.stack(qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(w))
    errors, discarded = [], []
    for chi in (2, 8, 32):
        dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=chi)
        with pytest.warns(TruncationWarning) if chi < 32 else _truncation_warnings("error"):
            out = torch.stack(qhybrid.qnode(dev)(circuit)(w))
        errors.append(float((out - exact).abs().max()))
        discarded.append(dev.last_truncation.discarded_weight)
    assert discarded[0] > discarded[1] > 0 and discarded[2] == 0.0
    assert errors[0] > errors[1] and errors[2] < 1e-10


@contextlib.contextmanager
def _truncation_warnings(action: str):
    """Truncation warnings turned into errors ("error") or silenced ("ignore") inside the block."""
    with warnings.catch_warnings():
        warnings.simplefilter(action, TruncationWarning)
        yield


def test_cutoff_drops_small_schmidt_values():
    theta = torch.tensor(1e-4, dtype=torch.float64)  # second Schmidt value sin(5e-5) ~ 5e-5 of the first
    dev = qhybrid.device("tensornet", wires=4, method="mps", cutoff=1e-3)
    qhybrid.qnode(dev)(_entangled)(theta)
    assert dev.last_truncation.max_bond == 1
    assert dev.last_truncation.discarded_weight == pytest.approx(np.sin(5e-5) ** 2, rel=1e-6)


def test_degenerate_spectra_give_finite_gradients():
    """IsingZZ layers on |+...+> (a GHZ-like, exactly degenerate Schmidt spectrum): torch's own SVD backward
    gives NaN here; the broadened one gives the exact gradient."""
    n = 6
    gamma = torch.tensor([0.3, 0.3], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([np.pi / 2, 0.0], dtype=torch.float64, requires_grad=True)

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(2):
            for i in range(n - 1):
                qml.IsingZZ(gamma[layer], wires=[i, i + 1])
            for i in range(n):
                qml.RX(beta[layer], wires=i)
        return qml.expval(qml.sum(*[qml.PauliZ(i) @ qml.PauliZ(i + 1) for i in range(n - 1)]))

    for chi in (None, 2):
        dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=chi)
        with _truncation_warnings("ignore"):
            value = qhybrid.qnode(dev, diff_method="backprop")(circuit)(gamma, beta)
        grads = torch.autograd.grad(value, [gamma, beta])
        assert all(torch.isfinite(g).all() for g in grads)
        if chi is None:
            ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(gamma, beta)
            for a, b in zip(grads, torch.autograd.grad(ref, [gamma, beta])):
                assert torch.allclose(a, b, atol=1e-9)

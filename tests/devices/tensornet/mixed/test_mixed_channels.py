"""Every channel's closed-form superoperator against PennyLane's own Kraus operators, broadcast parameters, and
finite derivatives at zero noise (where sqrt(p) Kraus operators have none)."""

import numpy as np
import pennylane as qml
import pytest
import torch

from qhybrid.devices.tensornet.engines.mixed import CHANNEL_NAMES, superoperator
from qhybrid.devices.tensornet.engines.mixed.channels import kraus_superoperator

CASES = [
    qml.AmplitudeDamping(0.3, wires=0),
    qml.GeneralizedAmplitudeDamping(0.3, 0.2, wires=0),
    qml.PhaseDamping(0.4, wires=0),
    qml.DepolarizingChannel(0.2, wires=0),
    qml.BitFlip(0.15, wires=0),
    qml.PhaseFlip(0.35, wires=0),
    qml.PauliError("XZ", 0.25, wires=[0, 1]),
    qml.PauliError("Y", 0.1, wires=[0]),
    qml.ResetError(0.2, 0.1, wires=0),
    qml.ThermalRelaxationError(0.3, 100.0, 80.0, 25.0, wires=0),
    qml.ThermalRelaxationError(0.1, 100.0, 180.0, 25.0, wires=0),
    qml.QubitChannel([np.sqrt(0.7) * np.eye(2), np.sqrt(0.3) * np.array([[0, 1], [1, 0]])], wires=0),
]


def _reference(op) -> torch.Tensor:
    kraus = torch.as_tensor(np.stack([np.asarray(k, dtype=complex) for k in op.kraus_matrices()]))
    return kraus_superoperator(kraus)


def test_every_channel_is_covered():
    assert {op.name for op in CASES} == CHANNEL_NAMES


@pytest.mark.parametrize("op", CASES, ids=lambda op: op.name)
def test_superoperator_matches_pennylane_kraus(op):
    got = superoperator(op, op.data, torch.complex128, "cpu")
    torch.testing.assert_close(got, _reference(op), atol=1e-12, rtol=0)


def test_broadcast_parameters():
    p = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    got = superoperator(qml.GeneralizedAmplitudeDamping(p, 0.4, wires=0), [p, torch.tensor(0.4)], torch.complex128, "cpu")
    assert got.shape == (3, 4, 4)
    for k in range(3):
        torch.testing.assert_close(got[k], _reference(qml.GeneralizedAmplitudeDamping(float(p[k]), 0.4, wires=0)))


@pytest.mark.parametrize("name", ["DepolarizingChannel", "BitFlip", "PhaseFlip", "ResetError"])
def test_derivative_at_zero_noise_is_finite(name):
    op = getattr(qml, name)(*([0.0] * getattr(qml, name).num_params), wires=0)
    p = [torch.zeros((), dtype=torch.float64, requires_grad=True) for _ in op.data]
    s = superoperator(op, p, torch.complex128, "cpu")
    grads = torch.autograd.grad(s.real.sum() + s.imag.sum(), p)
    assert all(torch.isfinite(g) for g in grads)


def test_complex_kraus_matrices_in_a_batch_of_tapes():
    """Tapes of one structure run stacked: a complex QubitChannel's matrices were stacked as real numbers, their
    imaginary parts dropped (-0.176 for 0.210; parameter-shift's gradient 0.031 for 0.108; found by a fuzzing
    helper)."""
    rng = np.random.default_rng(0)
    k = np.linalg.qr(rng.normal(size=(4, 2)) + 1j * rng.normal(size=(4, 2)))[0]
    tape = qml.tape.QuantumScript([qml.QubitChannel([k[:2], k[2:]], wires=0)], [qml.expval(qml.Z(0))])
    want = float(qml.device("default.mixed", wires=1).execute(tape))
    got = qml.device("qhybrid.tensornet", wires=1).execute([tape, tape])
    np.testing.assert_allclose([float(g) for g in got], [want, want], atol=1e-10, rtol=0)

    def circuit(x):
        qml.RX(x, 0)
        qml.QubitChannel([k[:2], k[2:]], wires=0)
        return qml.expval(qml.Z(0))

    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=1), interface="torch", diff_method="parameter-shift")
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=1), interface="torch", diff_method="backprop")
    torch.testing.assert_close(torch.autograd.grad(ours(x), x)[0], torch.autograd.grad(ref(x), x)[0], atol=1e-10, rtol=0)

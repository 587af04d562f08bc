"""PennyLane channels on qhybrid.aer (``_noise.py``): exact with the density-matrix method against default.mixed,
sampled trajectories within shot noise, a refusal for exact results on other methods, ``channel_error`` in a
user's ``NoiseModel``, and a parameter-shift gradient in a noise strength."""

import sys
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
import torch
from qiskit_aer.noise import NoiseModel

import qhybrid
from qhybrid.devices.aer import channel_error
from qhybrid.errors import UnsupportedOperationError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tensornet" / "mixed"))
from _noisy import apply_spec, random_spec  # noqa: E402

ATOL = 1e-10
SIGMAS = 4.0


def _circuit(ops):
    def circuit():
        apply_spec(ops, None)
        return qml.expval(qml.Z(0) @ qml.X(1)), qml.probs(wires=[0, 2]), qml.density_matrix([1])

    return circuit


@pytest.mark.parametrize("seed", [0, 3])
def test_density_matrix_method_matches_default_mixed(seed):
    ops = random_spec(seed, 3)
    ref = qml.QNode(_circuit(ops), qml.device("default.mixed", wires=3))()
    ours = qml.QNode(_circuit(ops), qml.device("qhybrid.aer", wires=3, method="density_matrix"))()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=ATOL, rtol=0)


def test_sampled_trajectories_within_shot_noise():
    ops = random_spec(5, 3)

    def circuit():
        apply_spec(ops, None)
        return qml.expval(qml.Z(0) @ qml.Z(2))

    exact = float(qml.QNode(circuit, qml.device("default.mixed", wires=3))())
    shots = 4000
    got = float(qml.set_shots(qml.QNode(circuit, qml.device("qhybrid.aer", wires=3, seed=7)), shots)())
    assert abs(got - exact) <= SIGMAS * np.sqrt(max(1 - exact**2, 1e-3) / shots)


def test_exact_results_on_statevector_are_refused():
    tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.DepolarizingChannel(0.1, 0)], [qml.expval(qml.X(0))])
    with pytest.raises(UnsupportedOperationError, match="density_matrix"):
        qhybrid.device("aer", wires=1).execute(tape)


def test_channel_error_in_a_users_noise_model():
    noise = NoiseModel()
    noise.add_all_qubit_quantum_error(channel_error(qml.AmplitudeDamping(0.3, wires=0)), ["rx"])
    x = np.array([0.4, 1.3])

    def bare(x):
        qml.RX(x[0], 0)
        qml.RX(x[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.expval(qml.Z(0))

    def explicit(x):
        qml.RX(x[0], 0)
        qml.AmplitudeDamping(0.3, 0)
        qml.RX(x[1], 1)
        qml.AmplitudeDamping(0.3, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.expval(qml.Z(0))

    dev = qhybrid.device("aer", wires=2, method="density_matrix", noise_model=noise)
    ours = qml.QNode(bare, dev)(x)
    ref = qml.QNode(explicit, qml.device("default.mixed", wires=2))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), atol=ATOL, rtol=0)


def test_parameter_shift_in_a_noise_strength():
    dev = qhybrid.device("aer", wires=1, method="density_matrix")

    def circuit(a, p):
        qml.RX(a, 0)
        qml.DepolarizingChannel(p, 0)
        return qml.expval(qml.Z(0))

    a = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    p = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    ours = torch.autograd.grad(qhybrid.qnode(dev, diff_method="parameter-shift")(circuit)(a, p), [a, p])
    ref = torch.autograd.grad(qml.QNode(circuit, qml.device("default.mixed", wires=1), interface="torch")(a, p), [a, p])
    for g, h in zip(ours, ref):
        torch.testing.assert_close(g, h, atol=ATOL, rtol=0)


def test_channel_error_refuses_a_broadcast_channel():
    with pytest.raises(ValueError, match="one error per batch element"):
        channel_error(np.zeros((2, 3, 2, 2)))

"""Two of PennyLane's own demos ported onto qhybrid (small sizes): values and gradients match
default.qubit to 1e-10 through plain PennyLane (``qml.device("qhybrid.tensornet")``) and ``qhybrid.qnode``.

- *variational classifier* (parity of bit strings): BasisState input, Rot layers and a CNOT ring,
  ``<Z0>`` plus a bias, square loss over a batch;
- *VQE for H2*: the 4-qubit, 15-term molecular Hamiltonian from ``qml.qchem``, a Hartree-Fock state and
  one ``DoubleExcitation``.
"""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _plain(wires, diff_method):
    return lambda f: qml.qnode(qml.device("qhybrid.tensornet", wires=wires), diff_method=diff_method, interface="torch")(f)


def _native(wires, diff_method):
    return qhybrid.qnode(qhybrid.device("tensornet", wires=wires), diff_method=diff_method)


def _reference(wires, diff_method):
    method = "backprop" if diff_method == "adjoint" else diff_method
    return lambda f: qml.qnode(qml.device("default.qubit", wires=wires), diff_method=method, interface="torch")(f)


WAYS = [(_plain, "adjoint"), (_plain, "parameter-shift"), (_native, "adjoint"), (_native, "parameter-shift")]
IDS = ["qml.qnode-adjoint", "qml.qnode-parameter-shift", "qhybrid.qnode-adjoint", "qhybrid.qnode-parameter-shift"]


# --- variational classifier (parity) ------------------------------------------------------------


def _classifier(weights, x):
    qml.BasisState(x, wires=range(4))
    for layer in weights:
        for w in range(4):
            qml.Rot(*layer[w], wires=w)
        for w in range(4):
            qml.CNOT(wires=[w, (w + 1) % 4])
    return qml.expval(qml.Z(0))


def _classifier_loss(make, diff_method):
    circuit = make(4, diff_method)(_classifier)
    rng = np.random.default_rng(7)
    X = torch.as_tensor(rng.integers(0, 2, size=(6, 4)))
    Y = torch.as_tensor(2.0 * (X.sum(1) % 2) - 1.0, dtype=torch.float64)
    weights = torch.tensor(0.01 * rng.standard_normal((2, 4, 3)), requires_grad=True)
    bias = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    preds = torch.stack([circuit(weights, x) + bias for x in X])
    loss = torch.mean((Y - preds) ** 2)
    loss.backward()
    return loss.detach(), weights.grad, bias.grad


@pytest.mark.parametrize("make, diff_method", WAYS, ids=IDS)
def test_variational_classifier_matches_default_qubit(make, diff_method):
    ours = _classifier_loss(make, diff_method)
    theirs = _classifier_loss(_reference, diff_method)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, atol=TOL, rtol=0)
    assert ours[1].abs().max() > 1e-3  # the gradient is not trivially zero


# --- VQE for H2 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h2():
    symbols, coordinates = ["H", "H"], np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    hamiltonian, n_qubits = qml.qchem.molecular_hamiltonian(symbols, coordinates)
    return hamiltonian, n_qubits, qml.qchem.hf_state(2, n_qubits)


def _vqe_energy(make, diff_method, h2):
    hamiltonian, n_qubits, hf = h2

    def circuit(theta):
        qml.BasisState(hf, wires=range(n_qubits))
        qml.DoubleExcitation(theta, wires=[0, 1, 2, 3])
        return qml.expval(hamiltonian)

    theta = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    energy = make(n_qubits, diff_method)(circuit)(theta)
    energy.backward()
    return energy.detach(), theta.grad


@pytest.mark.parametrize("make, diff_method", WAYS, ids=IDS)
def test_vqe_h2_matches_default_qubit(make, diff_method, h2):
    energy, grad = _vqe_energy(make, diff_method, h2)
    ref_energy, ref_grad = _vqe_energy(_reference, diff_method, h2)
    assert torch.allclose(energy, ref_energy, atol=TOL, rtol=0)
    assert torch.allclose(grad, ref_grad, atol=TOL, rtol=0)
    assert len(h2[0].terms()[0]) == 15 and abs(float(grad)) > 1e-3

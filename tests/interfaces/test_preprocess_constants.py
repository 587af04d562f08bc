"""Tapes with constant data (a Hamiltonian's coefficients, a BasisState) served from the preprocessing cache:
a second call validates and decomposes nothing, and a changed constant is a new structure, never a stale one."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.plugin import preprocess as device_preprocess
from qhybrid.interfaces import _preprocess


@pytest.fixture
def validations(monkeypatch):
    """Counts PennyLane-side work per call: the device's observable validation and its program runs."""
    counts = {"observable": 0, "program": 0}
    real_obs = device_preprocess._observable_analytic

    def obs_spy(*args):
        counts["observable"] += 1
        return real_obs(*args)

    monkeypatch.setattr(device_preprocess, "_observable_analytic", obs_spy)
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    return counts


def _vqe(n=4):
    H = qml.dot([0.2, -0.4, 0.1, 0.3], [qml.Identity(0), qml.Z(0) @ qml.Z(1), qml.X(0) @ qml.X(1) @ qml.Y(2) @ qml.Y(3), qml.Z(3)])
    hf = qml.qchem.hf_state(2, n)
    singles, doubles = qml.qchem.excitations(2, n)

    def circuit(p):
        qml.AllSinglesDoubles(p, wires=range(n), hf_state=hf, singles=singles, doubles=doubles)
        return qml.expval(H)

    return circuit, len(singles) + len(doubles)


def test_second_call_validates_nothing(validations):
    circuit, k = _vqe()
    dev = qhybrid.device("tensornet", wires=4)
    calls = []
    real = dev.preprocess_transforms
    dev.preprocess_transforms = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    f = qhybrid.qnode(dev)(circuit)
    p = torch.linspace(0.1, 0.5, k, dtype=torch.float64, requires_grad=True)
    f(p).backward()
    first = dict(validations)
    assert first["observable"] > 0 and calls
    n_calls = len(calls)
    for _ in range(2):
        p2 = (p.detach() * 1.5).requires_grad_()
        v = f(p2)
        v.backward()
    assert validations == first  # nothing validated again
    assert len(calls) == n_calls  # the device program never built or run again
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch")
    p3 = (p.detach() * 1.5).requires_grad_()
    r = ref(p3)
    r.backward()
    assert abs(float(v.detach() - r.detach())) < 1e-10 and torch.allclose(p2.grad, p3.grad, atol=1e-10, rtol=0)


def test_changed_constants_are_not_served_stale():
    coeffs = [0.5, -0.25]
    state = [np.array([1, 1, 0, 0])]

    def circuit(x):
        qml.BasisState(state[0], wires=range(4))
        qml.DoubleExcitation(x, wires=[0, 1, 2, 3])
        qml.SingleExcitation(x / 2, wires=[0, 2])
        return qml.expval(qml.dot(coeffs, [qml.X(0) @ qml.X(2), qml.Z(1) @ qml.Y(3) @ qml.Y(2)]))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch")
    x = torch.tensor(0.7, dtype=torch.float64)
    for new_coeffs, new_state in (([0.5, -0.25], [1, 1, 0, 0]), ([1.5, 0.75], [1, 1, 0, 0]), ([1.5, 0.75], [0, 1, 1, 0])):
        coeffs[:] = new_coeffs
        state[0] = np.array(new_state)
        assert abs(float(ours(x) - ref(x))) < 1e-12


def test_first_call_copies_and_walks_no_hamiltonian(monkeypatch):
    """The device's decomposition measures the tape's own observable (PennyLane's decompose copied every
    measurement, a molecular Hamiltonian term by term: 0.1-0.3 s of H2O's first call), and validation accepts
    it by its Pauli representation without walking its terms."""
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    copies, walked = [], []
    real_copy = qml.ops.op_math.CompositeOp.__copy__
    monkeypatch.setattr(qml.ops.op_math.CompositeOp, "__copy__", lambda self: copies.append(1) or real_copy(self))
    real_obs = device_preprocess._observable_analytic
    monkeypatch.setattr(device_preprocess, "_observable_analytic", lambda obs, e: walked.append(obs) or real_obs(obs, e))
    circuit, k = _vqe()
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(circuit)
    f(torch.linspace(0.1, 0.5, k, dtype=torch.float64, requires_grad=True)).backward()
    assert not copies
    assert walked and not any(isinstance(o, qml.ops.SProd) for o in walked)  # the Sum itself, never its terms


def test_a_cached_tape_keeps_its_own_copy_of_constant_arrays():
    """Found by a helper: the cached tape held the user's array; changed in place after a call, a later call whose
    (new) array held the old values matched the old key and ran the new values (-0.404 for -0.833)."""
    state = [np.array([0.6, 0.8])]

    def circuit(x):
        qml.StatePrep(state[0], wires=0)
        qml.RY(x[0], 0)
        return qml.expval(qml.Z(0))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=1), interface="torch")
    x = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    for change in (None, None, "in place", "new array, old values", None):
        if change == "in place":
            state[0][:] = [0.8, 0.6]
        elif change is not None:
            state[0] = np.array([0.6, 0.8])
        assert abs(float(ours(x) - ref(x))) < 1e-12


def test_an_observable_of_a_matrix_changed_in_place():
    """Found by a helper: a ``Hermitian`` built once on an array changed in place between calls kept its first key
    (computed once per observable object) while the cached tape kept its own copy of the old matrix."""
    A = np.array([[1.0, 0.5], [0.5, -1.0]])
    H = qml.Hermitian(A, wires=0)

    def circuit(x):
        qml.RY(x[0], 0)
        qml.RX(2 * x[1], 0)
        return qml.expval(H)

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=1), interface="torch")
    x = torch.tensor([0.7, 0.2], dtype=torch.float64, requires_grad=True)
    for value in (1.0, 1.0, 3.0, 4.0, 4.0, 1.0):
        A[0, 0] = value
        assert abs(float(ours(x) - ref(x))) < 1e-12

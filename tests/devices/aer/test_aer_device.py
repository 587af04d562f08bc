"""AerDevice against default.qubit and the tensornet device: every measurement kind, shots, gradients,
noise, errors, and the PennyLane plugin entry point."""

import warnings

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
import torch
from qiskit_aer.noise import NoiseModel, ReadoutError, depolarizing_error

import qhybrid
from qhybrid.devices.aer import AerDevice, GPUUnavailableError
from qhybrid.errors import GradientError, UnsupportedOperationError

ATOL = 1e-10
SIGMAS = 5.0
"""Statistical checks allow this many standard errors."""


def run(dev, tape):
    """One tape through a device with its own preprocessing (PennyLane's workflow, no gradients)."""
    return qml.execute([tape], dev, diff_method=None)[0]


def _ops(batch=False):
    x = np.array([0.3, -1.2, 2.0]) if batch else 0.3
    return [
        qml.Hadamard(0),
        qml.RX(x, 1),
        qml.CNOT([0, 2]),
        qml.Rot(0.1, -0.4, 0.7, 2),
        qml.IsingXY(0.5, [1, 2]),  # decomposed by PennyLane
        qml.CRX(-0.8, [2, 0]),
        qml.PauliRot(0.35, "XY", [0, 1]),
        qml.QubitUnitary(qml.matrix(qml.RY(0.9, 0) @ qml.RZ(-0.3, 1)), [1, 0]),
        qml.Toffoli([0, 1, 2]),
        qml.U3(0.2, 0.3, 0.4, 1),
        qml.GlobalPhase(0.25),
    ]


MEASUREMENTS = {
    "expval_pauli": lambda: qml.expval(qml.X(0) @ qml.Y(2)),
    "expval_hamiltonian": lambda: qml.expval(qml.Hamiltonian([0.5, -1.3, 0.2], [qml.Z(0), qml.X(1) @ qml.X(2), qml.Y(1)])),
    "expval_sum": lambda: qml.expval(qml.sum(qml.s_prod(0.3, qml.X(0)), qml.Z(0) @ qml.Z(1), qml.Y(2))),
    "expval_dot": lambda: qml.expval(qml.dot([0.4, 0.6], [qml.Z(2), qml.X(0) @ qml.X(1)])),
    "expval_hermitian": lambda: qml.expval(qml.Hermitian(np.array([[1.0, 0.5 - 0.2j], [0.5 + 0.2j, -0.7]]), 1)),
    "expval_hadamard": lambda: qml.expval(qml.Hadamard(2)),
    "var_pauli": lambda: qml.var(qml.Z(0) @ qml.X(1)),
    "var_hamiltonian": lambda: qml.var(qml.Hamiltonian([0.5, -1.3], [qml.Z(0), qml.X(0) @ qml.Y(1)])),
    "var_hermitian": lambda: qml.var(qml.Hermitian(np.diag([1.0, 2.0, -1.0, 0.5]), [2, 0])),
    "probs_all": lambda: qml.probs(),
    "probs_reversed": lambda: qml.probs(wires=[2, 0]),
    "probs_obs": lambda: qml.probs(op=qml.X(1)),
    "state": lambda: qml.state(),
    "density_matrix": lambda: qml.density_matrix([2, 1]),
    # state measurements Aer has no save for: computed by their own process_state from the saved state
    "vn_entropy": lambda: qml.vn_entropy(wires=[0]),
    "purity": lambda: qml.purity(wires=[1, 2]),
    "mutual_info": lambda: qml.mutual_info(wires0=[0], wires1=[2]),
}


@pytest.fixture(scope="module")
def aer():
    return AerDevice(wires=3)


@pytest.fixture(scope="module")
def tensornet():
    return qhybrid.device("tensornet", wires=3)


@pytest.mark.parametrize("batch", [False, True], ids=["single", "broadcast"])
@pytest.mark.parametrize("kind", sorted(MEASUREMENTS))
def test_analytic_matches_default_qubit_and_tensornet(kind, batch, aer, tensornet):
    tape = qml.tape.QuantumScript(_ops(batch), [MEASUREMENTS[kind]()])
    got = run(aer, tape)
    np.testing.assert_allclose(got, run(qml.device("default.qubit", wires=3), tape), atol=ATOL)
    np.testing.assert_allclose(got, run(tensornet, tape), atol=ATOL)


def test_several_measurements_in_one_tape_are_one_job():
    dev = AerDevice(wires=3)
    tape = qml.tape.QuantumScript(_ops(), [m() for m in MEASUREMENTS.values()])
    got = run(dev, tape)
    want = run(qml.device("default.qubit", wires=3), tape)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=ATOL)
    assert dev.job_count == 1


def test_results_are_float64_torch_tensors_with_torch_inputs(aer):
    x = torch.tensor(0.4, dtype=torch.float64)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0)), qml.probs(wires=[0]), qml.state()])
    ev, probs, state = aer.execute(tape)
    assert ev.dtype == probs.dtype == torch.float64 and state.dtype == torch.complex128
    assert torch.isclose(ev, torch.cos(x), atol=ATOL)


def test_wire_labels_and_circuit_wires():
    ops = [qml.RY(0.3, "b"), qml.CNOT(["b", "a"])]
    tape = qml.tape.QuantumScript(ops, [qml.probs(wires=["a", "b"]), qml.expval(qml.Z("a"))])
    want = run(qml.device("default.qubit", wires=["a", "b"]), tape)
    for dev in (AerDevice(wires=["a", "b"]), AerDevice()):
        for g, w in zip(run(dev, tape), want):
            np.testing.assert_allclose(g, w, atol=ATOL)


# --- the idle-qubit case (Qiskit/qiskit-aer#2442) ------------------------------------------------


def test_expectations_on_circuits_with_idle_qubits():
    """Qubits 1, 2, 6, 7 are idle; Z on qubit 11 is exactly +1. A subsystem save_expectation_value
    in Aer 0.18 returns ~0 here; the device's full-width Paulis must not."""
    ops = [qml.Hadamard(0)] + [qml.CNOT([0, t]) for t in (3, 5, 4, 8, 9, 10)] + [qml.CNOT([5, 11]), qml.CNOT([10, 11])]
    mps = [qml.expval(qml.Z(11)), qml.expval(qml.Z(11) @ qml.Z(0) + 0.5 * qml.X(1)), qml.var(qml.Z(11)),
           qml.probs(wires=[11, 2]), qml.expval(qml.Hermitian(np.diag([1.0, 3.0]), 11))]
    tape = qml.tape.QuantumScript(ops, mps)
    got = run(AerDevice(wires=12), tape)
    assert got[0] == pytest.approx(1.0, abs=ATOL)
    for g, w in zip(got, run(qml.device("default.qubit", wires=12), tape)):
        np.testing.assert_allclose(g, w, atol=ATOL)


# --- density matrices and noise ----------------------------------------------------------------


def test_density_matrix_method_matches_default_mixed():
    tape = qml.tape.QuantumScript(_ops()[:6], [qml.expval(qml.X(0) @ qml.Z(2)), qml.probs(wires=[1]), qml.state()])
    got = run(AerDevice(wires=3, method="density_matrix"), tape)
    for g, w in zip(got, run(qml.device("default.mixed", wires=3), tape)):
        np.testing.assert_allclose(g, w, atol=ATOL)
    assert got[2].shape == (8, 8)  # qml.state() on a mixed-state simulator is the density matrix


def _noise(p=0.1):
    nm = NoiseModel()
    nm.add_all_qubit_quantum_error(depolarizing_error(p, 1), ["rx", "ry"])
    return nm


def test_noisy_density_matrix_matches_default_mixed_channels():
    p = 0.1
    dev = AerDevice(wires=2, method="density_matrix", noise_model=_noise(p))
    ops = [qml.RX(0.4, 0), qml.RY(0.3, 1), qml.CNOT([0, 1])]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Z(1)), qml.expval(qml.Y(0))])
    # Qiskit's depolarizing_error(p) is PennyLane's DepolarizingChannel(3p/4)
    noisy = [ops[0], qml.DepolarizingChannel(0.75 * p, 0), ops[1], qml.DepolarizingChannel(0.75 * p, 1), ops[2]]
    want = run(qml.device("default.mixed", wires=2), qml.tape.QuantumScript(noisy, tape.measurements))
    np.testing.assert_allclose(run(dev, tape), want, atol=ATOL)


def test_noise_model_basis_is_respected_by_transpiling():
    nm = NoiseModel(basis_gates=["rz", "sx", "cx", "x"])
    nm.add_all_qubit_quantum_error(depolarizing_error(0.2, 2), ["cx"])
    dev = AerDevice(wires=2, method="density_matrix", noise_model=nm)
    tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.CZ([0, 1])], [qml.expval(qml.X(0))])
    assert run(dev, tape) == pytest.approx(0.8, abs=ATOL)  # the CZ became a noisy CX


def test_noisy_shots_with_readout_error_use_aer_sampling():
    nm = NoiseModel()
    nm.add_all_qubit_readout_error(ReadoutError([[0.8, 0.2], [0.2, 0.8]]))
    shots = 4000
    dev = AerDevice(wires=1, shots=shots, seed=3, noise_model=nm)
    got = run(dev, qml.tape.QuantumScript([], [qml.expval(qml.Z(0))], shots=shots))
    assert abs(got - 0.6) < SIGMAS * np.sqrt((1 - 0.6**2) / shots)


def test_noise_option_errors():
    with pytest.raises(ValueError, match="density_matrix"):
        AerDevice(wires=1, noise_model=_noise())
    with pytest.raises(TypeError, match="NoiseModel"):
        AerDevice(wires=1, noise_model="depolarizing")
    assert AerDevice(wires=1, method="automatic", noise_model=_noise()).method == "density_matrix"
    assert AerDevice(wires=1, method="automatic").method == "statevector"


# --- shots ------------------------------------------------------------------------------------

SHOTS = 4000


def _shot_tape(shots=SHOTS):
    ops = [qml.RY(0.7, 0), qml.CNOT([0, 1]), qml.RX(1.1, 2), qml.Hadamard(1)]
    mps = [qml.expval(qml.Z(0)), qml.expval(qml.X(1) @ qml.Z(2)), qml.var(qml.Z(2)), qml.probs(wires=[2, 0])]
    return qml.tape.QuantumScript(ops, mps, shots=shots)


@pytest.mark.parametrize("sampling", ["auto", "aer"])
def test_shot_estimates_within_statistical_error(sampling):
    tape = _shot_tape()
    got = run(AerDevice(wires=3, seed=11, shot_sampling=sampling), tape)
    exact = run(qml.device("default.qubit", wires=3), tape.copy(shots=None))
    for k in (0, 1):  # +-1 valued: standard error sqrt((1 - mu^2) / N)
        assert abs(got[k] - exact[k]) <= SIGMAS * np.sqrt((1 - exact[k] ** 2) / SHOTS) + 1e-12
    mu = np.cos(1.1)  # <Z2>, so Var = 1 - mu^2 moves by at most 2 |d mu|
    assert abs(got[2] - exact[2]) <= 2 * SIGMAS * np.sqrt((1 - mu**2) / SHOTS) + 1e-12
    assert np.all(np.abs(got[3] - exact[3]) <= SIGMAS * np.sqrt(exact[3] * (1 - exact[3]) / SHOTS) + 1e-12)


def test_shots_are_reproducible_with_a_seed():
    a = run(AerDevice(wires=3, seed=5), _shot_tape())
    b = run(AerDevice(wires=3, seed=5), _shot_tape())
    c = run(AerDevice(wires=3, seed=6), _shot_tape())
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))


def test_hamiltonian_with_shots_is_split_and_within_error():
    coeffs, terms = [0.5, -1.3, 0.8], [qml.Z(0), qml.X(0) @ qml.X(1), qml.Z(0) @ qml.Z(1)]
    ops = [qml.RY(0.7, 0), qml.CNOT([0, 1]), qml.RX(0.3, 1)]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Hamiltonian(coeffs, terms))], shots=SHOTS)
    exact_terms = run(qml.device("default.qubit"), qml.tape.QuantumScript(ops, [qml.expval(t) for t in terms]))
    sigma = sum(abs(c) * np.sqrt((1 - e**2) / SHOTS) for c, e in zip(coeffs, exact_terms))
    got = run(AerDevice(wires=2, seed=2), tape)
    assert abs(got - np.dot(coeffs, exact_terms)) <= SIGMAS * sigma


def test_projectors_with_equal_matrices_but_different_bases_on_one_device():
    # BasisStateProjector([0, 1]) and StateVectorProjector([0, 1, 0, 0]) share a matrix but not their
    # diagonalizing gates; a sampling plan cached for one must not be read with the other's eigenvalues
    ops = [qml.RY(0.732, 0), qml.RY(0.523, 1), qml.CNOT([0, 1])]
    dev = AerDevice(wires=2, seed=1)
    for state in ([0, 0], [1, 0, 0, 0], [0, 1], [0, 1, 0, 0], [0, 0, 0, 1], [1, 1]):
        tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Projector(state, [0, 1]))], shots=SHOTS)
        exact = run(qml.device("default.qubit"), tape.copy(shots=None))
        got = run(dev, tape)
        assert abs(got - exact) <= SIGMAS * np.sqrt(exact * (1 - exact) / SHOTS) + 1e-12, state


class _OnesFraction(qml.measurements.SampleMeasurement):
    """A user-defined sampled measurement: the fraction of shots reading 1 on its wires."""

    def process_samples(self, samples, wire_order, shot_range=None, bin_size=None):
        return np.mean(samples[:, [wire_order.index(w) for w in self.wires]])

    def process_counts(self, counts, wire_order):
        raise AssertionError("the device hands samples, not counts")


class _Amplitude(qml.measurements.StateMeasurement):
    """A user-defined state measurement: |<11|psi>|^2, or <11|rho|11>."""

    def process_state(self, state, wire_order):
        return np.abs(np.reshape(state, -1)[3]) ** 2

    def process_density_matrix(self, density_matrix, wire_order):
        return np.real(density_matrix[3, 3])


@pytest.mark.parametrize("method", ["statevector", "density_matrix"])
def test_custom_measurements_are_processed_from_samples_and_states(method):
    ops = [qml.RY(0.9, 0), qml.CNOT([0, 1]), qml.RX(np.array([0.3, 1.4]), 1)]
    exact = run(qml.device("default.qubit", wires=2), qml.tape.QuantumScript(ops, [qml.probs(wires=[0, 1])]))
    amp = run(AerDevice(wires=2, method=method), qml.tape.QuantumScript(ops, [_Amplitude(wires=[0, 1])]))
    np.testing.assert_allclose(amp, exact[:, 3], atol=ATOL)
    tape = qml.tape.QuantumScript(ops, [_OnesFraction(wires=[1]), qml.expval(qml.Z(1))], shots=SHOTS)
    ones, z = run(AerDevice(wires=2, method=method, seed=9), tape)
    p1 = exact[:, 1] + exact[:, 3]
    assert np.all(np.abs(ones - p1) <= SIGMAS * np.sqrt(p1 * (1 - p1) / SHOTS))
    np.testing.assert_allclose(z, 1 - 2 * ones, atol=1e-12)  # both read from the same shots


class _EigenProbs(qml.measurements.StateMeasurement):
    """A user-defined state measurement on an observable: reads the state rotated into its eigenbasis."""

    def process_state(self, state, wire_order):
        p = np.abs(np.reshape(state, (2,) * len(wire_order))) ** 2
        drop = tuple(i for i, w in enumerate(wire_order) if w not in self.wires)
        return np.sum(p, axis=drop).reshape(-1)

    def process_density_matrix(self, density_matrix, wire_order):
        n = len(wire_order)
        p = np.real(np.diagonal(density_matrix)).reshape((2,) * n)
        drop = tuple(i for i, w in enumerate(wire_order) if w not in self.wires)
        return np.sum(p, axis=drop).reshape(-1)

    def shape(self, shots=None, num_device_wires=0):
        return (2 ** len(self.wires),)


@pytest.mark.parametrize("method", ["statevector", "density_matrix"])
def test_custom_state_measurement_on_an_observable_reads_its_eigenbasis(method):
    def f():
        qml.RY(0.9, "q")
        qml.RX(0.3, "r")
        return _EigenProbs(obs=qml.X("q")), qml.probs(op=qml.X("q"))

    mine, probs = qml.QNode(f, qml.device("qhybrid.aer", wires=["r", "q"], method=method))()
    np.testing.assert_allclose(mine, probs, atol=ATOL)
    np.testing.assert_allclose(mine, [np.cos(0.45 - np.pi / 4) ** 2, np.sin(0.45 - np.pi / 4) ** 2], atol=ATOL)


@pytest.mark.parametrize("wires", [[2, 1, 0], ["a", "b", "c"], None])
def test_entropies_and_custom_measurements_with_any_wire_labels(wires):
    labels = wires or [1, 2, 0]

    def f():
        qml.RY(1.2, labels[1])
        qml.CNOT([labels[1], labels[2]])
        qml.RX(0.4, labels[0])
        return (
            qml.vn_entropy(wires=[labels[0]]),
            qml.vn_entropy(wires=[labels[1]]),
            qml.mutual_info(wires0=[labels[1]], wires1=[labels[2]]),
        )

    ref = qml.QNode(f, qml.device("default.qubit", wires=wires))()
    got = qml.QNode(f, qml.device("qhybrid.aer", wires=wires))()
    np.testing.assert_allclose(np.array(got, dtype=float), np.array(ref, dtype=float), atol=ATOL)

    def sampled():
        qml.RY(1.2, labels[1])
        qml.CNOT([labels[1], labels[2]])
        return _OnesFraction(wires=[labels[2]]), qml.expval(qml.Z(labels[2]))

    ones, z = qml.QNode(sampled, qml.device("qhybrid.aer", wires=wires, seed=3), shots=SHOTS)()
    assert ones == pytest.approx((1 - z) / 2, abs=1e-12)
    p1 = np.sin(0.6) ** 2
    assert abs(ones - p1) <= SIGMAS * np.sqrt(p1 * (1 - p1) / SHOTS)


def test_tracker_counts_batches_executions_and_shots():
    dev = qml.device("qhybrid.aer", wires=1)
    circuit = qml.QNode(lambda: qml.expval(qml.X(0)), dev, diff_method="parameter-shift")
    with qml.Tracker(dev) as tracker:
        circuit()
        qml.set_shots(circuit, 100)()
    assert tracker.history["batches"] == [1, 1] and tracker.history["executions"] == [1, 1]
    assert tracker.totals["shots"] == 100


def test_sample_and_counts_have_pennylane_structure():
    shots = 50
    ops = [qml.Hadamard(0), qml.CNOT([0, 1])]
    tape = qml.tape.QuantumScript(ops, [qml.sample(wires=[0, 1]), qml.counts(wires=[1]), qml.sample(qml.Z(0))], shots=shots)
    bits, counts, signs = run(AerDevice(wires=2, seed=0), tape)
    assert bits.shape == (shots, 2) and set(np.unique(bits)) <= {0, 1}
    np.testing.assert_array_equal(bits[:, 0], bits[:, 1])  # Bell state
    assert sum(counts.values()) == shots and set(counts) <= {"0", "1"}
    np.testing.assert_array_equal(signs, 1 - 2 * bits[:, 0])
    broadcast = qml.tape.QuantumScript([qml.RX(np.array([0.0, np.pi]), 0)], [qml.sample(wires=[0]), qml.counts(wires=[0])], shots=shots)
    s, c = run(AerDevice(wires=1, seed=0), broadcast)
    assert s.shape == (2, shots, 1) and np.all(s[0] == 0) and np.all(s[1] == 1)
    assert [dict(x) for x in c] == [{"0": shots}, {"1": shots}]


def test_shot_vectors_return_a_tuple_over_settings():
    dev = AerDevice(wires=1, shots=[100, 1000], seed=4)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    x = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    out = f(x)
    assert isinstance(out, tuple) and len(out) == 2
    for value, n in zip(out, (100, 1000)):
        assert abs(value.item() - np.cos(0.8)) <= SIGMAS * np.sqrt((1 - np.cos(0.8) ** 2) / n)
    (out[0] + out[1]).backward()
    assert x.grad is not None

    pl = qml.set_shots(qml.QNode(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1], dev), [10, 20, 30])
    assert len(pl(0.3)) == 3


def test_measurements_that_need_the_other_mode_raise():
    with pytest.raises(qml.exceptions.DeviceError, match="state.* not accepted with finite shots"):
        run(AerDevice(wires=1, shots=10), qml.tape.QuantumScript([], [qml.state()], shots=10))
    with pytest.raises(qml.exceptions.DeviceError, match="sample.* not accepted for analytic simulation"):
        run(AerDevice(wires=1), qml.tape.QuantumScript([], [qml.sample(wires=[0])]))


# --- gradients --------------------------------------------------------------------------------


def _classifier(x, w):
    qml.AngleEmbedding(x, wires=[0, 1], rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=[0, 1])
    return qml.expval(qml.Z(0)), qml.expval(qml.X(1) @ qml.Y(0))


def _reference_grad(x, w):
    w = w.detach().clone().requires_grad_(True)
    a, b = qml.QNode(_classifier, qml.device("default.qubit"), diff_method="backprop", interface="torch")(x, w)
    (a.sum() + 2 * b.sum()).backward()
    return (a, b), w.grad


def test_parameter_shift_on_aer_matches_backprop():
    x = torch.tensor([[0.1, 0.4], [1.0, -0.3], [2.2, 0.8]], dtype=torch.float64)
    w = torch.tensor(np.random.default_rng(0).uniform(-1, 1, (2, 2, 3)), requires_grad=True)
    dev = AerDevice(wires=2)
    a, b = qhybrid.qnode(dev, diff_method="parameter-shift")(_classifier)(x, w)
    (a.sum() + 2 * b.sum()).backward()
    (ra, rb), grad = _reference_grad(x, w)
    torch.testing.assert_close(a, ra.detach(), atol=ATOL, rtol=0)
    torch.testing.assert_close(b, rb.detach(), atol=ATOL, rtol=0)
    torch.testing.assert_close(w.grad, grad, atol=ATOL, rtol=0)
    assert dev.job_count == 2  # forward, then every shifted copy of the whole batch


def test_parameter_shift_with_shots_within_statistical_error():
    shots = 20000
    x = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    dev = AerDevice(wires=1, shots=shots, seed=8)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    f(x).backward()
    # d<Z>/dx = (f(x + pi/2) - f(x - pi/2)) / 2, each term with standard error <= 1/sqrt(N)
    assert abs(x.grad.item() + np.sin(0.6)) <= SIGMAS * np.sqrt(2) / 2 / np.sqrt(shots)


def test_forward_on_tensornet_gradient_on_aer_with_shots():
    shots = 20000
    x = torch.tensor([[0.1, 0.4], [1.0, -0.3]], dtype=torch.float64)
    w = torch.tensor(np.random.default_rng(1).uniform(-1, 1, (1, 2, 3)), requires_grad=True)
    aer = AerDevice(wires=2, shots=shots, seed=9)
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift", gradient_device=aer)(_classifier)
    a, b = f(x, w)
    (a.sum() + 2 * b.sum()).backward()
    (ra, rb), grad = _reference_grad(x, w)
    torch.testing.assert_close(a, ra.detach(), atol=ATOL, rtol=0)  # exact forward
    # each gradient entry: 2 shifts x 2 samples x (1 + 2) weights of +-1 estimates, coefficient 1/2
    sigma = 0.5 * np.sqrt(2 * 2 * (1 + 4) / shots)
    assert torch.all((w.grad - grad).abs() <= SIGMAS * sigma)
    # tapes preprocessed for tensornet (Rot, ...) reach Aer unexpanded; Z(0) and X(1) Y(0) do not commute
    # qubit-wise, so the shifted runs are two structures: one job each
    assert aer.job_count == 2


def test_forward_on_aer_with_shots_gradient_on_tensornet():
    shots = 4000
    x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    aer = AerDevice(wires=1, shots=shots, seed=0)
    tensornet = qhybrid.device("tensornet", wires=1)
    f = qhybrid.qnode(aer, diff_method="parameter-shift", gradient_device=tensornet)(
        lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1]
    )
    y = f(x)
    y.backward()
    assert aer.job_count == 1  # the shifted runs went to tensornet
    assert abs(y.item() - np.cos(0.5)) <= SIGMAS * np.sqrt((1 - np.cos(0.5) ** 2) / shots)
    # exact, or sampled with the forward tapes' shots (qhybrid.execute gives tapes the forward device's shots)
    assert abs(x.grad.item() + np.sin(0.5)) <= SIGMAS * np.sqrt(2) / 2 / np.sqrt(shots)


def test_adjoint_on_aer_is_a_clear_error():
    f = qhybrid.qnode(AerDevice(wires=1), diff_method="adjoint")(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])
    with pytest.raises(GradientError, match="parameter-shift"):
        f(torch.tensor(0.1, requires_grad=True))


def test_pennylane_qnode_with_the_plugin():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PennyLane deprecation warning for device shots
        dev = qml.device("qhybrid.aer", wires=2, shots=1000, seed=1)
    assert dev.name == "qhybrid.aer" and isinstance(dev, AerDevice)
    exact = qml.device("qhybrid.aer", wires=2)

    @qml.qnode(exact, diff_method="parameter-shift", interface="torch")
    def f(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    f(x).backward()
    assert x.grad.item() == pytest.approx(-np.sin(0.4), abs=ATOL)
    assert qhybrid.device("aer", wires=1).name == "qhybrid.aer"


# --- errors -----------------------------------------------------------------------------------


class _Opaque(qml.operation.Operation):
    num_wires = 1
    num_params = 0


def test_unsupported_operation_names_itself():
    with pytest.raises(UnsupportedOperationError, match="_Opaque"):
        run(AerDevice(wires=1), qml.tape.QuantumScript([_Opaque(0)], [qml.expval(qml.Z(0))]))


def test_option_errors():
    with pytest.raises(ValueError, match="method 'stabilizer'"):
        AerDevice(wires=1, method="stabilizer")
    with pytest.raises(ValueError, match="'CPU' or 'GPU'"):
        AerDevice(wires=1, device="TPU")
    with pytest.raises(ValueError, match="shot_sampling"):
        AerDevice(wires=1, shot_sampling="fast")


def test_gpu_without_a_gpu_is_a_clear_error(monkeypatch):
    from qhybrid.devices.aer import _gpu

    monkeypatch.setattr(_gpu, "cuda_gpu_present", lambda: False)
    with pytest.raises(GPUUnavailableError, match="CUDA GPU"):
        AerDevice(wires=1, device="GPU")


@pytest.mark.gpu
def test_gpu_matches_cpu():
    tape = qml.tape.QuantumScript(_ops(batch=True), [qml.expval(qml.X(0) @ qml.Y(2)), qml.probs(wires=[1, 2])])
    gpu = AerDevice(wires=3, device="GPU")
    for g, c in zip(run(gpu, tape), run(AerDevice(wires=3), tape)):
        np.testing.assert_allclose(g, c, atol=ATOL)
    assert gpu.job_count == 1

"""Sequential sampling from the MPS: bit frequencies match the exact probabilities (chi-square), and
sample / counts / finite-shot expval come out in PennyLane's shapes."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mps.circuit import build_mps
from qhybrid.devices.tensornet.engines.mps.sample import sample_bits
from qhybrid.devices.tensornet.engines.mps.state import to_state_vector

N = 5
SHOTS = 20000
CHI2_999 = {31: 61.1}  # 0.999 quantile of chi-square with 31 degrees of freedom (2**5 - 1)


def _ops(w):
    return qml.StronglyEntanglingLayers(w, wires=range(N)).decomposition()


def test_bitstring_frequencies_match_the_exact_distribution():
    w = torch.rand(2, N, 3, dtype=torch.float64)
    tape = qml.tape.QuantumScript(_ops(w), [])
    params = [p for op in tape.operations for p in op.data]
    site_of = {i: i for i in range(N)}
    mps, _, _ = build_mps(tape, params, site_of, N, 1, torch.complex128, "cpu", None, 0.0)  # both in chain order
    probs = (to_state_vector(mps).abs() ** 2)[0].numpy()
    bits = sample_bits(mps, SHOTS, np.random.default_rng(7))[0]
    index = (bits.astype(int) * (1 << np.arange(N - 1, -1, -1))).sum(-1)
    observed = np.bincount(index, minlength=1 << N)
    expected = probs * SHOTS
    keep = expected > 5
    chi2 = (((observed - expected) ** 2)[keep] / expected[keep]).sum()
    assert chi2 < CHI2_999[31]


def test_sample_counts_and_shot_expval_on_the_device():
    dev = qhybrid.device("tensornet", wires=3, method="mps", seed=11)

    @qml.set_shots(4000)
    @qml.qnode(dev)
    def circuit(x):
        qml.RY(x, wires=0)
        qml.CNOT([0, 2])
        return qml.sample(wires=[0, 2]), qml.counts(wires=[2]), qml.expval(qml.PauliX(1) @ qml.PauliZ(2))

    samples, counts, ev = circuit(1.1)
    assert samples.shape == (4000, 2) and (samples[:, 0] == samples[:, 1]).all()  # Bell-correlated
    p1 = np.sin(0.55) ** 2
    assert counts["1"] / 4000 == pytest.approx(p1, abs=4 * np.sqrt(p1 * (1 - p1) / 4000))
    assert abs(ev) < 4 / np.sqrt(4000)  # <X1> = 0 whatever wire 2 is


def test_shot_vectors_and_batches():
    dev = qhybrid.device("tensornet", wires=2, method="mps", seed=3)

    @qml.set_shots([100, 200])
    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    out = circuit(np.array([0.0, np.pi]))
    assert len(out) == 2 and np.allclose(out[0], [1.0, -1.0]) and np.allclose(out[1], [1.0, -1.0])


def test_samples_are_int64_as_default_qubits():
    """The MPS drew bitstrings as uint8, so ``sample - 1`` wrapped to 255 (found by a fuzzing helper); the state
    vector's samples and default.qubit's are int64."""

    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.sample(), qml.sample(wires=[1]), qml.sample(qml.Z(0))

    x = torch.tensor(0.7)
    mps = qhybrid.qnode(qhybrid.device("tensornet", wires=2, shots=10, seed=1, method="mps"))(circuit)(x)
    ref = qml.set_shots(qml.QNode(circuit, qml.device("default.qubit", wires=2, seed=1), interface="torch"), shots=10)(x)
    assert [r.dtype for r in mps] == [r.dtype for r in ref] == [torch.int64, torch.int64, torch.float64]
    assert set((mps[0] - 1).unique().tolist()) <= {-1, 0}

"""Grouping by structure: one Aer job per circuit structure, whatever the number of parameter sets."""

import numpy as np
import pennylane as qml
import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below
import torch

import qhybrid
from qhybrid._variant import Variant
from qhybrid.devices.aer import AerDevice
from qhybrid.errors import UnsupportedOperationError
from qhybrid.gradients import Launcher, ParameterShift

ATOL = 1e-10


def _tape(x, w, measurements=None):
    ops = [qml.RY(x, 0), qml.RY(x, 1), qml.CNOT([0, 1]), qml.RX(w[0], 0), qml.Rot(w[1], w[2], w[3], 1)]
    return qml.tape.QuantumScript(ops, measurements or [qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.Y(1))])


def test_broadcast_and_all_parameter_shift_variants_are_one_job_each():
    dev = AerDevice(wires=2)
    x = torch.linspace(0.0, 2.0, 8, dtype=torch.float64)
    w = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64, requires_grad=True)
    (tape,), _ = dev.preprocess_transforms()((_tape(x, w),))
    variants = [Variant.of(tape)]
    trainable = [[j for j, p in enumerate(variants[0].params) if isinstance(p, torch.Tensor) and p.requires_grad]]
    ps = ParameterShift(Launcher(dev))
    shifted, _ = ps._shifted(variants, trainable)
    assert len(shifted) == 8 and tape.batch_size == 8  # 4 parameters x 2 shifts, each a batch of 8
    ps.forward(variants, trainable)
    assert dev.job_count == 1
    dy = [[torch.ones(8, dtype=torch.float64), torch.ones(8, dtype=torch.float64)]]
    (grads,) = ps.compute_vjp(variants, trainable, dy)
    assert dev.job_count == 2  # 64 parameter sets of the shifted runs in one job
    w_ref = w.detach().clone().requires_grad_(True)

    def circuit(x, w):
        with qml.QueuingManager.stop_recording():
            ops = _tape(x, w).operations
        for op in ops:
            qml.apply(op)
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.Y(1))

    a, b = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(x, w_ref)
    (a.sum() + b.sum()).backward()
    torch.testing.assert_close(torch.stack(list(grads)), w_ref.grad, atol=ATOL, rtol=0)


def test_structures_are_cached_and_values_never_change_the_circuit():
    dev = AerDevice(wires=2)
    for k in range(3):
        dev.execute(_tape(0.1 * k, [0.2, 0.3, 0.4, 0.5 + k]))
    info = dev.circuit_cache_info()
    assert (info.misses, info.hits, info.size) == (1, 2, 1)
    dev.execute(_tape(0.1, [0.2, 0.3, 0.4, 0.5], [qml.probs(wires=[1])]))
    assert dev.circuit_cache_info().misses == 2  # another measurement is another structure
    assert dev.job_count == 4


def test_one_job_per_structure_in_a_mixed_batch():
    dev = AerDevice(wires=2)
    a = [_tape(0.1 * k, [0.2, 0.3, 0.4, 0.5]) for k in range(5)]
    b = [_tape(0.1 * k, [0.2, 0.3, 0.4, 0.5], [qml.probs()]) for k in range(4)]
    results = Launcher(dev).run([Variant.of(t) for t in a + b])
    assert dev.job_count == 2 and len(results) == 9
    want = qml.execute(b[3:], qml.device("default.qubit", wires=2))[0]
    np.testing.assert_allclose(results[-1][0].numpy(), want, atol=ATOL)


def test_shot_groups_are_one_job_per_structure_and_shot_count():
    dev = AerDevice(wires=2, shots=100, seed=0)
    tapes = [_tape(0.1 * k, [0.2, 0.3, 0.4, 0.5], [qml.expval(qml.Z(0))]) for k in range(3)]
    tapes += [t.copy(shots=200) for t in tapes]
    Launcher(dev).run([Variant.of(t) for t in tapes])
    assert dev.job_count == 2


def test_broadcast_matrix_operators_are_several_circuits_in_one_job():
    u = np.stack([qml.matrix(qml.RY(a, 0) @ qml.RX(2 * a, 1)) for a in (0.1, 0.7, 1.3)])
    tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.QubitUnitary(u, [0, 1])], [qml.expval(qml.Z(0)), qml.probs()])
    dev = AerDevice(wires=2)
    got = dev.execute(tape)
    for g, w in zip(got, qml.execute([tape], qml.device("default.qubit", wires=2))[0]):
        np.testing.assert_allclose(g, w, atol=ATOL)
    assert dev.job_count == 1


def test_tapes_not_preprocessed_for_aer_are_expanded():
    dev = AerDevice(wires=2)
    ops = [qml.StatePrep(np.array([0.6, 0, 0, 0.8]), [0, 1]), qml.IsingXY(0.4, [0, 1]), qml.CH([0, 1])]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.X(0) + qml.Z(1))])
    (res,) = dev.simulate_variants([Variant.of(tape)])
    want = qml.execute([tape], qml.device("default.qubit", wires=2))[0]
    assert res[0].item() == pytest.approx(want, abs=ATOL)


def test_shot_vectors_need_the_preprocessing():
    dev = AerDevice(wires=1, shots=[10, 20])
    with pytest.raises(UnsupportedOperationError, match="Shot vector"):
        dev.simulate_variants([Variant.of(qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))]))])


def test_non_commuting_measurements_with_shots_are_split_when_reaching_aer_directly():
    dev = AerDevice(wires=1, shots=2000, seed=1)
    tape = qml.tape.QuantumScript([qml.RY(0.4, 0)], [qml.expval(qml.Z(0)), qml.expval(qml.X(0))])
    z, x = dev.simulate_variants([Variant.of(tape)])[0]
    sigma = 1 / np.sqrt(2000)
    assert abs(z.item() - np.cos(0.4)) < 5 * sigma and abs(x.item() - np.sin(0.4)) < 5 * sigma


def test_qhybrid_execute_runs_every_tape_of_a_structure_in_one_job():
    dev = qhybrid.device("aer", wires=2)
    tapes = [_tape(torch.tensor(0.1 * k), torch.tensor([0.2, 0.3, 0.4, 0.5])) for k in range(6)]
    results = qhybrid.execute(tapes, dev, diff_method=None)
    assert len(results) == 6 and dev.job_count == 1


def test_observable_parameters_come_from_the_variant():
    dev = AerDevice(wires=1)
    tape = qml.tape.QuantumScript([qml.RY(0.3, 0)], [qml.expval(qml.Hamiltonian([1.0, 0.0], [qml.Z(0), qml.X(0)]))])
    params = [0.3, 0.5, 2.0]  # RY angle, then the Hamiltonian's coefficients
    ((res,),) = dev.simulate_variants([Variant(tape, params)])
    assert res.item() == pytest.approx(0.5 * np.cos(0.3) + 2.0 * np.sin(0.3), abs=ATOL)

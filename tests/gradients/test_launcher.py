"""Launcher and MultiDeviceLauncher: one call per batch, order kept, structures kept together, threads."""

import threading

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid._variant import Variant
from qhybrid.gradients import Launcher, MultiDeviceLauncher
from qhybrid.gradients.launcher import structure_key


def _aer(**kwargs):
    """An AerDevice, or the test skipped where the aer extra (qiskit) is not installed (GPU machines)."""
    pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")
    from qhybrid.devices.aer import AerDevice

    return AerDevice(**kwargs)

ATOL = 1e-10


def _variants(n, measurement=lambda: qml.expval(qml.Z(0))):
    tape = qml.tape.QuantumScript([qml.RX(0.0, 0), qml.RY(0.2, 0)], [measurement()])
    return [Variant(tape, [torch.tensor(0.1 * k, dtype=torch.float64), torch.tensor(0.2, dtype=torch.float64)]) for k in range(n)]


def _expected(v):
    return np.cos(v.params[0].item()) * np.cos(0.2)


@pytest.mark.parametrize("device", ["tensornet", "aer", "default.qubit"])
def test_launcher_runs_a_batch_in_one_call(device):
    dev = qml.device("default.qubit", wires=1) if device == "default.qubit" else qhybrid.device(device, wires=1)
    launcher = Launcher(dev)
    variants = _variants(5)
    results = launcher.run(variants)
    assert launcher.calls == 1 and launcher.run([]) == [] and launcher.calls == 1
    for v, (r,) in zip(variants, results):
        assert r.item() == pytest.approx(_expected(v), abs=ATOL)


def test_multi_device_results_in_order_across_mixed_devices():
    devices = [qhybrid.device("tensornet", wires=1), _aer(wires=1), qml.device("default.qubit", wires=1)]
    launcher = MultiDeviceLauncher(devices)
    variants = _variants(7) + _variants(4, lambda: qml.expval(qml.X(0))) + _variants(3, lambda: qml.probs(wires=[0]))
    results = launcher.run(variants)
    assert launcher.calls == 1 and [l.calls for l in launcher.launchers] == [1, 1, 1]
    for v, (r,) in zip(variants[:7], results[:7]):
        assert r.item() == pytest.approx(_expected(v), abs=ATOL)
    for v, (r,) in zip(variants[11:], results[11:]):
        c = np.cos(v.params[0].item()) * np.cos(0.2)  # <Z>
        np.testing.assert_allclose(r.numpy(), [(1 + c) / 2, (1 - c) / 2], atol=ATOL)


def test_structures_stay_together_unless_one_is_too_big():
    devices = [_aer(wires=1) for _ in range(3)]
    launcher = MultiDeviceLauncher(devices)
    kinds = [lambda: qml.expval(qml.Z(0)), lambda: qml.expval(qml.X(0)), lambda: qml.probs(wires=[0])]
    variants = [v for k in kinds for v in _variants(4, k)]
    shares = launcher.assign(variants)
    assert sorted(sorted(s) for s in shares) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    launcher.run(variants)
    assert [d.job_count for d in devices] == [1, 1, 1]  # one structure, one job, on each device

    one_structure = _variants(10)
    shares = MultiDeviceLauncher(devices[:2]).assign(one_structure)
    assert shares == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # contiguous halves
    assert MultiDeviceLauncher(devices[:2], weights=[3, 1]).assign(_variants(8)) == [[0, 1, 2, 3, 4, 5], [6, 7]]


class _RecordingDevice:
    """Runs variants like tensornet, recording its thread; both shares must be inside at once."""

    def __init__(self, barrier):
        self.inner = qhybrid.device("tensornet", wires=1)
        self.barrier = barrier
        self.threads = []

    def simulate_variants(self, variants):
        self.threads.append(threading.get_ident())
        self.barrier.wait()  # returns only when every device is running its share at the same time
        return self.inner.simulate_variants(variants)


def test_shares_run_concurrently_in_threads():
    barrier = threading.Barrier(2, timeout=30)
    devices = [_RecordingDevice(barrier), _RecordingDevice(barrier)]
    results = MultiDeviceLauncher(devices).run(_variants(6))
    assert len(results) == 6 and devices[0].threads[0] != devices[1].threads[0]


def test_errors_propagate_and_bad_configurations_are_clear():
    class Broken:
        def simulate_variants(self, variants):
            raise RuntimeError("device fell over")

    with pytest.raises(RuntimeError, match="fell over"):
        MultiDeviceLauncher([qhybrid.device("tensornet", wires=1), Broken()]).run(_variants(4))
    dev = _aer(wires=1)
    with pytest.raises(ValueError, match="listed more than once"):
        MultiDeviceLauncher([dev, dev])
    with pytest.raises(ValueError, match="at least one"):
        MultiDeviceLauncher([])
    with pytest.raises(ValueError, match="positive"):
        MultiDeviceLauncher([dev], weights=[0])


def test_multi_device_launcher_as_gradient_device_of_a_qnode():
    devices = [_aer(wires=2), _aer(wires=2)]
    multi = MultiDeviceLauncher(devices)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=[0, 1], rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=[0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    x = torch.tensor([[0.1, 0.4], [1.0, -0.3], [0.5, 0.5]], dtype=torch.float64)
    w = torch.tensor(np.random.default_rng(2).uniform(-1, 1, (2, 2, 3)), requires_grad=True)
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift", gradient_device=multi)(circuit)
    f(x, w).sum().backward()
    w_ref = w.detach().clone().requires_grad_(True)
    qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(x, w_ref).sum().backward()
    torch.testing.assert_close(w.grad, w_ref.grad, atol=ATOL, rtol=0)
    assert multi.calls == 1 and [d.job_count for d in devices] == [1, 1]  # 24 shifted variants split in two


def test_structure_key_ignores_values():
    a = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))])
    b = qml.tape.QuantumScript([qml.RX(0.9, 0)], [qml.expval(qml.Z(0))])
    c = qml.tape.QuantumScript([qml.RY(0.1, 0)], [qml.expval(qml.Z(0))])
    assert structure_key(a) == structure_key(b) != structure_key(c)


@pytest.mark.parametrize(
    "name, method, shots, batches, executions",
    [
        ("tensornet", "adjoint", None, [1], [1]),  # the forward keeps what the backward needs
        ("tensornet", "backprop", None, [1], [1]),
        ("tensornet", "parameter-shift", None, [1, 1], [1] * 5),  # forward, then all shifted runs in one call
        ("aer", "parameter-shift", 100, [1, 1], [1] * 5),
    ],
)
def test_tracker_records_qhybrids_own_device_calls(name, method, shots, batches, executions):
    dev = qhybrid.device(name, wires=2, shots=shots)

    @qhybrid.qnode(dev, diff_method=method)
    def circuit(x, y):
        qml.RX(x, 0)
        qml.RY(y, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(-0.7, dtype=torch.float64, requires_grad=True)
    with qml.Tracker(dev) as tracker:
        circuit(x, y).backward()
    assert tracker.history["batches"] == batches and tracker.history["executions"] == executions
    assert tracker.totals.get("shots", 0) == (shots or 0) * sum(executions)

"""qnodes called from several threads at once, each thread's recording its own (``_recording_queue``: PennyLane's
queuing made per thread). PennyLane keeps one process-wide list of active queues, so the operators a call made in
one thread (its decompositions, its rebuilt gates) went into another thread's recording. Found by a fuzzing helper
(2026-11-29): one qnode shared by six threads gave 8 of 240 results wrong (another call's batch among them), a qnode
and a device per thread gave tape errors ("ops operation U3 must occur prior to measurements"), and PennyLane's
QNode on a shared qhybrid device wrong gradients. Values and gradients here are default.qubit's, computed
beforehand in this thread."""

from __future__ import annotations

import threading

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
THREADS, TRIALS, CALLS = 6, 12, 3


def _circuit(x, w):
    qml.RY(2 * x[..., 0], wires=0)
    qml.U3(w[0], torch.tensor(0.3, dtype=torch.float64), w[1], wires=0)
    qml.IsingYY(w[2], wires=[1, 0])
    qml.CRZ(w[3], wires=[0, 1])
    qml.RX(w[4], wires=1)
    return qml.var(qml.X(1)), qml.expval(qml.Z(0))


def _inputs(trial: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(trial)
    return [(torch.rand((1, 3)[i % 2], 1, generator=g, dtype=torch.float64) * 3,
             torch.rand(5, generator=g, dtype=torch.float64) * 3) for i in range(THREADS)]  # fmt: skip


def _step(node, x, w):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = node(x, w)
    grads = torch.autograd.grad(out[0].sum() + 2 * out[1].sum(), (x, w))
    return [o.detach() for o in out] + list(grads)


def _run_threads(nodes) -> None:
    reference = qml.QNode(_circuit, qml.device("default.qubit", wires=2), interface="torch")
    for trial in range(TRIALS):
        inputs = _inputs(trial)
        want = [_step(reference, *inputs[i]) for i in range(THREADS)]
        got, errors = [None] * THREADS, []

        def work(i):
            try:
                for _ in range(CALLS):
                    got[i] = _step(nodes[i], *inputs[i])
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(repr(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        for i in range(THREADS):
            for a, b in zip(got[i], want[i], strict=True):
                assert a.shape == b.shape
                torch.testing.assert_close(a, b, atol=TOL, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_one_qnode_shared_by_threads(diff_method, static):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(_circuit)
    _run_threads([node] * THREADS)


def test_a_qnode_and_a_device_per_thread():
    _run_threads([qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(_circuit) for _ in range(THREADS)])


def test_one_plugin_device_shared_by_threads():
    device = qml.device("qhybrid.tensornet", wires=2)
    _run_threads([qml.QNode(_circuit, device, interface="torch", diff_method="adjoint", device_vjp=True)] * THREADS)

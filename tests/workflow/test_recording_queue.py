"""The queue a qnode records into (``workflow/_recording_queue.py``) makes the tape PennyLane's ``AnnotatedQueue``
and ``QuantumScript.from_queue`` make, for functions that queue, remove, re-queue and annotate operators, and
says what PennyLane says about a function it cannot record."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.workflow._recording_queue import RecordingQueue

TOL = 1e-10


def _ops_and_products():
    qml.Hadamard(0)
    qml.adjoint(qml.RX(0.3, wires=1))  # the base is queued, then removed by its adjoint
    qml.ctrl(qml.RY(0.2, wires=2), control=0)
    op = qml.RZ(0.1, wires=1)
    qml.apply(op)  # already queued: PennyLane queues a copy
    qml.prod(qml.X(0), qml.Y(2))  # the factors are removed by their product
    qml.StronglyEntanglingLayers(torch.full((1, 3, 3), 0.4, dtype=torch.float64), wires=range(3))
    with qml.QueuingManager.stop_recording():
        qml.RX(9.0, wires=0)  # not recorded
    return [qml.expval(qml.Z(0) @ qml.Z(1)), qml.probs(wires=[2]), qml.expval(qml.dot([0.5, 2.0], [qml.X(0), qml.Z(2)]))]


def _by_identity():
    h = qml.Hadamard(0)
    qml.QueuingManager.update_info(h, owner="me")
    qml.QueuingManager.remove(h)
    r = qml.RX(0.5, 0)
    qml.Hadamard(1)
    r.queue()  # queued again in place: it keeps its first place, as in an OrderedDict
    return qml.expval(qml.Z(0))


def _measurement_returned_not_queued():
    m = qml.expval(qml.Z(0))
    qml.QueuingManager.remove(m)
    qml.RY(0.7, 0)
    return m


def _recorded(queue_type, func):
    with queue_type() as q:
        out = func()
    tape = q.tape() if queue_type is RecordingQueue else qml.tape.QuantumScript.from_queue(q)
    return tape, q, out


@pytest.mark.parametrize("func", [_ops_and_products, _by_identity, _measurement_returned_not_queued])
def test_the_tape_is_pennylanes(func):
    ours, q, _ = _recorded(RecordingQueue, func)
    theirs, pq, _ = _recorded(qml.queuing.AnnotatedQueue, func)
    assert [type(o) for o in ours.operations] == [type(o) for o in theirs.operations]
    for a, b in zip(ours.operations + ours.measurements, theirs.operations + theirs.measurements):
        qml.assert_equal(a, b)
    assert len(ours.measurements) == len(theirs.measurements)
    assert len(q) == len(pq) and [type(o) for o in q.queue] == [type(o) for o in pq.queue]
    assert [type(k.obj) for k in q.keys()] == [type(k.obj) for k in pq.keys()]
    assert [v for v in q.values()] == [v for v in pq.values()]


def test_membership_info_and_removal_go_by_identity():
    with RecordingQueue() as q:
        a, b = qml.RX(0.1, 0), qml.RX(0.1, 0)  # equal, not the same object
        qml.QueuingManager.update_info(a, tag=1)
    assert a in q and b in q and q.get_info(a) == {"tag": 1} and q.get_info(b) == {}
    q.remove(a)
    assert a not in q and b in q and q.queue == [b] and q.get(a) is None
    with pytest.raises(qml.exceptions.QueuingError, match="not in the queue"):
        q.get_info(a)
    q[a] = {"again": True}
    assert q.queue == [b, a] and q[a] == {"again": True}
    del q[b]
    assert [w.obj for w in q] == [a]


def test_an_operator_after_a_measurement_is_pennylanes_error():
    def late():
        qml.expval(qml.Z(0))
        qml.RX(0.1, 0)

    for queue_type in (RecordingQueue, qml.queuing.AnnotatedQueue):
        with pytest.raises(ValueError, match="must occur prior to measurements"):
            _recorded(queue_type, late)


def test_a_qnode_recording_these_functions_matches_default_qubit():
    """The whole call, through the recording queue, against PennyLane's own qnode on default.qubit."""

    def circuit(w):
        qml.Hadamard(0)
        qml.adjoint(qml.RX(w[0], wires=1))
        qml.ctrl(qml.RY(w[1], wires=2), control=0)
        op = qml.RZ(w[2], wires=1)
        qml.apply(op)
        qml.StronglyEntanglingLayers(w[3:12].reshape(1, 3, 3), wires=range(3))
        return qml.expval(qml.dot([0.5, 2.0], [qml.X(0) @ qml.Y(1), qml.Z(2)]))

    w = torch.rand(12, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    for _ in range(2):  # the first call preprocesses; the second is served from the structure cache
        a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
        va, vb = ours(a), ref(b)
        va.backward(), vb.backward()
        assert abs(float((va - vb).detach())) < TOL
        assert torch.allclose(a.grad, b.grad, atol=TOL, rtol=0)


def test_another_threads_stop_recording_waits_for_a_recording():
    """PennyLane's ``stop_recording`` swapped its process-wide list of active queues outside the recording lock: a
    thread running it during another thread's recording made that recording's next gates queue nowhere (lost from its
    tape) and its exit pop an empty list. Now the swap waits for the recording to end."""
    import threading

    from qhybrid.workflow._recording_queue import RecordingQueue

    started, inside, made = threading.Event(), threading.Event(), threading.Event()
    tapes, errors = [], []

    def record():
        try:
            with RecordingQueue() as q:
                qml.RX(0.1, 0)
                started.set()
                inside.wait(timeout=1.0)  # (the other thread's stop_recording, if it got in meanwhile)
                qml.RY(0.2, 0)
                made.set()
                qml.expval(qml.Z(0))
            tapes.append(q.tape())
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def stop():
        started.wait(timeout=5.0)
        with qml.QueuingManager.stop_recording():
            inside.set()
            made.wait(timeout=1.0)  # (the recording's next gate, made while the list is swapped)

    threads = [threading.Thread(target=record), threading.Thread(target=stop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10.0)
    assert not errors
    assert [op.name for op in tapes[0].operations] == ["RX", "RY"]


def test_a_recording_that_waits_on_a_thread_stopping_recording_does_not_hang():
    """The other way round: a recording that waits on a worker which stops recording (a nested qnode's execution
    spread over threads) waited on PennyLane's recording lock it held itself; each thread has its own queues now."""
    import threading

    done = threading.Event()

    def worker():
        with qml.QueuingManager.stop_recording():
            qml.RX(0.3, 5)  # (queued nowhere)
        done.set()

    with RecordingQueue() as q:
        qml.RX(0.1, 0)
        t = threading.Thread(target=worker)
        t.start()
        t.join(timeout=10.0)
        qml.RY(0.2, 0)
    assert done.is_set()
    assert [op.name for op in q.tape().operations] == ["RX", "RY"]


@pytest.mark.parametrize("kind", ["pennylane", "qhybrid"])
def test_a_thread_making_operators_does_not_queue_into_another_threads_recording(kind):
    """PennyLane keeps one process-wide list of active queues: an operator made in any thread went into whatever
    another thread was recording (a device executing in one thread put gates into a PennyLane QNode recording in
    another: "must occur prior to measurements", or a wrong tape). Queues are per thread now; PennyLane's own
    ``AnnotatedQueue`` recording too."""
    import threading

    from pennylane.queuing import AnnotatedQueue

    recording, made = threading.Event(), threading.Event()

    def maker():
        recording.wait(timeout=5.0)
        qml.RX(0.3, 5)
        qml.expval(qml.Z(5))
        made.set()

    t = threading.Thread(target=maker)
    t.start()
    with (AnnotatedQueue() if kind == "pennylane" else RecordingQueue()) as q:
        qml.RX(0.1, 0)
        recording.set()
        assert made.wait(timeout=5.0)
        qml.expval(qml.Z(0))
    t.join(timeout=5.0)
    tape = qml.tape.QuantumScript.from_queue(q)
    assert [op.wires.tolist() for op in tape.operations] == [[0]]
    assert [m.wires.tolist() for m in tape.measurements] == [[0]]

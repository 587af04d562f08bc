"""Gates a plain qnode's recording makes without PennyLane's constructor (``_fast_operators``): the same instances
as PennyLane's (every attribute), unusual calls and PennyLane's errors left to PennyLane, the shortcut only inside
a recording, and a class whose PennyLane constructor sets something else turned back to it."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch
from pennylane.capture.capture_meta import CaptureMeta

import qhybrid
from qhybrid.workflow import _fast_operators
from qhybrid.workflow._fast_operators import _FAST, fast_gates
from qhybrid.workflow._recording_queue import RecordingQueue


def _both(make):
    """(the op made by the shortcut inside a recording, PennyLane's op from the same call), and the queue."""
    with fast_gates(), RecordingQueue() as q:
        mine = make()
    with qml.queuing.AnnotatedQueue():
        theirs = make()
    return mine, theirs, q


def _same(mine, theirs):
    assert type(mine) is type(theirs)
    a, b = vars(mine), vars(theirs)
    assert a.keys() == b.keys()
    for key in b:
        if key == "data":
            assert len(a[key]) == len(b[key])
            for x, y in zip(a[key], b[key]):  # the same objects, or equal arrays PennyLane made of lists
                assert x is y or (type(x) is type(y) is np.ndarray and np.array_equal(x, y))
        else:
            assert type(a[key]) is type(b[key]) and a[key] == b[key], key
    assert qml.equal(mine, theirs)
    assert mine.hash == theirs.hash


def test_every_shortcut_class_is_a_plain_gate_of_pennylane():
    names = {cls.__name__ for cls in _FAST}
    assert {"RX", "RY", "RZ", "IsingZZ", "Hadamard", "Rot", "SWAP"} <= names


@pytest.mark.parametrize("cls", sorted(_FAST, key=lambda c: c.__name__), ids=lambda c: c.__name__)
@pytest.mark.parametrize("form", ["keyword", "positional", "tuple", "strings"])
def test_the_shortcut_makes_pennylanes_instance(cls, form):
    n_params, n_wires = cls.num_params, cls.num_wires
    params = tuple(torch.tensor(0.1 + i, dtype=torch.float64, requires_grad=True) for i in range(n_params))
    labels = ["a", "b", "c"][:n_wires] if form == "strings" else [3, 1, 2][:n_wires]
    wires = labels[0] if n_wires == 1 and form != "tuple" else (tuple(labels) if form == "tuple" else labels)
    if form == "positional":
        make = lambda: cls(*params, wires)  # noqa: E731
    else:
        make = lambda: cls(*params, wires=wires)  # noqa: E731
    mine, theirs, q = _both(make)
    _same(mine, theirs)
    assert q.queue == [mine]
    assert mine.matrix().tolist() == theirs.matrix().tolist()
    assert mine.wires is not None and mine.wires == qml.wires.Wires(wires)


def test_batched_and_numpy_parameters_read_their_batch_as_pennylanes():
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    mine, theirs, _ = _both(lambda: qml.RX(x, wires=0))
    _same(mine, theirs)
    assert mine.batch_size == theirs.batch_size == 3
    params = np.float64(0.1), 0.2, np.array(0.3)
    mine, theirs, _ = _both(lambda: qml.Rot(*params, wires=[5]))
    _same(mine, theirs)


@pytest.mark.parametrize(
    "make",
    [
        lambda: qml.RX([0.1, 0.2], wires=0),  # a list parameter: PennyLane makes an array
        lambda: qml.RX(phi=0.3, wires=0),  # parameters by keyword
        lambda: qml.RX(0.3, wires=True),  # a bool label is not cached as the int 1
        lambda: qml.IsingZZ(0.3, wires=np.array([0, 1])),
        lambda: qml.RX(0.3, qml.wires.Wires([4])),
    ],
)
def test_unusual_calls_make_pennylanes_instance_too(make):
    mine, theirs, _ = _both(make)
    _same(mine, theirs)


def test_a_bool_label_and_an_int_label_stay_apart():
    mine_bool, _, _ = _both(lambda: qml.RX(0.3, wires=[True]))
    mine_int, _, _ = _both(lambda: qml.RX(0.3, wires=[1]))
    assert mine_bool.wires.tolist() == [True] and type(mine_bool.wires[0]) is bool
    assert type(mine_int.wires[0]) is int


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: qml.IsingZZ(0.3, wires=[0]), "wrong number of wires"),
        (lambda: qml.RX(0.3, wires=[0, 1]), "wrong number of wires"),
        (lambda: qml.IsingZZ(0.3, wires=[2, 2]), "Wires must be unique"),
        (lambda: qml.RX(0.1, 0.2, wires=0), None),
        (lambda: qml.Rot(0.1, wires=0), None),
        (lambda: qml.RX(0.1, wires=None), "Must specify the wires"),
        (lambda: qml.Hadamard(None), "Must specify the wires"),
    ],
)
def test_pennylanes_errors_stand(make, message):
    with pytest.raises((ValueError, TypeError, qml.wires.WireError)) as theirs:
        make()
    with pytest.raises(type(theirs.value)) as mine, fast_gates(), RecordingQueue():
        make()
    assert str(mine.value) == str(theirs.value)
    if message:
        assert message in str(mine.value)


def test_only_inside_a_recording_queue_and_only_while_recording():
    original = CaptureMeta.__call__
    with fast_gates():
        assert CaptureMeta.__call__ is not original
        with qml.queuing.AnnotatedQueue() as q:  # PennyLane's own queue: PennyLane's constructor
            op = qml.RX(0.3, 0)
        assert q.queue == [op]
        with fast_gates():
            pass
        assert CaptureMeta.__call__ is not original  # the outer recording still runs
    assert CaptureMeta.__call__ is original

    def broken(x):
        qml.RX(x, 0)
        raise RuntimeError("inside the function")

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(broken)
    with pytest.raises(RuntimeError, match="inside the function"):
        node(torch.tensor(0.1))
    assert CaptureMeta.__call__ is original


def test_a_subclass_goes_through_pennylane():
    class MyRX(qml.RX):
        def __init__(self, phi, wires, id=None):
            super().__init__(phi, wires=wires, id=id)
            self.mine = True

    with fast_gates(), RecordingQueue() as q:
        op = MyRX(0.3, wires=0)
    assert op.mine and q.queue == [op]


def test_a_class_whose_pennylane_instance_differs_is_turned_back(monkeypatch):
    class Extra(qml.RY):
        def __init__(self, phi, wires, id=None):
            super().__init__(phi, wires=wires, id=id)
            self.extra = 1

    monkeypatch.setitem(_FAST, Extra, (1, 1, True, False))
    with fast_gates(), RecordingQueue() as q:
        op = Extra(0.3, wires=0)
    assert op.extra == 1 and q.queue == [op]
    assert Extra not in _FAST
    assert _FAST[qml.RY][3] in (True, False)  # the real classes are untouched


def test_a_checked_class_is_checked_once(monkeypatch):
    calls = []
    real = _fast_operators._same_as_pennylane
    monkeypatch.setattr(_fast_operators, "_same_as_pennylane", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setitem(_FAST, qml.RZ, (1, 1, True, False))
    with fast_gates(), RecordingQueue():
        for _ in range(3):
            qml.RZ(0.3, wires=0)
    assert len(calls) == 1 and _FAST[qml.RZ] == (1, 1, True, True)


def test_wrapping_transforms_take_their_base_out_of_the_queue():
    def circuit(x):
        qml.adjoint(qml.RX(x[0], wires=0))
        qml.ctrl(qml.RY(x[1], wires=1), control=0)
        qml.QuantumPhaseEstimation(qml.RZ(x[2], wires=0), estimation_wires=[2])
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(2))

    x = torch.tensor([0.4, 0.9, 1.3], dtype=torch.float64, requires_grad=True)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    a, b = torch.stack(ours(x)), torch.stack(ref(x))
    assert torch.allclose(a, b, atol=1e-10, rtol=0)
    (ga,) = torch.autograd.grad(a.sum(), x)
    (gb,) = torch.autograd.grad(b.sum(), x)
    assert torch.allclose(ga, gb, atol=1e-10, rtol=0)
    assert len(ours.tape.operations) == 3  # the bases are inside their wrappers, not queued beside them


def test_random_circuits_of_shortcut_gates_match_default_qubit():
    rng = np.random.default_rng(11)
    gates = sorted(_FAST, key=lambda c: c.__name__)
    for trial in range(12):
        n = 4
        plan = []
        for _ in range(14):
            cls = gates[rng.integers(len(gates))]
            wires = [int(w) for w in rng.choice(n, size=cls.num_wires, replace=False)]
            plan.append((cls, wires))

        def circuit(x, plan=plan):
            k = 0
            for cls, wires in plan:
                qml.Hadamard(wires[0])
                params = x[k : k + cls.num_params]
                k += cls.num_params
                cls(*params, wires=wires if len(wires) > 1 else wires[0])
            return [qml.expval(qml.Z(w)) for w in range(n)]

        m = sum(cls.num_params for cls, _ in plan)
        x = torch.tensor(rng.uniform(-2, 2, m), dtype=torch.float64, requires_grad=True)
        for method in ("adjoint", "parameter-shift"):
            ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=method)(circuit)
            ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
            a, b = torch.stack(ours(x)), torch.stack(ref(x))
            assert torch.allclose(a, b, atol=1e-10, rtol=0), (trial, method)
            if m:
                (ga,) = torch.autograd.grad((a * torch.arange(1.0, n + 1, dtype=a.dtype)).sum(), x)
                (gb,) = torch.autograd.grad((b * torch.arange(1.0, n + 1, dtype=b.dtype)).sum(), x)
                assert torch.allclose(ga, gb, atol=1e-10, rtol=0), (trial, method)

"""Programs are built with Python's cyclic collector paused, through every path that builds one (the
one-node path of ``_bound.py`` once built without the pause: 0.3 s of full collections in a second process)."""

import gc

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate


@pytest.fixture
def seen(monkeypatch):
    states = []
    real = _simulate._build_program

    def spy(*args):
        states.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(_simulate, "_build_program", spy)
    assert gc.isenabled()
    return states


def _circuit(x):
    qml.RX(x[0], 0)
    qml.CNOT([0, 1])
    qml.RY(x[1], 1)
    return qml.expval(qml.Z(1))


def test_the_one_node_path_builds_with_the_collector_paused(seen):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(_circuit)
    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    node(x).backward()
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=2), interface="torch")
    y = x.detach().clone().requires_grad_()
    ref(y).backward()
    assert torch.allclose(x.grad, y.grad, atol=1e-10)
    assert seen and not any(seen) and gc.isenabled()


def test_a_device_execute_builds_with_the_collector_paused(seen):
    dev = qhybrid.device("tensornet", wires=2)
    tape = qml.tape.QuantumScript([qml.RX(0.3, 0), qml.CNOT([0, 1])], [qml.expval(qml.Z(1)), qml.probs(wires=[0, 1])])
    (res,) = dev.execute([tape])
    want = qml.device("default.qubit", wires=2).execute([tape])[0]
    assert abs(float(res[0]) - float(want[0])) < 1e-10
    assert seen and not any(seen) and gc.isenabled()


def test_what_a_build_leaves_is_moved_to_the_oldest_generation():
    from qhybrid.devices._collector import collector_paused

    with collector_paused():
        marker = [object()]  # a container: tracked by the collector
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert any(o is marker for o in gc.get_objects(generation=2))


def test_objects_the_process_froze_stay_frozen():
    from qhybrid.devices._collector import collector_paused

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            pass
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()


def test_a_new_device_settles_what_is_alive_in_the_oldest_generation():
    marker = [object()]
    qhybrid.device("tensornet", wires=1)
    assert any(o is marker for o in gc.get_objects(generation=2)) and gc.get_freeze_count() == 0

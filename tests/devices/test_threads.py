"""threads_for: small CPU state work at one intra-op thread, the caller's setting restored; the state-vector
adjoint nodes (the one-node path and the program node) run inside it."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices import _threads
from qhybrid.devices._threads import SMALL_WORK_AMPLITUDES, threads_for
from qhybrid.devices.tensornet import _bound
from qhybrid.devices.tensornet.engines.statevector import kernels, planned

CPU = torch.device("cpu")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_work_runs_at_one_thread_and_restores(two_threads):
    with threads_for(SMALL_WORK_AMPLITUDES, CPU):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_the_setting_is_restored_when_the_body_raises(two_threads):
    with pytest.raises(ValueError, match="inside"):
        with threads_for(16, CPU):
            raise ValueError("inside")
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("amplitudes, device", [(SMALL_WORK_AMPLITUDES + 1, CPU), (16, torch.device("meta"))])
def test_large_or_non_cpu_work_keeps_the_callers_threads(two_threads, amplitudes, device):
    with threads_for(amplitudes, device):
        assert torch.get_num_threads() == 2


def _circuit(x, w):
    qml.AngleEmbedding(x, wires=range(3), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(3))
    return [qml.expval(qml.Z(i)) for i in range(3)]


def _threads_seen(monkeypatch, one_node: bool) -> dict[str, set[int]]:
    """Thread counts seen by the state-vector kernels in a forward and backward of a small qnode."""
    seen: dict[str, set[int]] = {"run": set(), "adjoint": set()}
    for module in (kernels, planned):  # small bound programs walk their planned workspace (``planned``)
        for name in seen:
            original = getattr(module, name)

            def spy(*args, _name=name, _original=original, **kwargs):
                seen[_name].add(torch.get_num_threads())
                return _original(*args, **kwargs)

            monkeypatch.setattr(module, name, spy)
    monkeypatch.setattr(_bound, "ENABLED", one_node)
    q = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(_circuit)
    x = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True)
    torch.stack(list(q(x, w))).sum().backward()
    return seen


@pytest.mark.parametrize("one_node", [True, False])
def test_state_vector_adjoint_nodes_run_small_circuits_at_one_thread(monkeypatch, two_threads, one_node):
    assert _threads_seen(monkeypatch, one_node) == {"run": {1}, "adjoint": {1}}
    assert torch.get_num_threads() == 2


def test_state_vector_adjoint_nodes_keep_two_threads_above_the_cut_off(monkeypatch, two_threads):
    monkeypatch.setattr(_threads, "SMALL_WORK_AMPLITUDES", 4)  # the 3-wire batch-4 circuit counts as large
    assert _threads_seen(monkeypatch, one_node=True) == {"run": {2}, "adjoint": {2}}

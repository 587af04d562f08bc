"""Parameter-shift through plain PennyLane (``qml.qnode`` on ``qml.device("qhybrid.tensornet")``): every
shifted tape of one structure runs as one stacked program, and the numbers match default.qubit."""

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
DEPTH = 2
COST_H, MIXER_H = qml.qaoa.maxcut(nx.complete_graph(4))


def _qaoa(params):
    for w in range(4):
        qml.Hadamard(w)
    for k in range(DEPTH):
        qml.qaoa.cost_layer(params[0, k], COST_H)
        qml.qaoa.mixer_layer(params[1, k], MIXER_H)
    return qml.expval(COST_H)


def _value_and_grad(node):
    params = torch.tensor([[0.3, 0.7], [0.5, 0.1]], dtype=torch.float64, requires_grad=True)
    value = node(params)
    value.backward()
    return value.detach(), params.grad


@pytest.fixture
def reference():
    dev = qml.device("default.qubit", wires=4)
    return _value_and_grad(qml.qnode(dev, diff_method="parameter-shift", interface="torch")(_qaoa))


def test_qaoa_plugin_matches_default_qubit(reference):
    dev = qml.device("qhybrid.tensornet", wires=4)
    value, grad = _value_and_grad(qml.qnode(dev, diff_method="parameter-shift", interface="torch")(_qaoa))
    assert torch.allclose(value, reference[0], atol=TOL, rtol=0)
    assert torch.allclose(grad, reference[1], atol=TOL, rtol=0)


def test_qaoa_native_matches_default_qubit(reference):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=4), diff_method="parameter-shift")(_qaoa)
    value, grad = _value_and_grad(node)
    assert torch.allclose(value, reference[0], atol=TOL, rtol=0)
    assert torch.allclose(grad, reference[1], atol=TOL, rtol=0)


def _program_runs(dev) -> int:
    info = dev.plan_cache_info()
    return info.hits + info.misses


def test_a_backward_pass_is_one_device_call_and_one_program_run():
    dev = qml.device("qhybrid.tensornet", wires=4)
    calls = []
    execute = dev.execute

    def spy(circuits, execution_config=None):
        calls.append((len(list(circuits)) if not isinstance(circuits, qml.tape.QuantumScript) else 1, _program_runs(dev)))
        out = execute(circuits, execution_config)
        calls[-1] = calls[-1] + (_program_runs(dev),)
        return out

    dev.execute = spy
    node = qml.qnode(dev, diff_method="parameter-shift", interface="torch")(_qaoa)
    _value_and_grad(node)
    assert len(calls) == 2  # the forward tape, then every shifted tape of the step together
    n_tapes, before, after = calls[1]
    assert n_tapes >= 2 * 2 * DEPTH
    assert after - before == 1


def test_shifted_tapes_with_their_own_hamiltonian_copies_stack():
    """PennyLane hands the device tapes whose observables are separate (numpy) copies of one Hamiltonian:
    equal values, so one stacked run; a different Hamiltonian is a separate run."""
    ops = [qml.Hadamard(0), qml.PauliRot(0.4, "XY", wires=[0, 1]), qml.MultiRZ(0.3, wires=[0, 1, 2]), qml.RY(0.2, 2)]
    h = qml.dot([0.5, -0.25], [qml.Z(0) @ qml.Z(1), qml.X(2)])
    tape = qml.tape.QuantumScript(ops, [qml.expval(h)], trainable_params=[0, 1, 2])
    shifted, post = qml.gradients.param_shift(tape)
    shifted = [qml.transforms.convert_to_numpy_parameters(t)[0][0] for t in shifted]
    dev = qml.device("qhybrid.tensornet", wires=3)
    before = _program_runs(dev)
    ours = post(dev.execute(shifted))
    assert _program_runs(dev) - before == 1
    theirs = post(qml.device("default.qubit", wires=3).execute(shifted))
    assert qml.math.allclose(ours, theirs, atol=TOL, rtol=0)
    other = tape.copy(measurements=[qml.expval(qml.dot([0.5, 0.75], [qml.Z(0) @ qml.Z(1), qml.X(2)]))])
    before = _program_runs(dev)
    results = dev.execute([shifted[0], other])
    assert _program_runs(dev) - before == 2
    assert qml.math.allclose(results[1], qml.device("default.qubit", wires=3).execute(other), atol=TOL, rtol=0)

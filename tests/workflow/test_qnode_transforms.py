"""PennyLane transforms on ``@qhybrid.qnode`` work as on PennyLane's own QNode (issue 20, item 3): a user
``@qml.transform`` changes the result, ``qml.draw`` / ``qml.specs`` read the circuit, ``qml.metric_tensor`` and
``qml.gradients.param_shift`` give default.qubit's numbers (float64, 1e-10), and a transformed qnode stays
differentiable. Every check runs the same function on ``default.qubit`` through ``qml.qnode``."""

from __future__ import annotations

import copy

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10
WIRES = 3


pytestmark = pytest.mark.usefixtures("quiet_pennylane")


def _circuit(params):
    _gates(params)
    return qml.expval(qml.Z(2) @ qml.Z(0))


def _gates(params):
    qml.RX(params[0], 0)
    qml.RY(params[1], 1)
    qml.CNOT([0, 1])
    qml.RZ(params[2], 1)
    qml.RY(params[3], 2)
    qml.CNOT([1, 2])
    qml.RX(params[4], 2)


def _pair(func=_circuit, diff_method="adjoint", wires=WIRES):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=wires), diff_method=diff_method)(func)
    ref = qml.qnode(qml.device("default.qubit", wires=wires), interface="torch")(func)
    return ours, ref


def _params(seed=0, n=5):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=gen, dtype=torch.float64) * 2 * np.pi).requires_grad_(True)


@qml.transform
def _append_x(tape):
    """A user transform with its own postprocessing: one more X on wire 2, result doubled."""
    new = tape.copy(operations=[*tape.operations, qml.PauliX(2)])
    return [new], lambda results: _double(results[0])


def _double(result):
    return tuple(2 * r for r in result) if isinstance(result, tuple) else 2 * result


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_user_transform_changes_the_result_like_default_qubit(diff_method):
    ours, ref = _pair(diff_method=diff_method)
    x = _params()
    got, want = _append_x(ours)(x), _append_x(ref)(x)
    assert abs(float(got) - float(ours(x))) > 1e-3  # the transform did something
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    (g_got,) = torch.autograd.grad(got, x)
    (g_want,) = torch.autograd.grad(want, x)
    assert torch.allclose(g_got, g_want, atol=TOL, rtol=0)


def test_transform_leaves_the_original_qnode_alone():
    ours, _ = _pair()
    x = _params()
    before = ours(x)
    transformed = _append_x(ours)
    assert isinstance(transformed, qhybrid.QNode) and transformed is not ours
    assert len(ours.compile_pipeline) == 0 and len(transformed.compile_pipeline) == 1
    assert torch.equal(ours(x), before)
    assert isinstance(copy.copy(ours), qhybrid.QNode)


def test_splitting_transform_and_stacked_transforms():
    def f(params):
        _gates(params)
        return qml.expval(qml.X(0) @ qml.Z(1)), qml.expval(qml.Z(0)), qml.expval(qml.Y(2))

    ours, ref = _pair(f)
    x = _params(1)
    got = qml.transforms.split_non_commuting(_append_x(ours))(x)
    want = qml.transforms.split_non_commuting(_append_x(ref))(x)
    assert isinstance(got, tuple) and len(got) == 3
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=TOL, rtol=0)
    ga = torch.autograd.grad(sum(got), x)[0]
    gb = torch.autograd.grad(sum(want), x)[0]
    assert torch.allclose(ga, gb, atol=TOL, rtol=0)


def test_draw_and_specs():
    ours, ref = _pair()
    x = _params()
    for level in ("top", "user"):
        assert qml.draw(ours, level=level)(x) == qml.draw(ref, level=level)(x)
    assert "RX" in qml.draw(ours)(x) and "RX" in qml.draw(_append_x(ours))(x)
    assert qml.draw(_append_x(ours), level="user")(x) == qml.draw(_append_x(ref), level="user")(x)
    specs, want = qml.specs(ours)(x), qml.specs(ref)(x)
    assert specs.resources.num_gates == want.resources.num_gates == 7
    assert specs.num_device_wires == WIRES


@pytest.mark.parametrize("approx", ["block-diag", "diag"])
def test_metric_tensor_matches_default_qubit(approx):
    ours, ref = _pair()
    x = _params(2)
    got = qml.metric_tensor(ours, approx=approx)(x)
    want = qml.metric_tensor(ref, approx=approx)(x)
    assert isinstance(got, torch.Tensor) and got.shape == (5, 5)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


def test_metric_tensor_with_classical_processing_of_the_arguments():
    def f(a, b):
        qml.RX(2 * a[0], 0)
        qml.RY(a[1] * b, 1)
        qml.CNOT([0, 1])
        qml.RZ(a[0] + a[1], 1)
        return qml.expval(qml.Z(1))

    ours, ref = _pair(f)
    a = torch.tensor([0.3, -0.8], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    got, want = qml.metric_tensor(ours)(a, b), qml.metric_tensor(ref)(a, b)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=TOL, rtol=0)


def test_param_shift_transform_matches_default_qubit():
    ours, ref = _pair(diff_method="parameter-shift")
    x = _params(3)
    got = qml.gradients.param_shift(ours)(x)
    want = qml.gradients.param_shift(ref)(x)
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    (auto,) = torch.autograd.grad(ours(x), x)
    assert torch.allclose(got, auto, atol=TOL, rtol=0)


def test_set_shots_is_refused_naming_the_device_shots():
    ours, _ = _pair()
    with pytest.raises(ValueError, match=r"qhybrid.device\('tensornet', wires=..., shots=N\)"):
        qml.set_shots(ours, 200)
    # (an Aer qnode was told to make a tensornet device; found by a fuzzing helper)
    aer = qhybrid.qnode(qhybrid.device("aer", wires=1), diff_method="parameter-shift")(lambda: qml.expval(qml.Z(0)))
    with pytest.raises(ValueError, match=r"qhybrid.device\('aer', wires=..., shots=N\)"):
        qml.set_shots(aer, 200)


def test_update_keeps_transforms_and_refuses_unknown_options():
    ours, _ = _pair()
    x = _params()
    moved = _append_x(ours).update(diff_method="parameter-shift")
    assert isinstance(moved, qhybrid.QNode) and moved.diff_method == "parameter-shift"
    assert torch.allclose(moved(x), _append_x(ours)(x), atol=TOL, rtol=0)
    with pytest.raises(ValueError, match="updates device, diff_method"):
        ours.update(cache=False)


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: qml.metric_tensor(f, approx=None),  # Hadamard tests on the spare wire
        qml.adjoint_metric_tensor,  # informative: reads the tapes, runs nothing
        qml.gradients.quantum_fisher,
        qml.gradients.param_shift_hessian,
    ],
    ids=["metric_tensor-full", "adjoint_metric_tensor", "quantum_fisher", "param_shift_hessian"],
)
def test_other_gradient_transforms_match_default_qubit(transform):
    def f(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        qml.RZ(x[0] * x[1], 1)
        return qml.expval(qml.Z(1) @ qml.X(0))

    ours, ref = _pair(f)
    x = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    got, want = transform(ours)(x), transform(ref)(x)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for a, b in zip(got, want, strict=True):
        assert torch.allclose(torch.as_tensor(a), torch.as_tensor(b), atol=TOL, rtol=0)


@qml.transform
def _flip_first_wire(tape):
    """A user transform: an X on wire 0 before the measurements."""
    return [tape.copy(operations=[*tape.operations, qml.PauliX(0)])], lambda results: results[0]


def _layer_circuit(inputs, w):
    qml.RY(inputs[..., 0], 0)
    qml.RX(w[0], 1)
    qml.CNOT([1, 0])
    return [qml.expval(qml.Z(0)), qml.expval(qml.Z(1))]


def test_torch_layer_runs_the_transforms_of_its_qnode():
    """TorchLayer's static traces must not skip a transformed qnode's transforms."""
    ours = _flip_first_wire(qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(_layer_circuit))
    ref = _flip_first_wire(qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(_layer_circuit))
    layer = qhybrid.TorchLayer(ours, {"w": (1,)}).double()
    x = torch.rand(4, 1, dtype=torch.float64)
    for _ in range(2):  # the second call is the one a static trace would answer
        got = layer(x)
        want = torch.stack(ref(x, layer.w.detach()), -1)
        assert torch.allclose(got, want, atol=TOL, rtol=0)


def test_update_and_copies_keep_settings_and_own_their_caches():
    q = qhybrid.qnode(qhybrid.device("tensornet", wires=3), static_structure=True)(_circuit)
    q(torch.rand(5, dtype=torch.float64))  # a trace is kept
    assert q.update(diff_method="parameter-shift").static_structure is True
    flipped = _flip_first_wire(q)
    assert flipped._static is not q._static  # a transformed copy does not answer from the original's traces
    params = torch.rand(5, dtype=torch.float64)
    want = _flip_first_wire(qml.qnode(qml.device("default.qubit", wires=3), interface="torch")(_circuit))(params)
    assert torch.allclose(flipped(params), want, atol=TOL, rtol=0)

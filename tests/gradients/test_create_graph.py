"""First derivatives taken with ``create_graph=True`` and full Hessians through ``qhybrid.qnode``, against
default.qubit (backprop), on circuits whose angles mix python floats, tensors, views and angles computed from
other angles (``2 * a`` beside ``a``, ``w[0] * a``, one tensor at two gates), batched and not, with and without
``static_structure``, on the state-vector, light-cone and closed-network engines (issue 41, finding 1: a
parameter made from another was counted twice: the issue's example gave -2.6972 for -1.3486).

MPS splits differentiate once: a backward with ``create_graph=True`` through ``method="mps"`` (a Hessian's first
pass) is refused by name where it was silently wrong (finding 2); plain first derivatives stay right, and
parameter-shift on the MPS device gives its Hessians."""

from __future__ import annotations

import math

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import whole
from qhybrid.errors import GradientError

TOL = 1e-10
METHODS = ["adjoint", "best", "backprop", "parameter-shift"]


def _derived(a, w):
    """The issue's circuit grown: 2a beside a, a python-float angle, w[0] * a, sin(w[0]), CRY and IsingZZ."""
    qml.RY(2 * a, 0)
    qml.RY(a, 1)
    qml.RZ(0.4, 1)
    qml.CNOT([0, 1])
    qml.RX(w[0] * a, 2)
    qml.CRY(w[1], [2, 0])
    qml.RX(w[1], 1)
    qml.IsingZZ(0.3, [1, 2])
    qml.RY(torch.sin(w[0]), 2)
    return qml.expval(qml.Z(0)), qml.expval(qml.Z(1) @ qml.X(2))


def _shared(a, w):
    """One tensor object at two gates, a Rot with a float, an angle summed from two inputs."""
    s = w[0] * 1.5
    qml.RX(s, 0)
    qml.RY(s, 1)
    qml.RZ(a, 0)
    qml.CNOT([0, 2])
    qml.Rot(w[0], w[1], 0.2, wires=1)
    qml.CRX(a + w[1], [1, 2])
    return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.Y(2))


RING = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)]


def _qaoa(a, w):
    """Six wires: light-cone classes whose members share rows; angles (layer + 1) * a and a python float."""
    for q in range(6):
        qml.Hadamard(q)
    for layer in range(2):
        for u, v in RING:
            qml.IsingZZ((layer + 1) * a, [u, v])
        for q in range(6):
            qml.RX(w[layer], q)
        qml.RY(0.3, 2)
    H = qml.Hamiltonian([0.5] * len(RING) + [0.7], [qml.Z(u) @ qml.Z(v) for u, v in RING] + [qml.X(0)])
    return qml.expval(H), qml.expval(qml.Z(0) @ qml.Z(3))


def _loss(f):
    def loss(a, w):
        r = f(a, w)
        return (r[0] + 0.7 * r[1]).sum()

    return loss


def _args(batched):
    a = torch.tensor([0.37, -0.8, 1.1] if batched else 0.37, dtype=torch.float64, requires_grad=True)
    return a, torch.tensor([0.5, -1.2], dtype=torch.float64, requires_grad=True)


def _assert_matches_default_qubit(circuit, wires, diff_method, batched, static=False, **device_options):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=wires, **device_options), diff_method=diff_method,
                         static_structure=static)(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=wires), interface="torch", diff_method="backprop")(circuit)
    a, w = _args(batched)
    first = torch.autograd.grad(_loss(ours)(a, w), (a, w), create_graph=True)
    first_ref = torch.autograd.grad(_loss(ref)(a, w), (a, w), create_graph=True)
    for g, g_ref in zip(first, first_ref):
        torch.testing.assert_close(g, g_ref, atol=TOL, rtol=0)
    hess = torch.autograd.functional.hessian(_loss(ours), (a, w))
    hess_ref = torch.autograd.functional.hessian(_loss(ref), (a, w))
    for row, row_ref in zip(hess, hess_ref):
        for h, h_ref in zip(row, row_ref):
            torch.testing.assert_close(h, h_ref, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "best"])
def test_the_issue_example(diff_method):
    def body(a):
        qml.RY(2 * a, 0)
        qml.RY(a, 1)
        qml.RZ(0.4, 1)
        return qml.expval(qml.Z(0))

    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(body)
    a = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(f(a), a, create_graph=True)
    (h,) = torch.autograd.grad(g, a)
    assert abs(g.item() + 2 * math.sin(0.74)) < TOL  # -1.3486 (was -2.6972)
    assert abs(h.item() + 4 * math.cos(0.74)) < TOL


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("diff_method", METHODS)
@pytest.mark.parametrize("circuit", [_derived, _shared], ids=["derived", "shared"])
def test_state_vector_engine(circuit, diff_method, batched, static):
    _assert_matches_default_qubit(circuit, 3, diff_method, batched, static)


@pytest.fixture(params=["light cones", "closed networks"])
def wide_engine(request, monkeypatch):
    """Every circuit measured by light cones (their networks contracted whole), or by closed networks per class."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    if request.param == "closed networks":
        monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    return request.param


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
@pytest.mark.parametrize("circuit", [_derived, _shared], ids=["derived", "shared"])
def test_network_engines(wide_engine, circuit, diff_method, batched):
    _assert_matches_default_qubit(circuit, 3, diff_method, batched)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_light_cone_classes_sharing_rows(wide_engine, diff_method, static):
    _assert_matches_default_qubit(_qaoa, 6, diff_method, batched=False, static=static)


def _noisy(a, w):
    qml.RY(2 * a, 0)
    qml.RY(a, 1)
    qml.RZ(0.4, 1)
    qml.CNOT([0, 1])
    qml.DepolarizingChannel(0.1, 0)
    qml.RX(w[0] * a, 1)
    qml.BitFlip(0.2, 1)
    qml.CRY(w[1], [1, 0])
    return qml.expval(qml.Z(0)), qml.expval(qml.Z(0) @ qml.X(1))


@pytest.mark.parametrize("diff_method", METHODS)
def test_noisy_circuit_against_default_mixed(diff_method):
    """The mixed-state engine, derived angles: the first derivative under create_graph and the Hessian."""
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(_noisy)
    ref = qml.qnode(qml.device("default.mixed", wires=2), interface="torch", diff_method="backprop")(_noisy)
    a, w = _args(batched=False)
    first = torch.autograd.grad(_loss(ours)(a, w), (a, w), create_graph=True)
    for g, g_ref in zip(first, torch.autograd.grad(_loss(ref)(a, w), (a, w))):
        torch.testing.assert_close(g, g_ref, atol=TOL, rtol=0)
    hess = torch.autograd.functional.hessian(_loss(ours), (a, w))
    for row, row_ref in zip(hess, torch.autograd.functional.hessian(_loss(ref), (a, w))):
        for h, h_ref in zip(row, row_ref):
            torch.testing.assert_close(h, h_ref, atol=TOL, rtol=0)


def _layer_body(inputs, w):
    qml.RY(inputs[..., 0], 0)
    qml.RY(2 * inputs[..., 0] + w[0], 1)
    qml.RZ(0.4, 1)
    qml.CNOT([0, 1])
    qml.RX(w[1] * inputs[..., 1], 0)
    return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(1))


@pytest.mark.parametrize("diff_method", ["adjoint", "best", "parameter-shift"])
def test_torch_layer_input_gradient_penalty_and_hessian(diff_method):
    """qhybrid.layers.TorchLayer (static structure) against qml.qnn.TorchLayer on default.qubit: the input
    gradient under create_graph, its derivative in the weights (a gradient penalty's), the input Hessian."""
    q = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(_layer_body)
    ours = qhybrid.layers.TorchLayer(q, {"w": 2}).double()
    ref_qnode = qml.qnode(qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(_layer_body)
    ref = qml.qnn.TorchLayer(ref_qnode, {"w": 2}).double()
    with torch.no_grad():
        ref.w.copy_(ours.w)
    x = torch.tensor([[0.3, -0.7], [0.5, 1.2]], dtype=torch.float64, requires_grad=True)
    got = []
    for layer in (ours, ref):
        loss = lambda x, layer=layer: (layer(x) ** 2).sum()  # noqa: E731
        (g,) = torch.autograd.grad(loss(x), x, create_graph=True)
        (gw,) = torch.autograd.grad(g.sum(), layer.w)
        got.append((g, gw, torch.autograd.functional.hessian(loss, x)))
    for a, b in zip(*got):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)


# --- MPS -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("diff_method", ["adjoint", "best", "backprop"])
def test_mps_refuses_a_second_derivative_by_name(diff_method):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=3, method="mps"), diff_method=diff_method)(_derived)
    a, w = _args(batched=False)
    with pytest.raises(GradientError, match=r"method='mps' has no second derivatives.*exact engine.*parameter-shift"):
        torch.autograd.functional.hessian(_loss(f), (a, w))


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_mps_create_graph_is_refused_and_first_derivatives_stay_right(diff_method):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=3, method="mps"), diff_method=diff_method)(_shared)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(_shared)
    a, w = _args(batched=True)
    with pytest.raises(GradientError, match="no second derivatives"):
        torch.autograd.grad(_loss(f)(a, w), (a, w), create_graph=True)
    for g, g_ref in zip(torch.autograd.grad(_loss(f)(a, w), (a, w)), torch.autograd.grad(_loss(ref)(a, w), (a, w))):
        torch.testing.assert_close(g, g_ref, atol=TOL, rtol=0)


def test_mps_parameter_shift_hessian_matches_default_qubit():
    _assert_matches_default_qubit(_shared, 3, "parameter-shift", batched=False, method="mps")


@pytest.mark.parametrize("device", ["tensornet", "aer"])
@pytest.mark.parametrize("diff_method", ["parameter-shift", "adjoint"])
def test_a_gradient_the_results_do_not_depend_on_differentiates_to_zero(device, diff_method):
    """A parameter the results do not depend on (a global phase under ``probs``): its gradient under ``create_graph``
    came back as a constant, and differentiating it again raised torch's "does not require grad" where default.qubit
    gives zeros (found by a fuzzing helper)."""
    if device == "aer" and diff_method == "adjoint":
        pytest.skip("the Aer device differentiates by parameter-shift")
    pytest.importorskip("qiskit") if device == "aer" else None

    def circuit(phase, y):
        qml.RY(0.4, 0)
        qml.GlobalPhase(phase, wires=0)
        qml.RY(y, 1)
        return qml.probs(wires=[0, 1])

    phase = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    weights = torch.arange(4, dtype=torch.float64)
    mine = qhybrid.qnode(qhybrid.device(device, wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    g = torch.autograd.grad(mine(phase, y) @ weights, (phase, y), create_graph=True)
    h = torch.autograd.grad(ref(phase, y) @ weights, (phase, y), create_graph=True)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    second = torch.autograd.grad(g[0], (phase, y), allow_unused=True)
    assert all(abs(float(s)) < TOL for s in second if s is not None)  # (default.qubit's: zeros)

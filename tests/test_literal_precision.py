"""Constant gate angles (Python numbers, numpy scalars) take the precision of the computation, whatever
torch's default dtype is: every entry point agrees with default.qubit to 1e-12 in float64 (issue 20, item 1).

A Python float became a tensor of torch's default dtype (float32) before reaching the complex128
simulation: ``qml.RY(0.7, 0)`` was off by 7e-9 with ``torch.set_default_dtype(torch.float32)``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pennylane as qml
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qhybrid

TOL = 1e-12
DEFAULT_DTYPES = (torch.float32, torch.float64)


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    before = torch.get_default_dtype()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qml.exceptions.PennyLaneDeprecationWarning)
        yield
    torch.set_default_dtype(before)


# --- the examples -----------------------------------------------------------------------


@pytest.mark.parametrize("default", DEFAULT_DTYPES)
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop", None])
def test_literal_angle_through_qnode_is_exact(default, diff_method):
    torch.set_default_dtype(default)

    @qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method=diff_method)
    def c(a):
        qml.RX(a, wires=0)
        qml.RY(0.7, wires=0)
        return qml.expval(qml.Z(0))

    a = torch.tensor(0.3, dtype=torch.float64, requires_grad=diff_method is not None)
    out = c(a)
    assert out.dtype == torch.float64
    assert abs(out.item() - math.cos(0.3) * math.cos(0.7)) < 1e-15
    if diff_method is not None:
        out.backward()
        assert abs(a.grad.item() + math.sin(0.3) * math.cos(0.7)) < 1e-15


@pytest.mark.parametrize("default", DEFAULT_DTYPES)
def test_all_literal_circuit_through_execute_is_exact(default):
    torch.set_default_dtype(default)
    tape = qml.tape.QuantumScript(
        [qml.RY(np.pi / 4, 0), qml.Rot(0.1, np.float64(0.2), 0.3, 1), qml.IsingXX(1, [0, 1])],
        [qml.expval(qml.Z(0)), qml.probs(wires=[1])],
    )
    ours = qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))[0]
    ref = qml.execute([tape], qml.device("default.qubit", wires=2))[0]
    for a, b in zip(ours, ref):
        assert a.dtype == torch.float64
        np.testing.assert_allclose(a.numpy(), b, atol=1e-15, rtol=0)


@pytest.mark.parametrize("default", DEFAULT_DTYPES)
def test_literal_angles_in_a_shifted_and_stacked_run(default):
    """Parameter-shift stacks the shifted copies of a tape; literals beside the shifted tensors stay exact."""
    torch.set_default_dtype(default)
    x = torch.tensor([0.4, -1.1, 0.9, 2.0], dtype=torch.float64, requires_grad=True)

    def body(x):
        for i in range(4):
            qml.RX(x[i], wires=i % 2)
            qml.RY(0.1 * (i + 1), wires=(i + 1) % 2)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(body)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(body)
    (g,) = torch.autograd.grad(ours(x), x)
    (g_ref,) = torch.autograd.grad(ref(x), x)
    torch.testing.assert_close(g, g_ref, atol=TOL, rtol=0)


@pytest.mark.parametrize("n_params", [1, 8])  # one by one, and the vectorised shift of several parameters
def test_shifts_of_float32_parameters_are_formed_in_the_devices_precision(n_params):
    """A float32 parameter on a complex128 device: ``p + pi/2`` formed in float32 was rounded before the
    float64 simulation saw it, so gradients missed the correctly rounded float32 value by an ulp."""
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.uniform(-3, 3, size=(5, n_params)), dtype=torch.float32, requires_grad=True)
    tapes = [
        qml.tape.QuantumScript([op for k in range(n_params) for op in (qml.RX(x[i, k], 0), qml.RY(0.3, 0))], [qml.expval(qml.Z(0))])
        for i in range(5)
    ]
    res = qhybrid.execute(tapes, qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")
    torch.stack(list(res)).sum().backward()
    ref = x.detach().double().requires_grad_(True)
    ref_tapes = [t.bind_new_parameters([p for k in range(n_params) for p in (ref[i, k], 0.3)], list(range(2 * n_params)))
                 for i, t in enumerate(tapes)]
    torch.stack(list(qml.execute(ref_tapes, qml.device("default.qubit", wires=1), diff_method="backprop"))).sum().backward()
    assert x.grad.dtype == torch.float32
    assert torch.equal(x.grad, ref.grad.float())  # the exact gradient, correctly rounded


def test_numpy_float32_angles_are_taken_at_their_float32_value():
    """A numpy float32 angle is the number it holds (its float32 value, widened exactly); the circuit still
    runs in the device's precision, as with a float32 torch parameter."""
    a32 = np.float32(0.7)
    tape = qml.tape.QuantumScript([qml.RY(np.array([a32, a32]), 0)], [qml.expval(qml.Z(0))])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))
    assert res.dtype == torch.float64
    np.testing.assert_allclose(res.numpy(), np.cos(np.float64(a32)), atol=1e-15, rtol=0)


def test_single_precision_device_computes_literals_in_float32():
    torch.set_default_dtype(torch.float64)
    tape = qml.tape.QuantumScript([qml.RY(0.7, 0)], [qml.expval(qml.Z(0))])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1, dtype=torch.complex64))
    assert res.dtype == torch.float32
    assert abs(res.item() - math.cos(0.7)) < 1e-6


# --- the property: random circuits mixing literal and tensor angles through every entry point ---------


GATES = {"RX": (1, 1), "RY": (1, 1), "RZ": (1, 1), "PhaseShift": (1, 1), "Rot": (1, 3), "U3": (1, 3),
         "CRX": (2, 1), "IsingXX": (2, 1), "IsingZZ": (2, 1), "MultiRZ": (2, 1), "CNOT": (2, 0), "Hadamard": (1, 0)}
N_WIRES = 3

angle = st.floats(-2 * math.pi, 2 * math.pi, allow_nan=False, allow_infinity=False)
literal = st.one_of(
    angle,                                                              # a Python float
    angle.map(np.float64),                                              # a numpy scalar
    st.sampled_from([math.pi / 4, math.pi / 3, 0.7, 0.1, 2.0 / 3.0]),   # typical constants
    st.integers(-3, 3),                                                 # a Python int
)


@st.composite
def mixed_circuits(draw):
    """Gates whose angles are ("lit", value) or ("arg", k): the k-th entry of a tensor argument."""
    gates, n_args = [], 0
    for _ in range(draw(st.integers(2, 8))):
        name = draw(st.sampled_from(sorted(GATES)))
        k, n_params = GATES[name]
        wires = draw(st.permutations(range(N_WIRES)))[:k]
        params = []
        for _ in range(n_params):
            if draw(st.booleans()):
                params.append(("lit", draw(literal)))
            else:
                params.append(("arg", n_args))
                n_args += 1
        gates.append((name, wires, params))
    if not n_args:  # a tensor angle somewhere, so a batch axis reaches the circuit
        gates.append(("RX", [draw(st.integers(0, N_WIRES - 1))], [("arg", 0)]))
        n_args = 1
    values = draw(st.lists(angle, min_size=n_args, max_size=n_args))
    return gates, values


def _record(gates, x, *, reference=False):
    """``reference``: literals as float64 torch constants of the same value (default.qubit cannot mix Python
    or numpy numbers with torch tensors in one Rot / U3 matrix)."""
    for name, wires, params in gates:
        args = [
            (torch.tensor(float(v), dtype=torch.float64) if reference else v) if kind == "lit" else x[..., v]
            for kind, v in params
        ]
        getattr(qml, name)(*args, wires=wires)


def _measure():
    return [qml.expval(qml.Z(0)), qml.expval(qml.X(1) @ qml.Y(2))]


def _reference(gates, x):
    @qml.qnode(qml.device("default.qubit", wires=N_WIRES), interface="torch", diff_method="backprop")
    def ref(x):
        _record(gates, x, reference=True)
        return _measure()

    return _value_and_grad(ref, x)


def _value_and_grad(fn, x):
    x = x.detach().clone().requires_grad_(True)
    out = torch.stack(list(fn(x)), -1)
    return out.detach(), _grad(out, x)


def _grad(out, x):
    if not out.requires_grad:  # no tensor angle in the circuit
        return torch.zeros_like(x)
    (g,) = torch.autograd.grad(out.sum() + (out**2).sum(), x, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def _entry_points(gates):
    """name -> function of the angle tensor x (trailing axis: the circuit's tensor angles)."""

    def body(x):
        _record(gates, x)
        return _measure()

    out = {}
    for dm in ("adjoint", "parameter-shift", "backprop"):
        out[f"qnode-{dm}"] = qhybrid.qnode(qhybrid.device("tensornet", wires=N_WIRES), diff_method=dm)(body)

    def via_execute(x):
        with qml.queuing.AnnotatedQueue() as q:
            _record(gates, x)
        tape = qml.tape.QuantumScript(q.queue, _measure())
        return qhybrid.execute([tape], qhybrid.device("tensornet", wires=N_WIRES))[0]

    out["execute"] = via_execute
    plugin = qml.device("qhybrid.tensornet", wires=N_WIRES)
    for dm in ("best", "adjoint", "parameter-shift"):
        out[f"plugin-{dm}"] = qml.qnode(plugin, interface="torch", diff_method=dm)(body)

    # TorchLayer: the tensor angles are the layer's inputs, the literals stay literals
    @qhybrid.qnode(qhybrid.device("tensornet", wires=N_WIRES))
    def layer_qnode(inputs, w):
        _record(gates, inputs)
        qml.RZ(w, wires=0)  # commutes with the Z(0) readout; the X(1)Y(2) readout is on other wires
        return _measure()

    layer = qhybrid.TorchLayer(layer_qnode, {"w": 1}).double()
    out["TorchLayer"] = lambda x: layer(x).unbind(-1)
    return out


def _exp_qlayer_case(gates, values):
    """ExpQLayer with a callable ansatz holding the literal angles; its weight carries the tensor angles."""
    n = len(values)

    def ansatz(w, wires):
        _record(gates, w)

    layer = qhybrid.ExpQLayer(
        N_WIRES, 1, ansatz=ansatz, weight_shape=(n,), observables=[qml.Z(0), qml.X(1) @ qml.Y(2)],
        encoding="angle", rotation="Z", n_features=1,
    ).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([values], dtype=torch.float64))
    data = torch.zeros(1, dtype=torch.float64)  # RZ(0) on wire 0: the identity
    out = layer(data)
    return out.detach(), _grad(out, layer.weight)[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mixed_circuits(), default=st.sampled_from(DEFAULT_DTYPES), batch=st.sampled_from([None, 2]))
def test_mixed_literal_and_tensor_angles_agree_with_default_qubit(case, default, batch):
    torch.set_default_dtype(default)
    try:
        gates, values = case
        rng = np.random.default_rng(len(values))
        x = torch.tensor(values, dtype=torch.float64)
        if batch is not None:
            x = x + torch.tensor(rng.normal(size=(batch, len(values))), dtype=torch.float64)
        ref_out, ref_grad = _reference(gates, x)
        for name, fn in _entry_points(gates).items():
            if batch is not None and name in ("plugin-parameter-shift",):
                continue  # PennyLane's own parameter-shift refuses trainable broadcast inputs
            out, g = _value_and_grad(fn, x)
            torch.testing.assert_close(out, ref_out, atol=TOL, rtol=0, msg=lambda m: f"{name}: {m}")
            torch.testing.assert_close(g, ref_grad, atol=TOL, rtol=0, msg=lambda m: f"{name} gradient: {m}")
        out, g = _exp_qlayer_case(gates, values)
        ref_out, ref_grad = _reference(gates, torch.tensor(values, dtype=torch.float64))
        torch.testing.assert_close(out, ref_out, atol=TOL, rtol=0, msg=lambda m: f"ExpQLayer: {m}")
        torch.testing.assert_close(g, ref_grad, atol=TOL, rtol=0, msg=lambda m: f"ExpQLayer gradient: {m}")
    finally:
        torch.set_default_dtype(torch.float64)

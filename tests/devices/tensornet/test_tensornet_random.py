"""Random circuits over 40 gate types and every measurement kind, with and without broadcasting:
results and gradients of both JPCs against PennyLane default.qubit (torch backprop) to 1e-10."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import qhybrid
from qhybrid.errors import GradientError

from _circuits import GATE_NAMES, build_tape, circuits, flat, grads, loss_of, reference

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-10


def _compare(res, ref):
    assert type(res) is type(ref) or (isinstance(res, tuple) and isinstance(ref, tuple))
    a, b = flat(res), flat(ref)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape
        assert x.dtype == y.dtype
        torch.testing.assert_close(x, y, atol=TOL, rtol=0)


def test_gate_table_is_broad():
    assert len(GATE_NAMES) >= 25


@SETTINGS
@given(spec=circuits())
def test_adjoint_results_and_gradients(spec):
    ref, ref_leaves = reference(spec, spec.n_wires)
    dev = qhybrid.device("tensornet", wires=spec.n_wires)
    tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
    _compare(res, ref)
    for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@SETTINGS
@given(spec=circuits(measurement_kinds=["expval_z", "expval_word", "expval_ham", "expval_herm",
                                        "expval_sum", "var_word", "var_herm", "probs", "probs_all", "density"]))
def test_parameter_shift_results_and_gradients(spec):
    ref, ref_leaves = reference(spec, spec.n_wires)
    dev = qhybrid.device("tensornet", wires=spec.n_wires)
    tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], dev, diff_method="parameter-shift")
    _compare(res, ref)
    for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=circuits(measurement_kinds=["expval_z", "expval_ham", "var_word", "probs"]))
def test_backprop_results_and_gradients(spec):
    ref, ref_leaves = reference(spec, spec.n_wires)
    dev = qhybrid.device("tensornet", wires=spec.n_wires)
    tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], dev, diff_method="backprop")
    _compare(res, ref)
    for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=circuits(measurement_kinds=["expval_z", "expval_word", "probs", "var_word"]))
def test_complex64_within_1e5(spec):
    ref, _ = reference(spec, spec.n_wires)
    dev = qhybrid.device("tensornet", wires=spec.n_wires, dtype=torch.complex64)
    tape, _ = build_tape(spec)
    (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
    for x, y in zip(flat(res), flat(ref)):
        assert x.dtype == torch.float32
        torch.testing.assert_close(x.double(), y, atol=1e-5, rtol=0)


def test_parameter_shift_refuses_state():
    import pennylane as qml

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.state()])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")
    with pytest.raises(GradientError, match="qml.state"):
        res.abs().sum().backward()


def _single_gate_spec(name, broadcast):
    import numpy as np

    from _circuits import FIXED_GATES, PARAM_GATES, CircuitSpec, GateSpec

    rng = np.random.default_rng(abs(hash(name)) % 2**31)
    n = 3
    k = FIXED_GATES.get(name) or (PARAM_GATES[name][0] if name in PARAM_GATES else (2 if name == "QubitUnitary" else 3))
    k = k or 2
    wires = [int(w) for w in rng.permutation(n)[:k]]
    # a dense state first so every matrix entry matters, then the gate, then a mixing layer
    pre = [GateSpec("Rot", [w], [float(v) for v in rng.uniform(-3, 3, 3)]) for w in range(n)]
    pre += [GateSpec("CNOT", [0, 1]), GateSpec("CNOT", [1, 2])]
    gate = GateSpec(name, wires)
    if name == "QubitUnitary":
        from scipy.stats import unitary_group

        gate.params = [unitary_group.rvs(2**k, random_state=rng)]
    elif name == "MultiControlledX":
        gate.extra = {"control_values": [1, 0]}
    if name == "PauliRot":
        gate.extra = {"pauli_word": "XYZ"[:k]}
    if name in PARAM_GATES:
        n_params = PARAM_GATES[name][1]
        gate.params = [rng.uniform(-3, 3, size=2) if broadcast else float(rng.uniform(-3, 3)) for _ in range(n_params)]
    post = [GateSpec("RY", [w], [float(rng.uniform(-3, 3))]) for w in range(n)]
    meas = [("expval_word", [0, 1, 2], 1), ("probs_all", [0, 1, 2], 2), ("var_herm", [2, 1, 0], 3)]
    return CircuitSpec(n, None, pre + [gate] + post, meas, 2 if broadcast else None)


@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("name", GATE_NAMES)
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_each_gate(name, broadcast, diff_method):
    from _circuits import NO_TORCH_BROADCAST, PARAM_GATES

    if broadcast and (name not in PARAM_GATES or name in NO_TORCH_BROADCAST):
        pytest.skip("only parametrised gates broadcast (IsingXY's PennyLane reference cannot)")
    spec = _single_gate_spec(name, broadcast)
    ref, ref_leaves = reference(spec, spec.n_wires)
    tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=3), diff_method=diff_method)
    _compare(res, ref)
    for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)

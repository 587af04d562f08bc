"""Parameter-shift through operators without shift rules of their own (powers, products, controlled powers,
QuantumPhaseEstimation, conditional ones such as ``qml.cond(m, qml.U3)``): they are decomposed before the run, as
PennyLane's parameter-shift does (they were refused with a GradientError); values and gradients against
default.qubit to 1e-10, plain and static qnodes, batched. Templates the device decomposes anyway are left to its cached preprocessing."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import GradientError
from qhybrid.gradients.shift_expand import expanded_for_shift_rules

TOL = 1e-10


def _powers(x):
    qml.RY(x[0], 0)
    qml.Hadamard(1)
    qml.pow(qml.RX(x[1], wires=0), 3)
    qml.ctrl(qml.pow(qml.RY(x[0], 1), 2), control=0)
    qml.adjoint(qml.pow(qml.CRX(x[1], wires=[1, 0]), 2))
    return qml.expval(qml.Z(0) @ qml.X(1))


def _product(x):
    qml.Hadamard(0)
    qml.prod(qml.RX(x[1], 0), qml.RY(2 * x[0], 1))
    return qml.expval(qml.Y(0) + qml.X(1))


def _phase_estimation(x):
    qml.RY(x[0], 0)
    qml.QuantumPhaseEstimation(qml.RX(x[1], wires=0), estimation_wires=[1, 2])
    return qml.expval(qml.Z(1))


CASES = {"powers": (_powers, 2), "product": (_product, 2), "phase estimation": (_phase_estimation, 3)}


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_operators_without_shift_rules_are_differentiated_through_their_parts(case, static, batched):
    body, n = CASES[case]
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="parameter-shift", static_structure=static)(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch")
    for x0 in ([0.4, 0.9], [1.3, -0.2]):
        x = torch.tensor([x0, [0.1, 0.7]] if batched else x0, dtype=torch.float64).T if batched else torch.tensor(x0, dtype=torch.float64)
        x = x.clone().requires_grad_()
        y = x.detach().clone().requires_grad_()
        got, want = ours(x), ref(y)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        (g,), (h,) = torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), y)
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_templates_the_device_decomposes_are_left_to_it():
    dev = qhybrid.device("tensornet", wires=3)
    w = torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.StronglyEntanglingLayers(w, wires=range(3))], [qml.expval(qml.Z(0))])
    from qhybrid.devices.tensornet.plugin.preprocess import runs_whole

    assert expanded_for_shift_rules(tape, runs_whole(dev)) is tape


def _controlled_u3(x):
    qml.ctrl(qml.U3, control=1)(x, x, 0.3, wires=0)
    qml.Hadamard(1)
    qml.CRX(x, wires=[1, 0])
    return qml.expval(qml.Z(0) @ qml.X(1))


def test_a_controlled_gate_with_a_batch_of_one_is_named_not_crashed():
    """PennyLane's ``Controlled.has_decomposition`` (and its decomposition) index a batch of one as the matrix
    (an IndexError out of parameter-shift's expansion): the value runs, the gradient names the gate; a batch of two
    decomposes and matches default.qubit."""
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(_controlled_u3)
    ref = qml.QNode(_controlled_u3, qml.device("default.qubit", wires=2), interface="torch")
    x = torch.tensor([0.4, 1.0], dtype=torch.float64, requires_grad=True)
    got, want = ours(x), ref(x)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0], atol=TOL, rtol=0)
    one = torch.tensor([0.4], dtype=torch.float64, requires_grad=True)
    got = ours(one)
    torch.testing.assert_close(got, ref(one), atol=TOL, rtol=0)
    with pytest.raises(GradientError, match=r"C\(U3\)"):
        torch.autograd.grad(got.sum(), one)


def _conditional_u3(x):
    qml.RX(x[0], 0)
    m = qml.measure(0)
    qml.cond(m, qml.U3)(x[1], x[2], 0.4, wires=1)
    qml.RY(x[1], 0)
    return qml.expval(qml.Z(1) + 0.5 * qml.X(1))


def _conditional_else(x):
    qml.RY(x[0], 0)
    qml.Hadamard(1)
    m = qml.measure(0)
    qml.cond(m, qml.U3, qml.Rot)(x[1], x[2], x[0], wires=1)
    return qml.expval(qml.Y(1))


def _two_measurements(x):
    qml.RX(x[0], 0)
    qml.RY(x[1], 1)
    m0, m1 = qml.measure(0), qml.measure(1)
    qml.cond(m0 & ~m1, qml.U3)(x[2], x[0], x[1], wires=2)
    qml.cond(m0 + m1 == 1, qml.RX)(x[2], wires=2)
    return qml.expval(qml.X(2) @ qml.Z(0))


CONDITIONAL = {"u3": (_conditional_u3, 2, 1), "else branch": (_conditional_else, 2, 1), "two measurements": (_two_measurements, 3, 2)}


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("case", list(CONDITIONAL))
def test_conditional_operators_without_shift_rules_are_differentiated_through_their_parts(case, static):
    """``qml.cond(m, qml.U3)``: deferred, it is a controlled ``U3``, which has no shift rule (refused by name before);
    its parts are conditioned instead. The reference is default.qubit's backprop: its own parameter-shift of these
    circuits is off by ~2e-9 (its decomposition of the controlled gate)."""
    body, n, measured = CONDITIONAL[case]
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n + measured), diff_method="parameter-shift", static_structure=static)(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=n + measured), interface="torch", diff_method="backprop")
    for x0 in ([0.4, 0.7, -0.3], [1.3, -0.2, 2.1]):
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        got, want = ours(x), ref(x)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        (g,), (h,) = torch.autograd.grad(got, x), torch.autograd.grad(want, x)
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_a_conditional_gate_with_a_shift_rule_stays_whole():
    x = torch.tensor([0.3, 0.5, 0.7], dtype=torch.float64, requires_grad=True)
    with qml.queuing.AnnotatedQueue() as q:
        m = qml.measure(0)
        qml.cond(m, qml.RX)(x[0], wires=1)
        qml.cond(m, qml.U3)(x[0], x[1], x[2], wires=1)
    tape = qml.tape.QuantumScript.from_queue(q)
    names = [op.name for op in expanded_for_shift_rules(tape).operations]
    assert names[:2] == ["MidMeasureMP", "Conditional(RX)"]
    assert "Conditional(U3)" not in names and all(name.startswith("Conditional(") for name in names[1:])


def _state_prep(x, w):
    qml.StatePrep(x / torch.linalg.norm(x, dim=-1, keepdim=True), wires=[0, 1], validate_norm=False)
    qml.RY(w, 0)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


@pytest.mark.parametrize("batched", [False, True])
def test_a_trainable_state_preparation_is_decomposed_batched_too(batched):
    """A batch of states is ``[B, 2**n]``: read as a trainable matrix (which the decomposition's angles cannot
    differentiate), it stayed, and its shift rule was refused by name ("no parameter-shift rule"; ExpQLayer's
    amplitude encoding under parameter-shift too; found by a fuzzing helper)."""
    x = torch.tensor([[0.3, 0.5, 0.1, 0.8], [0.9, 0.1, 0.4, 0.2], [0.2, 0.2, 0.7, 0.1]], dtype=torch.float64)
    x = (x if batched else x[0]).requires_grad_()
    w = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(_state_prep)(x, w)
    want = qml.QNode(_state_prep, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(x, w)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got.sum(), (x, w)), torch.autograd.grad(want.sum(), (x, w))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)

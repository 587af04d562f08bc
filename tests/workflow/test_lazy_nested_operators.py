"""Templates that keep the operator they wrap (``QuantumPhaseEstimation``'s unitary, a ``Reflection``'s base,
``AmplitudeAmplification``'s U and O) or whose parts PennyLane cannot copy from lazily recorded values
(``PrepSelPrep`` of trainable coefficients): gradients reach every parameter (they were silently zero for the
wrapped operator's parameter), against default.qubit to 1e-10. The kept operators take their values in place; where
PennyLane cannot (PrepSelPrep's parts), the plain qnode records from the real tensors."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _qpe(x):
    qml.RY(x[0], 0)
    qml.QuantumPhaseEstimation(qml.RX(x[1], wires=0), estimation_wires=[1, 2])
    return qml.expval(qml.Z(1))


def _reflection(x):
    qml.RX(x[0], 0)
    qml.RX(0.5, 1)
    qml.Reflection(qml.RY(x[1], wires=0), alpha=0.7, reflection_wires=[0])
    return qml.expval(qml.Z(0) @ qml.Z(1))


def _amplification(x):
    qml.RX(x[0], 0)
    qml.AmplitudeAmplification(qml.RY(x[1], wires=0), qml.RZ(0.4, wires=0), iters=1)
    return qml.expval(qml.Z(0))


def _prep_sel_prep(x):
    qml.Hadamard(0)
    qml.PrepSelPrep(qml.dot(x, [qml.X(0), qml.Z(0)]), control=[1])
    return qml.expval(qml.X(0))


CASES = {"QuantumPhaseEstimation": (_qpe, 3), "Reflection": (_reflection, 2),
         "AmplitudeAmplification": (_amplification, 1), "PrepSelPrep": (_prep_sel_prep, 2)}


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_the_wrapped_operators_parameters_get_their_gradients(case, diff_method, static):
    body, n = CASES[case]
    if diff_method == "parameter-shift" and case in ("PrepSelPrep",):
        pytest.skip("no shift rule for its controlled powers / prepared state (a clear GradientError)")
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method, static_structure=static)(body)
    ref = qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch")
    for x0 in ([0.4, 0.9], [1.1, -0.3]):  # two calls: the second records the same way
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        y = x.detach().clone().requires_grad_()
        got, want = ours(x), ref(y)
        torch.testing.assert_close(got, want.to(got.dtype), atol=TOL, rtol=0)
        (g,), (h,) = torch.autograd.grad(got, x), torch.autograd.grad(want, y)
        assert h.abs().min() > 1e-3  # every parameter matters
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def _select(x):
    qml.Hadamard(2)
    qml.Select([qml.RX(x[0], 0), qml.RY(-x[1], 1)], control=[2])
    return qml.expval(qml.Z(0) + qml.X(1))


def _qpe_of_adjoint(x):
    qml.RY(x[0], 0)
    qml.QuantumPhaseEstimation(qml.adjoint(qml.RX(x[1], wires=0)), estimation_wires=[1, 2])
    return qml.probs(wires=[1, 2])


RUN_ONCE = {"QuantumPhaseEstimation": (_qpe, 3), "Reflection": (_reflection, 2), "Select": (_select, 3),
            "QuantumPhaseEstimation of an adjoint": (_qpe_of_adjoint, 3)}


@pytest.mark.parametrize("case", list(RUN_ONCE))
def test_the_function_runs_once_a_call(case):
    """The kept operator's lazy parameters are given their values in place: the function was recorded a second time
    from the real tensors, running its side effects twice (a draw from a seeded generator in it: the circuit of the
    second draw, 0.0530 for default.qubit's 0.0386; found by a fuzzing helper)."""
    body, n = RUN_ONCE[case]
    runs = []

    def counted(x):
        runs.append(1)
        return body(x)

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(counted)
    ref = qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch")
    for x0 in ([0.4, 0.9], [1.1, -0.3], [2.5, 0.2]):
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        runs.clear()
        got, want = ours(x), ref(x)
        assert len(runs) == 1
        torch.testing.assert_close(got, want.to(got.dtype), atol=TOL, rtol=0)
        weights = torch.arange(1.0, 1 + got.numel(), dtype=torch.float64).reshape(got.shape)
        (g,), (h,) = torch.autograd.grad((got * weights).sum(), x), torch.autograd.grad((want * weights).sum(), x)
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
@pytest.mark.parametrize("wires", [[0], [0, 1]])
def test_an_evolution_of_a_hermitian_matrix(wires, diff_method, static):
    """``qml.evolve(qml.Hermitian(M), t)``: PennyLane's binding of the recorded evolution rebinds its generator
    from what follows ``t`` in the same list, which left the ``Hermitian`` without its matrix (a crash, on
    every method)."""
    rng = torch.Generator().manual_seed(len(wires))
    a = torch.randn(2 ** len(wires), 2 ** len(wires), dtype=torch.complex128, generator=rng)
    m = (a + a.mH).numpy()

    def circuit(t):
        qml.Hadamard(0)
        qml.RY(0.3, wires=1)
        qml.evolve(qml.Hermitian(m, wires=wires), t)
        return qml.expval(qml.X(0) + qml.Z(1) @ qml.Y(0))

    t, u = (torch.tensor(0.7, dtype=torch.float64, requires_grad=True) for _ in range(2))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)
    got = node(circuit)(t)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(u)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (g,), (h,) = torch.autograd.grad(got, t), torch.autograd.grad(want, u)
    assert h.abs() > 1e-3
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)

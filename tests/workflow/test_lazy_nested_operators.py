"""Templates that keep the operator they wrap (``QuantumPhaseEstimation``'s unitary, a ``Reflection``'s base,
``AmplitudeAmplification``'s U and O) or whose parts PennyLane cannot copy from lazily recorded values
(``PrepSelPrep`` of trainable coefficients): a plain qnode records them from the real tensors, so gradients reach
every parameter (they were silently zero for the wrapped operator's parameter), against default.qubit to 1e-10."""

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
    if diff_method == "parameter-shift" and case in ("QuantumPhaseEstimation", "PrepSelPrep"):
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

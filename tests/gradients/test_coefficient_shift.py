"""Parameter-shift of an observable's trainable coefficients (``gradients/observable_shift.py``): refused by name
before (PennyLane's parameter-shift differentiates them); values, gradients and Hessians against default.qubit's
backprop to 1e-10, on sums, Hamiltonians, scaled sentences and products of sums, batched, beside other
measurements; variances and non-affine observables refused by name."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import GradientError

from _circuits import check_untrained_constants

TOL = 1e-10
N = 3
WORDS = [qml.Z(0), qml.X(1) @ qml.Y(2), qml.Y(0) @ qml.Z(1), qml.X(2)]

BUILDS = {
    "dot": lambda c: qml.dot(c, WORDS),
    "Hamiltonian": lambda c: qml.Hamiltonian(c, WORDS),
    "scaled sentences": lambda c: qml.sum(*(c[k] * (WORDS[k] + 0.5 * WORDS[(k + 1) % 4]) for k in range(4))),
    "product of sums": lambda c: qml.prod(c[0] * qml.Z(0) + c[1] * qml.X(0), c[2] * qml.Y(1) + c[3] * qml.Z(2)),
    # a term holding constant data (refused before: every leaf had to hold none)
    "a constant Hermitian term": lambda c: qml.Hamiltonian(
        c, [qml.Z(0), qml.Hermitian(np.array([[1.0, 0.5], [0.5, -0.3]]), wires=1), qml.Y(0) @ qml.Z(1), qml.X(2)]
    ),
}
EXPANDED = {  # the reference's form: default.qubit's backprop through a product of sums of tensor coefficients
    # gives zero gradients once PennyLane has built such a product before (in this process, any values)
    "product of sums": lambda c: qml.Hamiltonian(
        torch.stack([c[0] * c[2], c[0] * c[3], c[1] * c[2], c[1] * c[3]]),
        [qml.Z(0) @ qml.Y(1), qml.Z(0) @ qml.Z(2), qml.X(0) @ qml.Y(1), qml.X(0) @ qml.Z(2)],
    ),
}


def _circuit(build, measure: str = "expval", reference: bool = False):
    made = EXPANDED.get(build, BUILDS[build]) if reference else BUILDS[build]

    def circuit(x, c):
        for w in range(N):
            qml.RY(x[..., w], wires=w)
        qml.CNOT([0, 1])
        qml.CRX(x[..., 0] * 0.7, wires=[1, 2])
        if measure == "both":
            return qml.expval(made(c)), qml.probs(wires=[0])
        return qml.probs(wires=[0]) if measure == "probs" else qml.expval(made(c))

    return circuit


def _loss(out):
    return (out[0].sum() + (out[1] * torch.arange(1.0, 3.0, dtype=torch.float64)).sum()) if isinstance(out, tuple) else out.sum()


@pytest.mark.parametrize("beside", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("build", list(BUILDS))
def test_coefficients_are_differentiated(build, batched, beside):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="parameter-shift")(
        _circuit(build, "both" if beside else "expval")
    )
    ref = {m: qml.QNode(_circuit(build, m, reference=True), qml.device("default.qubit", wires=N), interface="torch",
                        diff_method="backprop") for m in ("expval", "probs")}  # fmt: skip
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.normal(size=(3, N) if batched else N), dtype=torch.float64, requires_grad=True)
    c = torch.tensor(rng.normal(size=4), dtype=torch.float64, requires_grad=True)
    got = ours(x, c)
    want = (ref["expval"](x, c), ref["probs"](x, c)) if beside else ref["expval"](x, c)
    for g, w in zip(got if beside else (got,), want if beside else (want,)):
        torch.testing.assert_close(g, w, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(_loss(got), (x, c)), torch.autograd.grad(_loss(want), (x, c))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_hessian_in_angles_and_coefficients():
    """The angles' shifted runs measured the tape's own coefficients, not the variant's: a Hessian's mixed
    derivatives were off by up to 0.36."""
    circuit = _circuit("Hamiltonian")
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="parameter-shift", max_diff=2)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    both = torch.tensor([0.3, -0.8, 1.2, 0.5, -1.1, 0.9, 0.25], dtype=torch.float64)
    got = torch.autograd.functional.hessian(lambda v: ours(v[:N], v[N:]), both)
    want = torch.autograd.functional.hessian(lambda v: ref(v[:N], v[N:]), both)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)


@pytest.mark.parametrize(
    "measure, match",
    [
        (lambda c: qml.var(qml.dot(c, WORDS)), "variance"),
        (lambda c: qml.expval(qml.pow(qml.dot(c, WORDS), 3)), "affine"),
    ],
)
def test_what_is_not_affine_in_its_coefficients_is_refused(measure, match):
    def circuit(x, c):
        qml.RY(x, 0)
        return measure(c)

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="parameter-shift")(circuit)
    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.5, -1.0, 0.3, 0.2], dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradientError, match=match):
        torch.autograd.grad(node(x, c), (x, c))


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("measure", [qml.expval, qml.var])
def test_untrained_coefficients_that_change_between_calls(measure, static):
    """Coefficients passed as tensors that need no gradient, new values each call: the angles' shifted runs measured
    the cached tape's (the first call's) coefficients, a silent wrong gradient (0.44 off for the expectation, 2.1
    for the variance)."""

    def circuit(x, c):
        qml.RY(x[0], 0)
        qml.CNOT([0, 1])
        qml.RX(x[1], 1)
        return measure(qml.Hamiltonian(c, [qml.Z(0), qml.X(1) @ qml.Z(0)]))

    def reference(x, c):  # (default.qubit's variance of tensor coefficients fails: numbers)
        qml.RY(x[0], 0)
        qml.CNOT([0, 1])
        qml.RX(x[1], 1)
        return measure(qml.Hamiltonian([float(v) for v in c], [qml.Z(0), qml.X(1) @ qml.Z(0)]))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift", static_structure=static)(circuit)
    ref = qml.QNode(reference, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    check_untrained_constants(ours, ref, [0.3, 0.9], ([0.5, 1.0], [2.0, -3.0], [-1.0, 0.25]), TOL)

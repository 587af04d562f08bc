"""A parameter-shift step stacks its shifted circuits as rows of one state; where that stack does not fit
``max_memory`` and a single row does, the rows run in stacks half as large (``_simulate._run_in_stacks``), not
refused: a 26-wire step's 48 shifted circuits were refused as one 48-row stack (120 GiB) where each fits. Values and
gradients are default.qubit's. A gate whose matrix differs by row (a stacked shift, a broadcast angle) on a large
state runs row by row of its matrix, holding no D copies of the state (``lead_gates``): 24 GiB were asked for at a
3-wire gate on a stack of three 26-wire states."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.statevector import lead_gates
from qhybrid.errors import ContractionTooLargeError

TOL = 1e-10
N = 10
STATE_BYTES = 16 << N


def _circuit(t):
    for i in range(N):
        qml.RY(t[i], i)
    for i in range(N - 1):
        qml.IsingXX(t[N + i], wires=[i, i + 1])
    qml.CRot(t[0], t[1], t[2], wires=[3, 7])
    # (every wire's probabilities: the whole state; a density matrix of two wires is cut apart from the expectation
    # and contracted on its own)
    return qml.expval(qml.Z(0) @ qml.X(N - 1)), qml.probs()


def _grads(node):
    t = torch.linspace(0.1, 2.0, 2 * N - 1, dtype=torch.float64).requires_grad_()
    out = node(t)
    (g,) = torch.autograd.grad(out[0] + (out[1] * torch.arange(2**N) / 2**N).sum(), t)
    return [o.detach() for o in out] + [g]


def _reference():
    return _grads(qml.QNode(_circuit, qml.device("default.qubit", wires=N), interface="torch"))


def test_shifted_circuits_run_in_stacks_that_fit():
    dev = qhybrid.device("tensornet", wires=N, max_memory=8 * STATE_BYTES)  # a few rows, not the 40 shifted ones
    for _ in range(2):  # the second step starts from the stack size that fitted
        for a, b in zip(_grads(qhybrid.qnode(dev, diff_method="parameter-shift")(_circuit)), _reference(), strict=True):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert list(dev._cache.stack_limits.values()) and max(dev._cache.stack_limits.values()) < 2 * N


def test_a_circuit_whose_single_run_does_not_fit_is_still_refused():
    dev = qhybrid.device("tensornet", wires=N, max_memory=STATE_BYTES // 4)
    with pytest.raises(ContractionTooLargeError, match="needs (an intermediate of )?about"):
        _grads(qhybrid.qnode(dev, diff_method="parameter-shift")(_circuit))


@pytest.mark.parametrize("diff_method", ["parameter-shift", "adjoint", "backprop"])
def test_gates_of_per_row_matrices_row_by_row(monkeypatch, diff_method):
    """The row-by-row form (used past ``LEAD_BROADCAST_MAX_ELEMENTS``) forced on a small circuit: a broadcast
    2-, 3- and 4-wire gate and parameter-shift's stacks of them."""
    monkeypatch.setattr(lead_gates, "LEAD_BROADCAST_MAX_ELEMENTS", 0)

    def circuit(x, w):
        qml.RY(x[:, 0], 0)
        qml.RX(x[:, 1], 1)
        qml.Hadamard(3)
        qml.IsingXX(x[:, 2], wires=[0, 1])
        qml.CRot(x[:, 0], w[0], w[1], wires=[1, 2])
        qml.DoubleExcitation(x[:, 1], wires=[0, 1, 2, 3])
        qml.IsingYY(w[2], wires=[2, 3])
        return qml.expval(qml.Z(0) @ qml.X(2)), qml.probs([1, 3])

    g = torch.Generator().manual_seed(1)
    x0, w0 = torch.rand(3, 3, generator=g, dtype=torch.float64), torch.rand(3, generator=g, dtype=torch.float64)

    def run(node):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        out = node(x, w)
        return [o.detach() for o in out] + list(torch.autograd.grad(out[0].sum() + (out[1] * torch.arange(4)).sum(), (x, w)))

    ours = run(qhybrid.qnode(qhybrid.device("tensornet", wires=4), diff_method=diff_method)(circuit))
    want = run(qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch"))
    for a, b in zip(ours, want, strict=True):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)

"""Circuits too wide for a state vector: closed <psi|O|psi> networks over light cones."""

import pennylane as qml
import pytest
import torch
from hypothesis import HealthCheck, given, settings

import qhybrid
from qhybrid.errors import ContractionTooLargeError
from qhybrid.devices.tensornet import _simulate

from _circuits import build_tape, circuits, flat, grads, loss_of, reference

CLOSED_KINDS = ["expval_z", "expval_word", "expval_ham", "expval_herm", "expval_sum", "var_word", "var_herm", "probs"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=circuits(measurement_kinds=CLOSED_KINDS))
def test_closed_networks_match_default_qubit(spec, monkeypatch):
    """Force closed-network mode on small circuits so default.qubit can check every path."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    ref, ref_leaves = reference(spec, spec.n_wires)
    tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=spec.n_wires), diff_method="adjoint")
    for x, y in zip(flat(res), flat(ref)):
        assert x.shape == y.shape
        torch.testing.assert_close(x, y, atol=1e-10, rtol=0)
    for g, h in zip(grads(loss_of(res), leaves), grads(loss_of(ref), ref_leaves)):
        torch.testing.assert_close(g, h, atol=1e-10, rtol=0)


def _brickwork(theta, wires):
    n = len(wires)
    for layer in range(2):
        for i, w in enumerate(wires):
            qml.RY(theta[layer, i], wires=w)
        for i in range(layer % 2, n - 1, 2):
            qml.CNOT(wires=[wires[i], wires[i + 1]])


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_30_qubit_local_observables_match_their_light_cone(diff_method):
    n, k = 30, 14
    theta = torch.rand(2, n, dtype=torch.float64, requires_grad=True)
    obs = qml.Z(k) @ qml.X(k + 1)
    dev = qhybrid.device("tensornet", wires=n)

    @qhybrid.qnode(dev, diff_method=diff_method)
    def wide(t):
        _brickwork(t, list(range(n)))
        return qml.expval(obs), qml.probs(wires=[k])

    window = list(range(k - 3, k + 5))  # the light cone of {k, k+1} lies inside after two brick layers
    theta_w = theta.detach()[:, window].clone().requires_grad_()

    @qml.qnode(qml.device("default.qubit", wires=window), interface="torch")
    def narrow(t):
        # the same gates restricted to the window; brick parity follows the global wire index
        for layer in range(2):
            for i, w in enumerate(window):
                qml.RY(t[layer, i], wires=w)
            for w in window[:-1]:
                if w % 2 == layer % 2:
                    qml.CNOT(wires=[w, w + 1])
        return qml.expval(obs), qml.probs(wires=[k])

    a, b = wide(theta), narrow(theta_w)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=1e-10, rtol=0)
    (a[0] + a[1][1]).backward()
    (b[0] + b[1][1]).backward()
    torch.testing.assert_close(theta.grad[:, window], theta_w.grad, atol=1e-10, rtol=0)
    outside = [i for i in range(n) if i not in window]
    assert theta.grad[:, outside].abs().max() == 0


def test_hamiltonian_on_64_qubits_sums_local_terms():
    n = 64
    theta = torch.rand(2, n, dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=n)
    h = qml.dot([0.5, -1.0], [qml.Z(3), qml.Z(60) @ qml.Z(61)])

    @qhybrid.qnode(dev, diff_method=None)
    def f(t):
        _brickwork(t, list(range(n)))
        return qml.expval(h)

    @qhybrid.qnode(dev, diff_method=None)
    def g(t, o):
        _brickwork(t, list(range(n)))
        return qml.expval(o)

    total = 0.5 * g(theta, qml.Z(3)) - g(theta, qml.Z(60) @ qml.Z(61))
    torch.testing.assert_close(f(theta), total, atol=1e-12, rtol=0)


def test_state_of_a_wide_circuit_is_refused():
    from qhybrid.errors import ContractionTooLargeError, UnsupportedOperationError

    tape = qml.tape.QuantumScript([qml.Hadamard(i) for i in range(30)], [qml.state()])
    with pytest.raises((UnsupportedOperationError, ContractionTooLargeError), match="state"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=30))


def _state_circuit(n):
    def f(w):
        for i in range(n):
            qml.RY(w[i], wires=i)
        for i in range(n - 1):
            qml.CNOT(wires=[i, i + 1])
        qml.RX(w[0], wires=n - 1)
        return qml.state()

    return f


def test_full_state_above_20_wires_is_decided_by_the_memory_guard():
    """qml.state() of 21 wires (a 32 MiB state) is simulated; only max_memory refuses it."""
    n = 21
    w = torch.linspace(0.1, 2.0, n, dtype=torch.float64, requires_grad=True)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(_state_circuit(n))
    ref = qml.QNode(_state_circuit(n), qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    got, want = ours(w), ref(w)
    assert got.shape == (2**n,)
    assert torch.allclose(got, want, atol=1e-10, rtol=0)
    (g,) = torch.autograd.grad(got.real[:64].sum(), w)
    (g_ref,) = torch.autograd.grad(want.real[:64].sum(), w)
    assert torch.allclose(g, g_ref, atol=1e-10, rtol=0)
    small = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=1 << 20), diff_method="adjoint")(_state_circuit(n))
    with pytest.raises(ContractionTooLargeError, match="MiB"):
        small(w)

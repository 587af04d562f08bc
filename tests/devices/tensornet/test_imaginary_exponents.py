"""``qml.exp(H, c)`` with an imaginary coefficient (PennyLane's own example: ``qml.exp(qml.X(0), -0.5j * x)``) runs as
the evolution ``qml.evolve(H, i c)``: values and gradients equal default.qubit's, on every method, through
``qhybrid.qnode``, the PennyLane plugin and qhybrid.aer. It was refused ("the engines take real angles"), and
PennyLane's own decomposition of it (and of ``qml.evolve`` of a torch angle, which Aer crashed on) fails on torch
tensors."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _circuit(x, w):
    qml.Hadamard(0)
    qml.RY(0.3, 1)
    qml.RX(0.8, 2)
    qml.exp(qml.X(0) @ qml.Y(1), 1j * x)
    qml.exp(qml.Z(1), -0.5j * w)
    qml.CNOT([1, 2])
    qml.exp(qml.X(0) + 0.5 * qml.Z(1) @ qml.Z(2), -1j * w * x)
    qml.exp(qml.Y(2), 0.25j)
    # (found by a fuzzing helper: a scaled base under parameter-shift ran its scale twice, in the value too; the
    # controlled and adjoint forms were refused; the adjoint of an evolution failed in PennyLane's decomposition,
    # and an evolution of a Hermitian matrix through the plugin lost its matrix)
    qml.exp(qml.s_prod(0.4, qml.Y(0)), -0.5j * x)
    # (through the plugin, PennyLane's rebinding of the tape deep-copied the controlled base and refused its tensor)
    qml.ctrl(qml.exp(qml.X(2), -0.5j * w), 0)
    qml.ctrl(qml.evolve(qml.X(1) + 0.5 * qml.Z(1), x), 2)
    qml.adjoint(qml.exp(qml.Z(0) @ qml.X(1), 0.3j * x))
    qml.adjoint(qml.evolve(qml.Hermitian(_HERMITIAN, 2), w))
    qml.evolve(qml.Hermitian(_HERMITIAN, 1), x)
    return qml.expval(qml.Z(0) @ qml.X(1)), qml.expval(qml.Y(0)), qml.expval(qml.X(1) @ qml.Y(2))


_HERMITIAN = torch.tensor([[0.7, 0.2 - 0.4j], [0.2 + 0.4j, -0.3]], dtype=torch.complex128)


def _pauli_only(x, w):  # (qhybrid.aer: generators of one Pauli word, what it decomposes)
    qml.Hadamard(0)
    qml.RY(0.3, 1)
    qml.exp(qml.X(0) @ qml.Y(1), 1j * x)
    qml.exp(qml.Z(1), -0.5j * w)
    qml.evolve(0.5 * qml.X(0) @ qml.X(1), w)
    qml.adjoint(qml.evolve(qml.Y(1), x))
    return qml.expval(qml.Z(0) @ qml.X(1)), qml.expval(qml.Y(0))


def _run(node, batched: bool):
    x = torch.tensor([0.37, -1.1] if batched else 0.37, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.81, dtype=torch.float64, requires_grad=True)
    out = node(x, w)
    grads = torch.autograd.grad(sum(r.sum() for r in out), (x, w))
    return [r.detach() for r in out] + list(grads)


def _reference(circuit, batched: bool):
    return _run(qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch"), batched)


def _assert_close(got, want):
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
def test_qnode(diff_method, batched):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(_circuit)
    _assert_close(_run(node, batched), _reference(_circuit, batched))


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])  # (PennyLane's parameter-shift fails on the Exp)
def test_plugin(diff_method):
    node = qml.QNode(_circuit, qml.device("qhybrid.tensornet", wires=3), interface="torch", diff_method=diff_method)
    _assert_close(_run(node, True), _reference(_circuit, True))


def test_aer():
    node = qhybrid.qnode(qhybrid.device("aer", wires=3), diff_method="parameter-shift")(_pauli_only)
    _assert_close(_run(node, True), _reference(_pauli_only, True))


def test_a_plugin_adjoint_of_an_evolution_of_a_sum():
    """PennyLane's torch interface rebinds every executed tape's data (to numpy) with its ``bind_new_parameters``,
    which failed on an ``Evolution`` whose generator has coefficients (IndexError); qhybrid mends that binding."""

    def circuit(t):
        qml.Hadamard(0)
        qml.evolve(qml.X(0) + 0.5 * qml.Z(1) @ qml.Z(0), t)
        return qml.expval(qml.Y(0))

    t = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method="adjoint")(t)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(t)
    torch.testing.assert_close(ours, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(ours, t)[0], torch.autograd.grad(want, t)[0], atol=TOL, rtol=0)
    assert abs(float(want)) > 0.1


def test_trajectories_of_a_broadcast_exponential():
    """Under ``noise="trajectories"`` a broadcast evolution crashed (PennyLane's ``ndim_params`` of an ``Evolution``
    reads an attribute its batch check never sets); its means are within 6 standard errors of the exact engine."""

    def circuit(x):
        qml.Hadamard(0)
        qml.exp(qml.X(0) @ qml.Z(1), -0.5j * x)
        qml.evolve(qml.Y(1), x)
        qml.DepolarizingChannel(0.1, wires=0)
        return qml.expval(qml.X(0))

    x = torch.tensor([0.3, 1.2, 2.0], dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=2, noise="trajectories", trajectories=2000, seed=3)
    est = qhybrid.qnode(dev)(circuit)(x)
    exact = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)(x)
    assert torch.all((est - exact).abs() <= 6 * dev.trajectory_standard_errors[0][0] + 1e-12)


@pytest.mark.parametrize("controlled", [False, True])
def test_pennylane_parameter_shift_of_an_exponential_is_refused_with_the_way_out(controlled):
    """PennyLane's parameter-shift shifts ``qml.exp``'s coefficient by a real amount (default.qubit then answers a
    gradient of 0 for cos(x)'s): the shifted gate is refused, under ``qml.ctrl`` too (it was "a complex parameter"),
    with the methods that take it."""

    def circuit(x):
        qml.Hadamard(1)
        gate = lambda: qml.exp(qml.Y(0), -0.5j * x)  # noqa: E731
        qml.ctrl(gate, 1)() if controlled else gate()
        return qml.expval(qml.Z(0))

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    dev = qml.device("qhybrid.tensornet", wires=2)
    node = qml.QNode(circuit, dev, interface="torch", diff_method="parameter-shift")
    with pytest.raises(qhybrid.errors.UnsupportedOperationError, match=r"Exp\) on wires|Exp on wires") as info:
        torch.autograd.grad(node(x), x)
    assert "diff_method='adjoint'" in str(info.value) and "real part" in str(info.value)

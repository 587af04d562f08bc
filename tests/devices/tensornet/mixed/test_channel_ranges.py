"""Tensor strengths outside a channel's range are refused by name, without a host read (they gave numbers:
``DepolarizingChannel(torch.tensor(1.5))`` NaN, ``torch.tensor(-0.2)`` 1.39 where default.mixed raises); valid
ones run as before, equal to default.mixed to 1e-10 with their gradients, and the steady step stays host-free."""

from __future__ import annotations

import re

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.testing import assert_no_host_touches

T = lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True)  # noqa: E731

CHANNELS = {  # name: (maker, valid strengths, invalid strengths, what the message names)
    "AmplitudeDamping": (lambda p, w: qml.AmplitudeDamping(p[0], w), [0.3], [1.2], "gamma"),
    "PhaseDamping": (lambda p, w: qml.PhaseDamping(p[0], w), [0.3], [-0.1], "gamma"),
    "GeneralizedAmplitudeDamping": (lambda p, w: qml.GeneralizedAmplitudeDamping(p[0], p[1], w), [0.3, 0.6], [0.3, 1.6], "p must"),
    "DepolarizingChannel": (lambda p, w: qml.DepolarizingChannel(p[0], w), [0.2], [1.5], "p must"),
    "BitFlip": (lambda p, w: qml.BitFlip(p[0], w), [0.2], [-0.2], "p must"),
    "PhaseFlip": (lambda p, w: qml.PhaseFlip(p[0], w), [0.2], [1.01], "p must"),
    "PauliError": (lambda p, w: qml.PauliError("XY", p[0], wires=[w, 1 - w]), [0.2], [2.0], "p must"),
    "ResetError": (lambda p, w: qml.ResetError(p[0], p[1], w), [0.2, 0.3], [0.7, 0.6], "p_0 + p_1"),
    "ThermalRelaxationError": (lambda p, w: qml.ThermalRelaxationError(p[0], p[1], p[2], p[3], w), [0.1, 100.0, 80.0, 5.0],
                               [0.1, 100.0, 250.0, 5.0], "T_2 must be at most 2 * T_1"),
}  # fmt: skip


def _circuit(make):
    def circuit(x, p):
        qml.RX(x, 0)
        qml.RY(0.7, 1)
        qml.CNOT([0, 1])
        make(p, 0)
        qml.RY(x / 2, 0)
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(0))

    return circuit


DEVICES = {
    "exact": lambda: qhybrid.device("tensornet", wires=2),
    "trajectories": lambda: qhybrid.device("tensornet", wires=2, noise="trajectories", trajectories=4, seed=1),
    "mps trajectories": lambda: qhybrid.device("tensornet", wires=2, method="mps", noise="trajectories", trajectories=4, seed=1),
}


@pytest.mark.parametrize("name", sorted(CHANNELS))
@pytest.mark.parametrize("kind", sorted(DEVICES))
def test_a_tensor_strength_out_of_range_is_refused_by_name(name, kind):
    make, _, bad, what = CHANNELS[name]
    if kind != "exact" and name not in ("DepolarizingChannel", "BitFlip", "PhaseFlip", "PauliError"):
        pytest.skip("trajectories sample Pauli mixtures only")
    f = qhybrid.qnode(DEVICES[kind]())(_circuit(make))
    # (PauliError's Kraus operators are PennyLane's, which say it first)
    pattern = "p must be in the interval" if name == "PauliError" else rf"{name} on wires \[0\] is not a channel: .*{re.escape(what)}"
    strengths = [torch.tensor(v, dtype=torch.float64, requires_grad=kind == "exact") for v in bad]  # (trajectories
    with pytest.raises(ValueError, match=pattern):  # refuse trainable strengths by name, before)
        f(T(0.4), strengths)


@pytest.mark.parametrize(
    "name, strengths, what",
    [
        ("GeneralizedAmplitudeDamping", lambda: [T(0.3), 1.6], "p must"),  # the number itself: at once
        ("ResetError", lambda: [T(0.7), 0.6], "p_0 + p_1"),  # a number and a tensor together
        ("ThermalRelaxationError", lambda: [T(0.1), T(100.0), 250.0, T(5.0)], "T_2 must be at most 2 * T_1"),
    ],
)
def test_a_number_beside_a_tensor_is_checked_too(name, strengths, what):
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(_circuit(CHANNELS[name][0]))
    with pytest.raises(ValueError, match=rf"{name} on wires \[0\] is not a channel: .*{re.escape(what)}"):
        f(T(0.4), strengths())


@pytest.mark.parametrize("name", sorted(CHANNELS))
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])  # (parameter-shift has no rule for a channel)
def test_valid_tensor_strengths_match_default_mixed(name, diff_method):
    make, good, _, _ = CHANNELS[name]
    circuit = _circuit(make)
    x = T(0.4)
    ps = [T(v) for v in good]
    # default.mixed cannot take trainable ThermalRelaxationError strengths (it calls numpy() on them)
    ref_ps = [p.detach() for p in ps] if name == "ThermalRelaxationError" else ps
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=2), interface="torch", diff_method="backprop")
    a, b = torch.stack(ours(x, ps)), torch.stack(ref(x, ref_ps))
    assert torch.allclose(a, b, atol=1e-10, rtol=0)
    inputs = [x] if ref_ps is not ps else [x, *ps]
    ga = torch.autograd.grad(a.sum(), inputs)
    gb = torch.autograd.grad(b.sum(), inputs)
    for u, v in zip(ga, gb):
        assert torch.allclose(u, v, atol=1e-10, rtol=0)


def test_the_check_reads_nothing_to_the_host():
    make = CHANNELS["DepolarizingChannel"][0]
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(_circuit(make))
    x, p = T(0.4), T(0.2)
    assert_no_host_touches(lambda: torch.stack(f(x, [p])).sum().backward())


def test_under_vmap_over_the_strengths_valid_ones_run():
    make = CHANNELS["DepolarizingChannel"][0]
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(_circuit(make))
    ps = torch.tensor([0.1, 0.3], dtype=torch.float64)
    out = torch.func.vmap(lambda p: torch.stack(f(torch.tensor(0.4, dtype=torch.float64), [p])))(ps)
    ref = qml.QNode(_circuit(make), qml.device("default.mixed", wires=2), interface="torch")
    for i in range(2):
        assert torch.allclose(out[i], torch.stack(ref(torch.tensor(0.4, dtype=torch.float64), [ps[i]])), atol=1e-10)

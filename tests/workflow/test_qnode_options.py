"""``qhybrid.qnode`` options as PennyLane's tools see them (issue 41, findings 6 and 7): ``qml.add_noise`` on an
adjoint qnode gives no note to pass ``device_vjp=True`` (an option ``qhybrid.qnode`` does not take), and
``qhybrid.qnode(dev, diff_method=X)(a_qnode)`` checks ``X`` and runs with it."""

from __future__ import annotations

import warnings

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.plugin import config
from qhybrid.errors import QhybridWarning


def _body(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


def test_add_noise_on_an_adjoint_qnode_says_nothing_of_device_vjp(monkeypatch):
    monkeypatch.setattr(config, "_WARNED", set())  # the note is given once per process
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(_body)
    noise = qml.NoiseModel({qml.noise.op_eq(qml.RX): qml.noise.partial_wires(qml.AmplitudeDamping, 0.2)})
    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", QhybridWarning)
        noisy = qml.add_noise(f, noise)
        value = noisy(x)
    value.backward()
    # RX then amplitude damping (0.2) on wire 0, copied to wire 1: <Z1> = 1 - 0.8 (1 - cos x)
    torch.testing.assert_close(value, 1 - 0.8 * (1 - torch.cos(x.detach())), atol=1e-10, rtol=0)
    torch.testing.assert_close(x.grad, -0.8 * torch.sin(x.detach()), atol=1e-10, rtol=0)


@pytest.mark.parametrize("inner", ["qhybrid", "pennylane"])
def test_wrapping_a_qnode_runs_with_the_new_diff_method_and_device(inner):
    dev = qhybrid.device("tensornet", wires=2)
    if inner == "qhybrid":
        first = qml.transforms.cancel_inverses(qhybrid.qnode(dev, diff_method="adjoint")(_body))
    else:
        first = qml.transforms.cancel_inverses(qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(_body))
    second = qhybrid.qnode(dev, diff_method="parameter-shift")(first)
    assert second.diff_method == "parameter-shift" and second.device is dev
    assert second.func is _body and len(second.compile_pipeline) == 1  # the function and its transform
    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    value = second(x)
    assert type(value.grad_fn).__name__ == "ExecuteTapesBackward"  # parameter-shift's node, not the adjoint one
    value.backward()
    torch.testing.assert_close(x.grad, -torch.sin(x.detach()), atol=1e-10, rtol=0)


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_misspelt_diff_method_raises_naming_the_valid_ones(wrapped):
    dev = qhybrid.device("tensornet", wires=2)
    func = qhybrid.qnode(dev, diff_method="adjoint")(_body) if wrapped else _body
    with pytest.raises(ValueError, match=r"'ajdoint'.*'adjoint', 'parameter-shift', 'backprop', 'best' or None"):
        qhybrid.qnode(dev, diff_method="ajdoint")(func)


def test_pennylane_qnode_options_are_named_with_what_to_do_instead():
    """``qhybrid.qnode(dev, shots=100)`` raised Python's bare "unexpected keyword argument" (found by a fuzzing
    helper); a PennyLane QNode option is named now, with qhybrid's way to it. ``interface="torch"`` carries over."""
    dev = qhybrid.device("tensornet", wires=1)
    with pytest.raises(TypeError, match=r"qhybrid.qnode got shots=100.*qhybrid.device\('tensornet', wires=..., shots=100\)"):
        qhybrid.qnode(dev, shots=100)
    with pytest.raises(TypeError, match=r"got interface='jax'.*torch tensors"):
        qhybrid.qnode(dev, interface="jax")
    with pytest.raises(TypeError, match=r"got cache=False.*takes diff_method"):
        qhybrid.qnode(dev, cache=False)
    f = qhybrid.qnode(dev, interface="torch")(lambda: qml.expval(qml.Z(0)))
    assert float(f()) == 1.0

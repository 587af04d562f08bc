"""Results and gradients follow the device of the tensors a call was made with (issue: a circuit whose
measured observable depends on no parameter came back on the CPU beside CUDA parameters).

The CUDA cases run on a GPU machine (marked ``gpu``); the CPU checks below cover the plumbing that puts
results on a requested device."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.interfaces._placement import call_device, place

TOL = 1e-10
METHODS = ["adjoint", "parameter-shift"]


def _cases(n_wide=22):
    """name -> (wires, quantum function of x (a 2-vector), shots). Each hides one way a result can be
    computed away from the parameters."""
    u = torch.tensor(qml.matrix(qml.Hadamard(0) @ qml.S(0)), dtype=torch.complex128)  # built on the CPU

    def no_parameter(x):
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    def outside_light_cone(x):
        qml.RX(x[0], 0)
        qml.Hadamard(1)
        return qml.expval(qml.Z(1)), qml.expval(qml.Z(0))

    def identity_observable(x):
        qml.RY(x[0], 0)
        return qml.expval(qml.Identity(0)), qml.expval(qml.Z(0))

    def cpu_unitary(x):
        qml.QubitUnitary(u, wires=0)
        qml.RX(x[0], 0)
        qml.CRY(x[1], wires=[0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[0, 1])

    def mixed(x):
        qml.RX(x[0], 0)
        qml.IsingXX(x[1], wires=[0, 1])
        return qml.var(qml.Y(1)), qml.expval(qml.Hamiltonian([0.3, -0.5], [qml.Z(0), qml.X(0) @ qml.X(1)]))

    def wide_constant(x):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        qml.Hadamard(n_wide - 1)
        return qml.expval(qml.Z(n_wide - 1)), qml.expval(qml.Z(1))

    return {
        "no_parameter": (2, no_parameter),
        "outside_light_cone": (2, outside_light_cone),
        "identity_observable": (1, identity_observable),
        "cpu_unitary": (2, cpu_unitary),
        "mixed": (2, mixed),
        "wide_constant": (n_wide, wide_constant),
    }


def _flat(r):
    return [t for x in r for t in _flat(x)] if isinstance(r, (tuple, list)) else [r]


def _run_case(name, method, device):
    wires, fn = _cases()[name]
    x0 = torch.tensor([0.37, -1.21], dtype=torch.float64)
    ref = qml.QNode(fn, qml.device("default.qubit", wires=wires), interface="torch", diff_method="backprop")
    xr = x0.clone().requires_grad_()
    want = _flat(ref(xr))
    x = x0.to(device).requires_grad_()
    got = _flat(qhybrid.qnode(qhybrid.device("tensornet", wires=wires), diff_method=method)(fn)(x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device == x.device, f"{name}: a result is on {g.device}, the call's tensors on {x.device}"
        torch.testing.assert_close(g.detach().cpu(), w.detach().to(g.dtype), atol=TOL, rtol=0)
    loss = sum((t * (k + 1)).sum() for k, t in enumerate(got))
    loss_ref = sum((t * (k + 1)).sum() for k, t in enumerate(want))
    if loss.requires_grad:
        (gx,) = torch.autograd.grad(loss, x)
        (gr,) = torch.autograd.grad(loss_ref, xr, allow_unused=True)
        gr = torch.zeros_like(xr) if gr is None else gr
        assert gx.device == x.device
        torch.testing.assert_close(gx.cpu(), gr, atol=TOL, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(_cases()))
def test_results_follow_cuda_parameters(name, method):
    _run_case(name, method, "cuda")


@pytest.mark.gpu
def test_layer_moved_to_cuda_keeps_everything_there():
    layer = qhybrid.ExpQLayer(3, n_layers=2).double().to("cuda")
    x = torch.rand(4, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    y = layer(x)
    y.sum().backward()
    assert y.device.type == "cuda" and x.grad.device.type == "cuda" and layer.weight.grad.device.type == "cuda"


@pytest.mark.gpu
def test_shots_results_follow_cuda_parameters():
    dev = qhybrid.device("tensornet", wires=2, shots=200, seed=3)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x):
        qml.RX(x[0], 0)
        return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))

    x = torch.tensor([0.4, 0.1], dtype=torch.float64, device="cuda", requires_grad=True)
    out = f(x)
    assert all(t.device.type == "cuda" for t in out)
    torch.stack(list(out)).sum().backward()
    assert x.grad.device.type == "cuda"


# --- the same cases on the CPU: values and the plumbing ----------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(set(_cases()) - {"wide_constant"}))
def test_results_follow_cpu_parameters(name, method):
    _run_case(name, method, "cpu")


def test_result_device_is_honoured_for_constant_results():
    """A requested result device is applied to every result, those that depend on no parameter too
    (the meta device stands in for an accelerator on a CPU-only machine)."""
    tape = qml.tape.QuantumScript([qml.Hadamard(0)], [qml.expval(qml.Z(0)), qml.probs(wires=[0])])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), result_device="meta")
    assert [t.device.type for t in res] == ["meta", "meta"]
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))
    assert [t.device.type for t in res] == ["cpu", "cpu"]
    np.testing.assert_allclose(res[1].numpy(), [0.5, 0.5], atol=TOL)


def test_call_device_prefers_an_accelerator_and_searches_nested_arguments():
    cpu = torch.zeros(1)
    meta = torch.zeros(1, device="meta")
    assert call_device(1.0, "a") is None
    assert call_device([cpu], {"w": (meta,)}) == torch.device("meta")
    assert call_device({"w": cpu}) == torch.device("cpu")
    out = place((cpu, [cpu, 3]), torch.device("meta"))
    assert out[0].device.type == "meta" and out[1][0].device.type == "meta" and out[1][1] == 3

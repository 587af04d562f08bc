"""method="mps" through every entry point: qhybrid.qnode with each diff_method, PennyLane's own QNode,
layers; and method="auto" refusing wide exact circuits with an error that names method="mps"."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import ContractionTooLargeError

N = 5


def _circuit(x, w):
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(N))
    return [qml.expval(qml.PauliZ(i)) for i in range(N)]


def _reference(x, w):
    out = qml.QNode(_circuit, qml.device("default.qubit", wires=N), interface="torch")(x, w)
    return torch.stack(out, -1)


@pytest.mark.parametrize("diff_method", ["best", "backprop", "adjoint", "parameter-shift"])
def test_every_diff_method_gives_the_reference_gradient(diff_method):
    x = torch.rand(3, N, dtype=torch.float64)
    w = torch.rand(1, N, 3, dtype=torch.float64, requires_grad=True)
    dev = qhybrid.device("tensornet", wires=N, method="mps")
    ours = torch.stack(qhybrid.qnode(dev, diff_method=diff_method)(_circuit)(x, w), -1)
    ref = _reference(x, w)
    assert torch.allclose(ours, ref, atol=1e-10)
    g1 = torch.autograd.grad(ours.sum(), w)[0]
    g2 = torch.autograd.grad(ref.sum(), w)[0]
    assert torch.allclose(g1, g2, atol=1e-10)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint", "parameter-shift"])
def test_pennylane_qnode_on_the_registered_device(diff_method):
    dev = qml.device("qhybrid.tensornet", wires=N, method="mps")
    x = torch.rand(N, dtype=torch.float64)
    w = torch.rand(1, N, 3, dtype=torch.float64, requires_grad=True)
    ours = torch.stack(qml.QNode(_circuit, dev, interface="torch", diff_method=diff_method)(x, w))
    ref = _reference(x, w)
    assert torch.allclose(ours, ref, atol=1e-10)
    assert torch.allclose(torch.autograd.grad(ours.sum(), w)[0], torch.autograd.grad(ref.sum(), w)[0], atol=1e-10)


def test_layers_run_unchanged():
    dev = qhybrid.device("tensornet", wires=4, method="mps", max_bond_dim=4)
    layer = qhybrid.ExpQLayer(4, 2, device=dev)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), layer, torch.nn.Linear(4, 2))
    out = model(torch.randn(8, 6))
    out.sum().backward()
    assert out.shape == (8, 2) and all(torch.isfinite(p.grad).all() for p in model.parameters())

    @qhybrid.qnode(dev)
    def circuit(inputs, w):
        qml.AngleEmbedding(inputs, wires=range(4))
        qml.BasicEntanglerLayers(w, wires=range(4))
        return [qml.expval(qml.PauliZ(i)) for i in range(4)]

    torch_layer = qhybrid.TorchLayer(circuit, weight_shapes={"w": (2, 4)})
    assert torch_layer(torch.randn(5, 4)).shape == (5, 4)


def test_too_wide_exact_circuit_names_method_mps():
    n = 30
    dev = qhybrid.device("tensornet", wires=n, max_memory=2**24, plan_time=0)
    w = torch.rand(3, n, 3, dtype=torch.float64)
    with pytest.raises(ContractionTooLargeError, match='method="mps"'):
        qhybrid.qnode(dev)(_global(n))(w)
    mps = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=8)
    with pytest.warns(qhybrid.errors.QhybridWarning):
        value = qhybrid.qnode(mps)(_global(n))(w)
    assert torch.isfinite(value) and mps.last_truncation.discarded_weight > 0


def _global(n):
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return qml.expval(qml.prod(*[qml.PauliZ(i) for i in range(n)]))

    return circuit


@pytest.mark.gpu
def test_cuda_tensors_stay_on_the_gpu():
    x = torch.rand(2, N, dtype=torch.float64, device="cuda")
    w = torch.rand(1, N, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    dev = qhybrid.device("tensornet", wires=N, method="mps")
    out = torch.stack(qhybrid.qnode(dev, diff_method="backprop")(_circuit)(x, w), -1)
    assert out.device.type == "cuda"
    out.sum().backward()
    assert w.grad.device.type == "cuda"
    ref = _reference(x.cpu(), w.detach().cpu())
    assert torch.allclose(out.detach().cpu(), ref, atol=1e-10)


@pytest.mark.gpu
def test_truncated_routed_batch_on_the_gpu_is_the_cpu_run():
    """The sel50b16 path at small size: a batch through a capped, routed SEL chain (ring-closing CNOTs: SWAP
    routing; centre moves by the SVD split on CUDA, by QR on the CPU; truncated splits by the batched CUDA
    SVD, by the Gram route on the CPU): values and gradients equal the CPU run's, and stay on the GPU."""
    n = 10

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    g = torch.Generator().manual_seed(5)
    x = torch.rand(4, n, dtype=torch.float64, generator=g)
    w = torch.rand(3, n, 3, dtype=torch.float64, generator=g)
    runs = []
    for device in ("cpu", "cuda"):
        wd = w.to(device).requires_grad_(True)
        dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=8)
        with pytest.warns(qhybrid.errors.QhybridWarning):  # it truncates: the discarded weight is reported
            out = torch.stack(qhybrid.qnode(dev, diff_method="backprop")(circuit)(x.to(device), wd), -1)
        assert out.device.type == device
        (grad,) = torch.autograd.grad(out.sum(), wd)
        assert grad.device.type == device
        runs.append((out.detach().cpu(), grad.cpu(), dev.last_truncation.discarded_weight))
    (v_cpu, g_cpu, d_cpu), (v_gpu, g_gpu, d_gpu) = runs
    assert d_cpu > 1e-3 and d_gpu == pytest.approx(d_cpu, rel=1e-6)
    assert torch.allclose(v_gpu, v_cpu, atol=1e-8) and torch.allclose(g_gpu, g_cpu, atol=1e-6)

"""cuTensorNet memory: the device's max_memory bounds the cutensornet backend's workspace.

The decisions are pure functions (backends/_workspace.py), tested here; the backend's use of them runs
against the CPU stand-in for cuquantum-python from test_backends.py; the device option reaches the
backend. GPU tests (marked ``gpu``, skipped without CUDA and cuquantum-python) check the real library:
a network that cannot fit is refused with nothing allocated, one that fits stays within max_memory,
and a structure of many closed networks uses about what the torch backend uses (it used 11x).
"""

from __future__ import annotations

import os

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
from qhybrid.devices.tensornet.backends import _INSTANCES, available_backends, clear_backend_cache, get_backend
from qhybrid.devices.tensornet.backends import _workspace as ws
from qhybrid.devices.tensornet.backends import cutensornet as ctn
from qhybrid.devices.tensornet.backends.cutensornet import CuTensorNetBackend
from qhybrid.errors import ContractionTooLargeError

from test_backends import FakeCutn, FakeNetwork, FakeTensornet, full_einsum, random_network

GiB = 2**30
MiB = 2**20


@pytest.fixture(autouse=True)
def _fresh_backends():
    clear_backend_cache()
    yield
    clear_backend_cache()


@pytest.fixture
def fake(monkeypatch):
    FakeNetwork.instances = []
    FakeNetwork.refuse_gradients = FakeNetwork.refuse_networks = False
    FakeNetwork.convention = "torch"
    FakeNetwork.min_workspace = 0
    monkeypatch.setattr(ctn, "_free_memory", lambda device: (10 * GiB, 2 * GiB))  # a GPU with 10 GiB free
    yield CuTensorNetBackend("cpu", autotune_iterations=2, _library=(FakeTensornet, FakeCutn))
    FakeNetwork.min_workspace = 0


# --- the pure decisions ----------------------------------------------------------------------------


def test_workspace_limit_is_max_memory_within_a_share_of_free_memory():
    assert ws.workspace_limit(1 * GiB, free=10 * GiB) == 1 * GiB
    assert ws.workspace_limit(None, free=10 * GiB, cached=2 * GiB) == int(ws.FREE_FRACTION * 12 * GiB)
    assert ws.workspace_limit(100 * GiB, free=10 * GiB) == int(ws.FREE_FRACTION * 10 * GiB)
    assert ws.workspace_limit(1 * GiB, free=-5) == 0


def test_estimated_workspace_is_the_largest_intermediate_unless_it_is_the_result():
    assert ws.estimated_workspace(1 << 20, output_elements=4, itemsize=16) == 16 * MiB
    assert ws.estimated_workspace(64, output_elements=64, itemsize=16) == 0


def test_check_workspace_refuses_with_both_sizes_and_the_limit_named():
    ws.check_workspace(10, 10, "x", None)
    with pytest.raises(ContractionTooLargeError, match=r"at least 16\.0 MiB, above the 1\.0 MiB.*max_memory=1\.0 MiB"):
        ws.check_workspace(16 * MiB, 1 * MiB, "a network of 9 tensors", 1 * MiB)
    with pytest.raises(ContractionTooLargeError, match=r"80% of the GPU memory free"):
        ws.check_workspace(16 * MiB, 1 * MiB, "a network", None)


def test_library_refusal_becomes_ours():
    exc = MemoryError("GPU memory limit exceeded")
    exc.limit, exc.requirement = 2 * MiB, 3 * GiB
    err = ws.refuse_from_library(exc, "a network of 5 tensors", 2 * MiB)
    assert isinstance(err, ContractionTooLargeError)
    assert "3.0 GiB" in str(err) and "2.0 MiB" in str(err) and "backend='torch'" in str(err)


def test_only_costly_networks_are_autotuned():
    assert ws.autotune_iterations(ws.AUTOTUNE_MIN_FLOPS, 3) == 3
    assert ws.autotune_iterations(ws.AUTOTUNE_MIN_FLOPS / 10, 3) == 0


# --- the backend (against the CPU stand-in) ---------------------------------------------------------


def test_backend_passes_the_limit_to_cutensornet(fake):
    inputs, output, sizes, ops = random_network(3, 8, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    with torch.no_grad():
        got = fake.contract(plan, ops, max_memory=1 * GiB)
    torch.testing.assert_close(got, full_einsum(inputs, output, ops), atol=1e-10, rtol=1e-10)
    (net,) = FakeNetwork.instances
    assert net.memory_limit == ws.SMALL_WORKSPACE  # a small network's workspace: what its size calls for
    clear_backend_cache()
    fake.clear()
    FakeNetwork.instances = []
    with torch.no_grad():
        fake.contract(ContractionPlan(inputs, output, sizes), ops)  # no max_memory: a share of the free memory
    assert FakeNetwork.instances[0].memory_limit == ws.SMALL_WORKSPACE


def test_a_network_asking_more_than_its_size_calls_for_is_built_within_its_minimum(fake):
    FakeNetwork.min_workspace = 100 * MiB  # above SMALL_WORKSPACE, within max_memory
    inputs, output, sizes, ops = random_network(3, 8, broadcast=True)
    with torch.no_grad():
        got = fake.contract(ContractionPlan(inputs, output, sizes), ops, max_memory=1 * GiB)
    FakeNetwork.min_workspace = 0
    torch.testing.assert_close(got, full_einsum(inputs, output, ops), atol=1e-10, rtol=1e-10)
    first, second = FakeNetwork.instances
    assert (first.memory_limit, first.freed, second.memory_limit) == (ws.SMALL_WORKSPACE, True, 100 * MiB)  # its minimum


def test_a_network_workspace_limit_follows_its_size_within_the_limit():
    assert ws.network_workspace_limit(10 * GiB, 1 * MiB) == ws.SMALL_WORKSPACE
    assert ws.network_workspace_limit(10 * GiB, 512 * MiB) == ws.WORKSPACE_HEADROOM * 512 * MiB
    assert ws.network_workspace_limit(1 * GiB, 512 * MiB) == 1 * GiB
    assert ws.network_workspace_limit(16 * MiB, 0) == 16 * MiB


def test_backend_refuses_before_building_a_network_that_cannot_fit(fake):
    inputs, output, sizes, ops = random_network(4, 12, scalar=True, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    need = plan.largest_intermediate * 16
    with pytest.raises(ContractionTooLargeError, match="needs a workspace of at least"):
        fake.contract(plan, ops, max_memory=need - 1)
    assert FakeNetwork.instances == []  # nothing built, nothing allocated


def test_backend_turns_the_library_refusal_into_ours_and_frees_the_network(fake):
    FakeNetwork.min_workspace = 5 * GiB  # cuTensorNet's own minimum, above the limit
    inputs, output, sizes, ops = random_network(5, 9)
    plan = ContractionPlan(inputs, output, sizes)
    with pytest.raises(ContractionTooLargeError, match=r"5\.0 GiB \(cuTensorNet's estimate\), above the 1\.0 GiB"):
        fake.contract(plan, ops, max_memory=1 * GiB)
    assert all(n.freed for n in FakeNetwork.instances)
    FakeNetwork.min_workspace = 0
    leaves = [o.clone().requires_grad_() for o in ops]  # not cached as a failure: it runs once it fits
    out = fake.contract(plan, leaves, max_memory=1 * GiB)
    torch.testing.assert_close(out.detach(), full_einsum(inputs, output, ops), atol=1e-10, rtol=1e-10)


# --- the device option ------------------------------------------------------------------------------


def _closed_circuit(wires):
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(wires), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(wires))
        return [qml.expval(qml.Z(i)) for i in range(wires)]

    return f


def test_device_max_memory_reaches_the_cutensornet_backend(fake, monkeypatch):
    """qhybrid.device(..., backend="cutensornet", max_memory=...) through the stand-in: each closed
    network's cuTensorNet workspace limit is max_memory (below SMALL_WORKSPACE); results and gradients match default.qubit."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    _INSTANCES[("cutensornet", "cpu")] = fake  # the shared backend the device will look up
    dev = qhybrid.device("tensornet", wires=4, torch_device="cpu", backend="cutensornet", max_memory=16 * MiB)
    f = _closed_circuit(4)
    x = torch.rand(3, 4, dtype=torch.float64)
    w = torch.rand(1, 4, 3, dtype=torch.float64, requires_grad=True)
    got = torch.stack(list(qhybrid.qnode(dev, diff_method="adjoint")(f)(x, w)))
    (g,) = torch.autograd.grad(got.sum(), w)
    wr = w.detach().clone().requires_grad_()
    ref = torch.stack(list(qml.QNode(f, qml.device("default.qubit", wires=4), interface="torch")(x, wr)))
    (gr,) = torch.autograd.grad(ref.sum(), wr)
    torch.testing.assert_close(got.detach(), ref.detach(), atol=1e-10, rtol=0)
    torch.testing.assert_close(g, gr, atol=1e-10, rtol=0)
    nets = [n for n in FakeNetwork.instances if n.shapes != [(2, 3), (3, 2)]]  # not the convention probe
    assert len(nets) >= 4 and {n.memory_limit for n in nets} == {16 * MiB}


def test_device_refuses_when_cutensornet_cannot_fit(fake, monkeypatch):
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    _INSTANCES[("cutensornet", "cpu")] = fake
    FakeNetwork.min_workspace = 64 * MiB
    dev = qhybrid.device("tensornet", wires=4, torch_device="cpu", backend="cutensornet", max_memory=1 * MiB)
    f = _closed_circuit(4)
    with pytest.raises(ContractionTooLargeError, match="max_memory=1.0 MiB"):
        qhybrid.qnode(dev, diff_method=None)(f)(torch.rand(3, 4), torch.rand(1, 4, 3))


# --- on a GPU, for real ------------------------------------------------------------------------------


def _cutensornet():
    reason = available_backends("cuda")["cutensornet"]
    if reason is not None:
        if os.environ.get("QHYBRID_REQUIRE_CUTENSORNET") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return get_backend("cutensornet", "cuda")


def _chain(n, bond, batch):
    """A batched matrix-product chain (n tensors [batch, bond, bond]) closed into a trace per sample:
    intermediates of batch * bond * bond elements."""
    inputs = [(0, 2 + k, 2 + (k + 1) % n) for k in range(n)]
    sizes = {0: batch, **{2 + k: bond for k in range(n)}}
    g = torch.Generator().manual_seed(0)
    ops = [torch.randn(batch, bond, bond, generator=g, dtype=torch.complex128) / bond for _ in range(n)]
    return inputs, (0,), sizes, ops


@pytest.mark.gpu
def test_gpu_cutensornet_refuses_a_network_above_max_memory_without_allocating():
    backend = _cutensornet()
    inputs, output, sizes, ops = _chain(6, 256, 16)  # intermediates of 16 MiB
    plan = ContractionPlan(inputs, output, sizes)
    ops = [o.cuda() for o in ops]
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with pytest.raises(ContractionTooLargeError, match="workspace of at least"):
        backend.contract(plan, ops, max_memory=1 * MiB)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@pytest.mark.gpu
def test_gpu_cutensornet_stays_within_max_memory():
    """The contraction's peak allocation beyond its operands and result stays within max_memory."""
    backend = _cutensornet()
    inputs, output, sizes, ops_cpu = _chain(6, 128, 16)  # intermediates of 4 MiB
    plan = ContractionPlan(inputs, output, sizes)
    ops = [o.cuda() for o in ops_cpu]
    limit = 64 * MiB
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        out = backend.contract(plan, ops, max_memory=limit)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    result = out.numel() * out.element_size()
    assert extra <= limit + result, f"peak {extra / MiB:.1f} MiB beyond the operands, max_memory 64 MiB"
    torch.testing.assert_close(out.cpu(), full_einsum(inputs, output, ops_cpu), atol=1e-10, rtol=1e-10)
    del out
    torch.cuda.synchronize()
    # the scratch workspace went back to the pool: nothing but the operands stays allocated
    assert torch.cuda.memory_allocated() - base <= 1 * MiB


@pytest.mark.gpu
def test_gpu_many_closed_networks_use_about_what_torch_uses(monkeypatch):
    """16 wires as closed light-cone networks (16 of them), forward and backward: the cutensornet
    backend's peak memory stays within 2x the torch backend's plus 64 MiB (it was 11x on W22)."""
    _cutensornet()
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    f = _closed_circuit(16)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(4, 16, generator=g, dtype=torch.float64).cuda()
    w = (torch.rand(2, 16, 3, generator=g, dtype=torch.float64) * 6).cuda().requires_grad_()
    peaks, values = {}, {}
    for name in ("torch", "cutensornet"):
        dev = qhybrid.device("tensornet", wires=16, torch_device="cuda", backend=name)
        qn = qhybrid.qnode(dev, diff_method="adjoint")(f)
        torch.stack(list(qn(x, w))).sum().backward()  # first step: plans and networks built
        w.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = torch.stack(list(qn(x, w)))
        (gw,) = torch.autograd.grad(out.sum(), w)
        torch.cuda.synchronize()
        peaks[name] = torch.cuda.max_memory_allocated() - base
        values[name] = (out.detach().cpu(), gw.cpu())
    torch.testing.assert_close(values["cutensornet"][0], values["torch"][0], atol=1e-10, rtol=0)
    torch.testing.assert_close(values["cutensornet"][1], values["torch"][1], atol=1e-10, rtol=0)
    assert peaks["cutensornet"] <= 2 * peaks["torch"] + 64 * MiB, {k: v / MiB for k, v in peaks.items()}

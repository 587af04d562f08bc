"""Contraction backends (qhybrid/devices/tensornet/backends): selection by name, the torch backend, and
the cuTensorNet backend's glue (layout, path renumbering, autograd Function, NOT_SUPPORTED fallback)
against a stand-in for cuquantum-python on the CPU. GPU tests (marked ``gpu``) run both backends for
real on CUDA: random networks and random circuits against torch / PennyLane default.qubit to 1e-10."""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
from qhybrid.devices.tensornet.backends import (
    Backend,
    TorchBackend,
    available_backends,
    clear_backend_cache,
    get_backend,
)
from qhybrid.devices.tensornet.backends import _workspace
from qhybrid.devices.tensornet.backends import _layout as _layout_mod
from qhybrid.devices.tensornet.backends import cutensornet as ctn
from qhybrid.devices.tensornet.backends.auto import AutoBackend
from qhybrid.devices.tensornet.backends.cutensornet import CuTensorNetBackend

from _circuits import build_tape, circuits, flat, grads, loss_of, reference

TOL = 1e-10


@pytest.fixture(autouse=True)
def _fresh_backends():
    clear_backend_cache()
    yield
    clear_backend_cache()


# --- random networks ---------------------------------------------------------------------------


def random_network(seed: int, n_tensors: int, *, scalar=False, broadcast=False, device="cpu",
                   dtype=torch.complex128):
    """A random network with hyperedges (a "batch" label on several tensors and the output), extent-1
    labels, labels summed inside one tensor, optionally a scalar operand and a broadcast (extent-1) axis.

    Returns (inputs, output, sizes, operands)."""
    rng = np.random.default_rng(seed)
    n_labels = 3 + n_tensors
    sizes = {lab: int(rng.choice([1, 2, 2, 3])) for lab in range(2, 2 + n_labels)}
    sizes[0], sizes[1] = 3, 1  # 0: a batch-like hyperedge, 1: an extent-1 "stack" index
    labels = sorted(sizes)
    inputs = []
    for t in range(n_tensors):
        k = int(rng.integers(1, 4))
        ix = list(rng.choice(labels[2:], size=k, replace=False))
        if rng.random() < 0.5:
            ix.insert(0, 0)
        if rng.random() < 0.3:
            ix.insert(0, 1)
        inputs.append(tuple(int(i) for i in ix))
    for lab in labels[2:]:  # every label on some tensor, most on two (a network, not a bag)
        if not any(lab in ix for ix in inputs):
            inputs[int(rng.integers(n_tensors))] += (lab,)
    if scalar:
        inputs.append(())
    used = sorted({i for ix in inputs for i in ix})
    output = tuple(int(i) for i in rng.permutation([i for i in used if rng.random() < 0.3 or i == 0]))
    if 0 not in {i for ix in inputs for i in ix}:
        output = tuple(i for i in output if i != 0)
    gen = torch.Generator().manual_seed(seed)
    operands = []
    for n, ix in enumerate(inputs):
        shape = [sizes[i] for i in ix]
        if broadcast and n == 0 and 0 in ix:
            shape[ix.index(0)] = 1  # this tensor does not depend on the batch label
        re = torch.randn(shape, generator=gen, dtype=torch.float64)
        im = torch.randn(shape, generator=gen, dtype=torch.float64)
        operands.append(torch.complex(re, im).to(dtype).to(device))
    return inputs, output, sizes, operands


def full_einsum(inputs, output, operands):
    """The whole network in one torch.einsum (the reference)."""
    local = {lab: j for j, lab in enumerate(sorted({i for ix in inputs for i in ix} | set(output)))}
    args = []
    for t, ix in zip(operands, inputs):
        args += [t, [local[i] for i in ix]]
    return torch.einsum(*args, [local[i] for i in output])


def functional(t, seed=3):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.device)
    v = torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.device)
    return (w * t.real).sum() + (v * t.imag).sum()


def grads_of(fn, operands, which):
    leaves = [o.detach().clone().requires_grad_(i in which) for i, o in enumerate(operands)]
    out = fn(leaves)
    gs = torch.autograd.grad(functional(out), [leaves[i] for i in which])
    return out.detach(), gs


NETWORKS = [
    dict(seed=s, n_tensors=n, scalar=sc, broadcast=b)
    for s, n, sc, b in [(0, 2, False, False), (1, 4, False, True), (2, 5, True, False), (3, 8, False, True),
                        (4, 12, True, True), (5, 9, False, False), (6, 3, True, True)]
]


# --- get_backend -----------------------------------------------------------------------------------


def assert_contracts_like_einsum(backend, inputs, output, sizes, ops, which):
    """``backend`` contracts the network as one whole-network einsum does: value and the gradients of
    the operands ``which``."""
    plan = ContractionPlan(inputs, output, sizes)
    got, g = grads_of(lambda xs: backend.contract(plan, xs), ops, which)
    want, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, which)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=TOL, rtol=TOL)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)


def test_backend_base_class_states_the_contract():
    doc = Backend.__doc__
    for phrase in ("plan.contract(operands)", "autograd", "synchronisation", "identity"):
        assert phrase in doc
    with pytest.raises(NotImplementedError):
        Backend("cpu").contract(None, [])


def test_get_backend_by_name_and_shared():
    b = get_backend("torch", "cpu")
    assert isinstance(b, TorchBackend) and b.name == "torch" and b.device == torch.device("cpu")
    assert get_backend("torch", torch.device("cpu")) is b
    assert get_backend("auto") is b  # default device: the CPU


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="Unknown contraction backend 'cuda'.*'torch', 'cutensornet', 'auto'"):
        get_backend("cuda", "cpu")


def test_auto_is_torch_cpu_on_cpu():
    assert get_backend("auto", "cpu").name == "torch"


def test_auto_is_torch_without_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    b = get_backend("auto", "cuda")
    assert isinstance(b, TorchBackend) and b.device.type == "cuda"


def test_auto_is_torch_cuda_on_gpu_without_cuquantum(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cuquantum", None)  # import cuquantum -> ImportError
    b = get_backend("auto", "cuda")
    assert isinstance(b, TorchBackend) and b.device == torch.device("cuda")
    reason = available_backends("cuda")["cutensornet"]
    assert "cuquantum-python" in reason and "pip install 'qhybrid[gpu]'" in reason


def test_auto_is_torch_with_cutensornet_for_large_trees_on_gpu_with_working_cuquantum(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ctn, "_load", lambda: (FakeTensornet, FakeCutn))
    monkeypatch.setattr(ctn, "_probe", lambda tn, device: None)
    b = get_backend("auto", "cuda")
    assert isinstance(b, AutoBackend) and isinstance(b, TorchBackend) and b.name == "auto"
    assert isinstance(b.cutensornet, CuTensorNetBackend) and get_backend("cutensornet", "cuda") is b.cutensornet


def test_auto_is_torch_when_cuquantum_libraries_fail_to_load(monkeypatch):
    class Broken:
        class Network:
            def __init__(self, *args, **kwargs):
                raise OSError("libcutensor.so.2: cannot open shared object file")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device", lambda d: nullcontext())
    eye = torch.eye
    monkeypatch.setattr(torch, "eye", lambda n, dtype=None, device=None: eye(n, dtype=dtype))  # no CUDA here
    monkeypatch.setattr(ctn, "_load", lambda: (Broken, FakeCutn))
    assert get_backend("auto", "cuda").name == "torch"
    reason = available_backends("cuda")["cutensornet"]
    assert "libcutensor.so.2" in reason and "load at first use" in reason and "qhybrid[gpu]" in reason


def test_cutensornet_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"cannot run on cuda: no CUDA GPU is visible.*backend='torch'"):
        get_backend("cutensornet", "cuda")


def test_cutensornet_on_a_cpu_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"CUDA tensors only and cpu is not a CUDA device.*torch_device='cuda'"):
        get_backend("cutensornet", "cpu")


def test_cutensornet_without_cuquantum_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cuquantum", None)
    with pytest.raises(RuntimeError, match=r"needs cuquantum-python.*pip install 'qhybrid\[gpu\]'"):
        get_backend("cutensornet", "cuda")


def test_device_contracts_its_plans_through_the_chosen_backend(monkeypatch):
    """State-prep circuits contract plans: through the device's backend ("auto" on CPU: torch)."""
    import pennylane as qml

    import qhybrid

    planned, limits = [], []
    original = TorchBackend.contract

    def spy(self, plan, operands, *, max_memory=None, keep=True):
        planned.append(plan)
        limits.append(max_memory)
        return original(self, plan, operands, max_memory=max_memory, keep=keep)

    monkeypatch.setattr(TorchBackend, "contract", spy)
    state = torch.tensor([0.6, 0.0, 0.0, 0.8], dtype=torch.complex128)

    def f(x):
        qml.StatePrep(state, wires=[0, 1])
        qml.RX(x, wires=0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    x = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
    out = qhybrid.qnode(qhybrid.device("tensornet", wires=2, backend="auto"), diff_method="adjoint")(f)(x)
    (g,) = torch.autograd.grad(out, x)
    xr = x.detach().clone().requires_grad_(True)
    ref = qml.QNode(f, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(xr)
    (gr,) = torch.autograd.grad(ref, xr)
    assert planned and abs(out.item() - ref.item()) < 1e-10 and abs(g.item() - gr.item()) < 1e-10


def test_device_refuses_cutensornet_where_it_cannot_run(monkeypatch):
    import qhybrid

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"cannot run on cuda: no CUDA GPU is visible"):
        qhybrid.device("tensornet", wires=2, backend="cutensornet")
    with pytest.raises(RuntimeError, match=r"cpu is not a CUDA device"):
        qhybrid.device("tensornet", wires=2, backend="cutensornet", torch_device="cpu")


def test_cutensornet_imports_lazily_and_guards_first_use(monkeypatch):
    """Constructing the backend loads nothing; the first contraction says what is missing."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cuquantum", None)
    backend = CuTensorNetBackend("cuda")
    inputs, output, sizes, ops = random_network(0, 3)
    with pytest.raises(RuntimeError, match=r"cuquantum-python.*qhybrid\[gpu\]"):
        backend.contract(ContractionPlan(inputs, output, sizes), ops)


def test_importing_qhybrid_does_not_import_cuquantum():
    import subprocess

    code = "import sys, qhybrid; from qhybrid.devices.tensornet import backends; print('cuquantum' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the torch backend -------------------------------------------------------------------------------


@pytest.mark.parametrize("net", NETWORKS, ids=lambda n: f"seed{n['seed']}-{n['n_tensors']}t")
def test_torch_backend_matches_whole_network_einsum(net):
    inputs, output, sizes, ops = random_network(**net)
    backend = get_backend("torch", "cpu")
    assert_contracts_like_einsum(backend, inputs, output, sizes, ops, list(range(0, len(ops), 2)) or [0])


def test_torch_backend_checks_the_operand_count():
    inputs, output, sizes, ops = random_network(1, 4)
    with pytest.raises(ValueError, match="contracts 4 tensors but 3 operands"):
        get_backend("torch", "cpu").contract(ContractionPlan(inputs, output, sizes), ops[:3])


# --- the cuTensorNet backend's glue, against a stand-in library ------------------------------------------


class FakeCutn:
    """The parts of cuquantum.bindings.cutensornet the backend touches."""

    tensor_qualifiers_dtype = np.dtype([("is_conjugate", "<i4"), ("is_constant", "<i4"), ("requires_gradient", "<i4")])

    class cuTensorNetError(RuntimeError):
        pass


class FakeNetwork:
    """A stand-in for cuquantum.tensornet.Network (interleaved operands) that checks what it is given
    the way cuTensorNet would, and keeps only the latest contraction's operands as its "CACHE"."""

    instances: list = []
    min_workspace = 0  # the workspace cuTensorNet would say it needs at least
    refuse_gradients = False
    refuse_networks = False
    convention = "torch"  # or "holomorphic" (J^T g), or "scaled" (matches neither)

    def __init__(self, *args, qualifiers=None, options=None, stream=None):
        if FakeNetwork.refuse_networks:
            raise FakeCutn.cuTensorNetError("cuTensorNetError: NOT_SUPPORTED (15): CUTENSORNET_STATUS_NOT_SUPPORTED")
        assert len(args) % 2 == 1, "interleaved: op, modes, ..., output modes"
        self.operands, self.modes, self.out = list(args[0:-1:2]), [tuple(m) for m in args[1:-1:2]], tuple(args[-1])
        self.qualifiers = qualifiers
        assert options["blocking"] == "auto", "no host synchronisation after each call"
        assert set(options) <= {"blocking", "memory_limit"}
        self.memory_limit = options.get("memory_limit")
        self.shapes = [tuple(t.shape) for t in self.operands]
        self.strides = [t.stride() for t in self.operands]
        self._check(self.operands)
        count = {}
        for m in self.modes:
            assert len(set(m)) == len(m)
            for lab in m:
                count[lab] = count.get(lab, 0) + 1
        for lab, c in count.items():
            assert c >= 2 or lab in self.out, f"mode {lab} appears once and is not in the output"
        assert all(lab in count for lab in self.out)
        self.path, self.autotuned, self.resets, self.contractions = None, 0, 0, 0
        self.cache, self.contracted, self.freed, self.valid_state = None, False, False, True
        FakeNetwork.instances.append(self)

    @staticmethod
    def _check(ops):
        for t in ops:
            assert t.is_contiguous() and not t.is_conj() and t.ndim >= 1
            assert all(e > 1 for e in t.shape), "no singleton modes"

    def contract_path(self, optimize=None):
        need = FakeNetwork.min_workspace
        if self.memory_limit is not None and need > self.memory_limit:  # as cuquantum's MemoryLimitExceeded
            exc = MemoryError(f"GPU memory limit exceeded: limit {self.memory_limit}, minimum workspace {need}")
            exc.limit, exc.requirement = self.memory_limit, need
            raise exc
        path = optimize["path"]
        assert len(path) == len(self.operands) - 1 and all(len(p) == 2 for p in path)
        self.path = path
        return path, None

    def autotune(self, *, iterations=3, stream=None, release_workspace=False):
        assert release_workspace, "workspaces go back to the pool after each call"
        self.autotuned += iterations

    def reset_operands(self, *ops, stream=None):
        assert [tuple(t.shape) for t in ops] == self.shapes and [t.stride() for t in ops] == self.strides
        self._check(ops)
        self.operands, self.contracted, self.resets = list(ops), False, self.resets + 1

    def _einsum(self, ops):
        local = {lab: j for j, lab in enumerate(sorted({i for m in self.modes for i in m}))}
        args = []
        for t, m in zip(ops, self.modes):
            args += [t, [local[i] for i in m]]
        return torch.einsum(*args, [local[i] for i in self.out])

    def contract(self, *, slices=None, stream=None, release_workspace=False):
        assert release_workspace, "the scratch workspace goes back to the pool after each call"
        self.cache = [t.clone() for t in self.operands]
        self.contracted, self.contractions = True, self.contractions + 1
        return self._einsum(self.operands).contiguous()

    def gradients(self, output_gradient, *, stream=None, release_workspace=False):
        warnings.warn("Network.gradients() is an experimental API and subject to future changes", stacklevel=2)
        assert release_workspace, "scratch and CACHE go back to the pool after the backward"
        if FakeNetwork.refuse_gradients:
            raise FakeCutn.cuTensorNetError("cuTensorNetError: NOT_SUPPORTED (15): CUTENSORNET_STATUS_NOT_SUPPORTED")
        assert self.contracted and output_gradient.is_contiguous() and not output_gradient.is_conj()
        seed = output_gradient.conj() if FakeNetwork.convention == "holomorphic" else output_gradient
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in self.cache]
            gs = torch.autograd.grad(self._einsum(leaves), leaves, seed)
        if FakeNetwork.convention == "holomorphic":
            gs = [g.conj() for g in gs]
        elif FakeNetwork.convention == "scaled":
            gs = [2 * g for g in gs]
        return tuple(g if q else None for g, q in zip(gs, self.qualifiers["requires_gradient"]))

    def free(self):
        self.freed, self.valid_state = True, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


class FakeTensornet:
    Network = FakeNetwork


@pytest.fixture
def fake():
    FakeNetwork.instances = []
    FakeNetwork.refuse_gradients = FakeNetwork.refuse_networks = False
    FakeNetwork.convention = "torch"
    FakeNetwork.min_workspace = 0
    yield CuTensorNetBackend("cpu", autotune_iterations=2, _library=(FakeTensornet, FakeCutn))
    FakeNetwork.refuse_gradients = FakeNetwork.refuse_networks = False
    FakeNetwork.convention = "torch"


@pytest.mark.parametrize("net", NETWORKS, ids=lambda n: f"seed{n['seed']}-{n['n_tensors']}t")
def test_cutensornet_glue_matches_whole_network_einsum(fake, net):
    inputs, output, sizes, ops = random_network(**net)
    assert_contracts_like_einsum(fake, inputs, output, sizes, ops, list(range(len(ops))))
    assert fake.fallbacks == [] or "fewer than two" in fake.fallbacks[0]


def test_cutensornet_plans_once_and_rebinds_operands(fake, monkeypatch):
    monkeypatch.setattr(_workspace, "AUTOTUNE_MIN_FLOPS", 0)  # autotune even this small network
    inputs, output, sizes, ops = random_network(3, 8, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    with torch.no_grad():
        for k in range(4):
            new = [o * (k + 1) for o in ops]
            torch.testing.assert_close(fake.contract(plan, new), full_einsum(inputs, output, new), atol=1e-9, rtol=1e-9)
    (net,) = FakeNetwork.instances
    assert net.path is not None and net.autotuned == 2
    assert net.resets == 3 and net.contractions == 4
    assert not net.qualifiers["requires_gradient"].any()  # no gradients asked: no CACHE workspace


def test_cutensornet_renumbers_our_path_and_uses_it(fake):
    """The path cuTensorNet gets is the plan's own (no re-planning), renumbered past scalar operands."""
    inputs = [(), (2, 3), (3, 4), (), (4, 5)]
    plan = ContractionPlan(inputs, (2, 5), {2: 2, 3: 3, 4: 2, 5: 3})
    ops = [torch.tensor(2.0 + 1j, dtype=torch.complex128)] + [
        torch.randn(s, dtype=torch.complex128) for s in [(2, 3), (3, 2)]
    ] + [torch.tensor(-1.0j, dtype=torch.complex128), torch.randn(2, 3, dtype=torch.complex128)]
    out = fake.contract(plan, ops)
    torch.testing.assert_close(out, full_einsum(inputs, (2, 5), ops), atol=TOL, rtol=TOL)
    (net,) = FakeNetwork.instances
    assert len(net.operands) == 3 and len(net.path) == 2
    steps = [step.operands for step in plan.steps]
    assert _layout_mod._renumber(steps, 5, (1, 2, 4)) == tuple(tuple(p) for p in net.path)


def test_renumber_skips_dropped_operands():
    # working list [s0, a, b, s1, c] (s0, s1 scalars, dropped):
    #   (1,0): s0*a -> [b, s1, c, a]   (2,1): s1*c -> [b, a, c]   (2,1): c.a -> [b, ca]   (1,0): ca.b
    # kept list [a, b, c]: only the last two steps contract: c.a at (2,0) -> [b, ca], then (1,0)
    steps = [(1, 0), (2, 1), (2, 1), (1, 0)]
    assert _layout_mod._renumber(steps, 5, (1, 2, 4)) == ((2, 0), (1, 0))


def test_cutensornet_backward_after_another_forward_of_the_same_plan(fake):
    """cuTensorNet keeps only the latest contraction's intermediates: an older graph's backward must
    re-contract its own operands first, not differentiate the newer ones."""
    inputs, output, sizes, ops = random_network(5, 9)
    plan = ContractionPlan(inputs, output, sizes)
    a = [o.clone().requires_grad_() for o in ops]
    b = [(2 * o + 1).requires_grad_() for o in ops]
    out_a = fake.contract(plan, a)
    out_b = fake.contract(plan, b)
    ga = torch.autograd.grad(functional(out_a), a)
    gb = torch.autograd.grad(functional(out_b), b)
    _, ha = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, range(len(ops)))
    _, hb = grads_of(lambda xs: full_einsum(inputs, output, xs), [(2 * o + 1) for o in ops], range(len(ops)))
    for x, y in zip(ga + gb, ha + hb):
        torch.testing.assert_close(x, y, atol=TOL, rtol=TOL)


def test_cutensornet_only_requested_gradients_and_no_warnings(fake):
    inputs, output, sizes, ops = random_network(4, 12, scalar=True, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    which = [1, 4, 7]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, g = grads_of(lambda xs: fake.contract(plan, xs), ops, which)
    _, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, which)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    grad_nets = [n for n in FakeNetwork.instances if n.qualifiers["requires_gradient"].any()]
    assert grad_nets and all(n.qualifiers["requires_gradient"].sum() <= len(which) for n in grad_nets)


def test_cutensornet_gradients_not_supported_fall_back_to_torch(fake):
    FakeNetwork.refuse_gradients = True
    inputs, output, sizes, ops = random_network(3, 8, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    which = list(range(len(ops)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, g = grads_of(lambda xs: fake.contract(plan, xs), ops, which)
        got2, g2 = grads_of(lambda xs: fake.contract(plan, xs), ops, which)  # second time: straight to torch
    want, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, which)
    torch.testing.assert_close(got, want, atol=TOL, rtol=TOL)
    for a, b, c in zip(g, g2, h):
        torch.testing.assert_close(a, c, atol=TOL, rtol=TOL)
        torch.testing.assert_close(b, c, atol=TOL, rtol=TOL)
    assert any("NOT_SUPPORTED" in r and "torch" in r for r in fake.fallbacks)


@pytest.mark.parametrize("convention", ["holomorphic", "scaled"])
def test_cutensornet_gradient_convention_is_matched_to_torch(fake, convention):
    """Whichever complex convention the library follows, the backend hands torch torch's gradients
    (a library matching neither sends the backward to torch)."""
    FakeNetwork.convention = convention
    inputs, output, sizes, ops = random_network(4, 12, scalar=True, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    which = list(range(len(ops)))
    _, g = grads_of(lambda xs: fake.contract(plan, xs), ops, which)
    _, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, which)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    assert ctn._CONVENTIONS[("cpu", torch.complex128)] == ("holomorphic" if convention == "holomorphic" else "unknown")
    assert any("convention" in r for r in fake.fallbacks) == (convention == "scaled")


def test_cutensornet_network_not_supported_falls_back_to_torch(fake):
    FakeNetwork.refuse_networks = True
    inputs, output, sizes, ops = random_network(1, 4, broadcast=True)
    plan = ContractionPlan(inputs, output, sizes)
    got, g = grads_of(lambda xs: fake.contract(plan, xs), ops, [0, 1])
    want, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, [0, 1])
    torch.testing.assert_close(got, want, atol=TOL, rtol=TOL)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    assert any("NOT_SUPPORTED" in r for r in fake.fallbacks)


def test_cutensornet_resolves_lazy_conjugation(fake):
    inputs, output, sizes, ops = random_network(2, 5)
    plan = ContractionPlan(inputs, output, sizes)
    conj = [o.conj() for o in ops]  # lazy views: their data pointers hold the unconjugated values
    assert any(c.is_conj() for c in conj)
    want = full_einsum(inputs, output, [o.conj().resolve_conj() for o in ops])
    torch.testing.assert_close(fake.contract(plan, conj), want, atol=TOL, rtol=TOL)


def test_cutensornet_refuses_operands_on_another_device(monkeypatch):
    backend = CuTensorNetBackend("cuda", _library=(FakeTensornet, FakeCutn))
    inputs, output, sizes, ops = random_network(1, 4)
    with pytest.raises(ValueError, match=r"Operand 0 is on cpu, but this cutensornet backend contracts on cuda"):
        backend.contract(ContractionPlan(inputs, output, sizes), ops)


def test_cutensornet_frees_networks_with_their_plan(fake):
    import gc

    inputs, output, sizes, ops = random_network(1, 4)
    plan = ContractionPlan(inputs, output, sizes)
    with torch.no_grad():
        fake.contract(plan, ops)
    (net,) = FakeNetwork.instances
    del plan
    gc.collect()
    assert net.freed and len(fake._networks) == 0


def test_cutensornet_graph_keeps_its_plan_and_network_alive(fake):
    """A plan evicted from the device's cache while an autograd graph still needs its network."""
    import gc

    inputs, output, sizes, ops = random_network(3, 8)
    plan = ContractionPlan(inputs, output, sizes)
    leaves = [o.clone().requires_grad_() for o in ops]
    out = fake.contract(plan, leaves)
    del plan
    gc.collect()
    assert not any(n.freed for n in FakeNetwork.instances)
    g = torch.autograd.grad(functional(out), leaves)
    _, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, range(len(ops)))
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    del out
    gc.collect()
    assert all(n.freed for n in FakeNetwork.instances)


def test_cutensornet_backward_after_clear_uses_torch(fake):
    inputs, output, sizes, ops = random_network(5, 9)
    plan = ContractionPlan(inputs, output, sizes)
    leaves = [o.clone().requires_grad_() for o in ops]
    out = fake.contract(plan, leaves)
    fake.clear()
    assert all(n.freed for n in FakeNetwork.instances)
    g = torch.autograd.grad(functional(out), leaves)
    _, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops, range(len(ops)))
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)


# --- on a GPU, for real ------------------------------------------------------------------------------------

BACKENDS = ["torch", "cutensornet"]


def _cuda_backend(name):
    reason = available_backends("cuda")[name]
    if reason is not None:
        if os.environ.get("QHYBRID_REQUIRE_CUTENSORNET") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return get_backend(name, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("net", NETWORKS, ids=lambda n: f"seed{n['seed']}-{n['n_tensors']}t")
def test_gpu_backend_matches_einsum_and_stays_on_device(name, net):
    backend = _cuda_backend(name)
    inputs, output, sizes, ops_cpu = random_network(**net)
    plan = ContractionPlan(inputs, output, sizes)
    ops = [o.cuda() for o in ops_cpu]
    which = list(range(len(ops)))
    leaves = [o.detach().clone().requires_grad_() for o in ops]
    for _ in range(2):  # the second call reuses the cached network with rebound operands
        out = backend.contract(plan, leaves)
        g = torch.autograd.grad(functional(out), leaves)
    assert out.device.type == "cuda" and all(x.device.type == "cuda" for x in g)
    want, h = grads_of(lambda xs: full_einsum(inputs, output, xs), ops_cpu, which)
    torch.testing.assert_close(out.detach().cpu(), want, atol=TOL, rtol=TOL)
    for a, b in zip(g, h):
        torch.testing.assert_close(a.cpu(), b, atol=TOL, rtol=TOL)


@pytest.mark.gpu
def test_gpu_cutensornet_gradients_come_from_cutensornet():
    """The library's own backward ran (no NOT_SUPPORTED fallback) on a hyperedge-free network."""
    backend = _cuda_backend("cutensornet")
    inputs = [(2, 3), (3, 4), (4, 5), (5, 2)]
    sizes = {2: 2, 3: 3, 4: 2, 5: 3}
    plan = ContractionPlan(inputs, (), sizes)
    ops = [torch.randn([sizes[i] for i in ix], dtype=torch.complex128, device="cuda", requires_grad=True)
           for ix in inputs]
    out = backend.contract(plan, ops)
    g = torch.autograd.grad(out.real, ops)
    h = torch.autograd.grad(full_einsum(inputs, (), ops).real, ops)
    for a, b in zip(g, h):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
    assert not any("backward runs in torch" in r for r in backend.fallbacks), backend.fallbacks


def _gpu_circuit_case(name, spec, monkeypatch=None, closed=False):
    import qhybrid
    from qhybrid.devices.tensornet import _simulate

    _cuda_backend(name)
    if closed:  # every measurement as closed <psi|O|psi> networks: the plans run through the backend
        monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    ref, ref_leaves = reference(spec, spec.n_wires)
    dev = qhybrid.device("tensornet", wires=spec.n_wires, torch_device="cuda", backend=name)
    with torch.device("cuda"):
        tape, leaves = build_tape(spec)
    (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
    for x, y in zip(flat(res), flat(ref)):
        assert x.device.type == "cuda" and x.shape == y.shape
        torch.testing.assert_close(x.cpu(), y, atol=TOL, rtol=0)
    for g, h in zip(grads(loss_of_cuda(res), leaves), grads(loss_of(ref), ref_leaves)):
        assert g.device.type == "cuda"
        torch.testing.assert_close(g.cpu(), h, atol=TOL, rtol=0)


def loss_of_cuda(results, seed=7):
    """tests/_circuits.loss_of with its CPU weights moved to each result's device."""
    g = torch.Generator().manual_seed(seed)
    total = 0
    for r in flat(results):
        w = torch.randn(r.shape, generator=g, dtype=torch.float64).to(r.device)
        total = total + (w * (r.real if r.is_complex() else r)).sum()
        if r.is_complex():
            total = total + (torch.randn(r.shape, generator=g, dtype=torch.float64).to(r.device) * r.imag).sum()
    return total


GPU_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.gpu
@pytest.mark.parametrize("name", BACKENDS)
@GPU_SETTINGS
@given(spec=circuits())
def test_gpu_random_circuits_match_default_qubit(name, spec):
    _gpu_circuit_case(name, spec)


@pytest.mark.gpu
@pytest.mark.parametrize("name", BACKENDS)
@GPU_SETTINGS
@given(spec=circuits(measurement_kinds=["expval_z", "expval_word", "expval_ham", "expval_herm", "expval_sum",
                                        "var_word", "var_herm", "probs"]))
def test_gpu_random_closed_networks_match_default_qubit(name, spec, monkeypatch):
    _gpu_circuit_case(name, spec, monkeypatch, closed=True)

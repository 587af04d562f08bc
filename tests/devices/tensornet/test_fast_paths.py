"""Every fast path of the tensornet simulator against PennyLane default.qubit on random circuits.

complex128 to 1e-10, complex64 to 1e-5, values and gradients (adjoint and parameter-shift). The fast
paths: the compiled state-vector program (product state, fused single-qubit gates in Kronecker blocks,
monomial gates as one gather, per-sample / per-variant gates, gates on non-adjacent or reversed wires,
sign-matrix Z words), vectorised gate building, the preprocessing cache, the stacked parameter-shift
parameters and the closed networks of wide circuits.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid

ONE_QUBIT = ["RX", "RY", "RZ", "PhaseShift", "Rot", "Hadamard", "S", "T", "PauliX", "PauliY", "PauliZ", "U3"]
TWO_QUBIT = ["CNOT", "CZ", "SWAP", "CRX", "CRY", "CRZ", "CRot", "IsingZZ", "ControlledPhaseShift", "ISWAP", "IsingXX"]
THREE_QUBIT = ["Toffoli", "CSWAP"]

TOL = {torch.complex128: 1e-10, torch.complex64: 1e-5}


def _random_ops(rng, n_wires, depth):
    """A list of (name, wires, n_params) describing a random circuit."""
    spec = []
    for _ in range(depth):
        r = rng.random()
        if r < 0.5 or n_wires < 2:
            name = ONE_QUBIT[rng.integers(len(ONE_QUBIT))]
            wires = [int(rng.integers(n_wires))]
        elif r < 0.9 or n_wires < 3:
            name = TWO_QUBIT[rng.integers(len(TWO_QUBIT))]
            wires = [int(w) for w in rng.choice(n_wires, 2, replace=False)]
        else:
            name = THREE_QUBIT[rng.integers(len(THREE_QUBIT))]
            wires = [int(w) for w in rng.choice(n_wires, 3, replace=False)]
        spec.append((name, wires, getattr(qml, name).num_params))
    return spec


def _circuit(spec, n_wires, observables):
    def f(x, weights):
        qml.AngleEmbedding(x, wires=range(n_wires), rotation="Y")
        k = 0
        for name, wires, n_params in spec:
            params = [weights[k + i] for i in range(n_params)]
            k += n_params
            getattr(qml, name)(*params, wires=wires)
        return [qml.expval(o) for o in observables]

    return f


def _n_params(spec):
    return sum(p for _, _, p in spec)


def _observables(n_wires, rng):
    obs = [qml.Z(i) for i in range(n_wires)]
    if n_wires > 1:
        obs.append(qml.Z(0) @ qml.Z(n_wires - 1))
        obs.append(qml.sum(*[qml.Z(i) for i in range(n_wires)]))
        a, b = (int(w) for w in rng.choice(n_wires, 2, replace=False))  # distinct: X(a) @ Y(a) is 1j * Z(a)
        obs.append(qml.X(a) @ qml.Y(b) if n_wires > 2 else qml.X(0))
    return obs


def random_case(seed):
    """(gate spec, wires, observables, broadcast inputs x, weights w) of a random circuit."""
    rng = np.random.default_rng(seed)
    n_wires = int(rng.integers(1, 7))
    spec = _random_ops(rng, n_wires, int(rng.integers(3, 25)))
    observables = _observables(n_wires, rng)
    batch = int(rng.integers(1, 5))
    x = torch.tensor(rng.uniform(-np.pi, np.pi, (batch, n_wires)))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, max(_n_params(spec), 1)))
    return spec, n_wires, observables, x, w


def _reference(spec, n_wires, observables, x, w):
    dev = qml.device("default.qubit", wires=n_wires)
    qn = qml.QNode(_circuit(spec, n_wires, observables), dev, interface="torch", diff_method="backprop")
    x = x.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    out = torch.stack(list(qn(x, w)))
    out = out.real if out.is_complex() else out
    loss = (out * torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))).sum()
    loss.backward()
    return out.detach(), x.grad, w.grad


def _ours(spec, n_wires, observables, x, w, dtype, diff_method):
    dev = qhybrid.device("tensornet", wires=n_wires, dtype=dtype)
    qn = qhybrid.qnode(dev, diff_method=diff_method)(_circuit(spec, n_wires, observables))
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = x.detach().clone().to(real).requires_grad_(True)
    w = w.detach().clone().to(real).requires_grad_(True)
    out = torch.stack(list(qn(x, w)))
    out = out.real if out.is_complex() else out
    loss = (out * torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))).sum()
    loss.backward()
    return out.detach(), x.grad, w.grad


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_random_circuits_adjoint_match_default_qubit(seed, dtype):
    spec, n_wires, observables, x, w = random_case(seed)
    ref = _reference(spec, n_wires, observables, x, w)
    got = _ours(spec, n_wires, observables, x, w, dtype, "adjoint")
    tol = TOL[dtype]
    for r, g in zip(ref, got):
        assert torch.allclose(g.to(torch.float64), r, atol=tol, rtol=0), (r - g.to(torch.float64)).abs().max()


@pytest.mark.parametrize("seed", range(6))
def test_random_circuits_parameter_shift_match_default_qubit(seed):
    rng = np.random.default_rng(100 + seed)
    n_wires = int(rng.integers(2, 6))
    spec = [s for s in _random_ops(rng, n_wires, 14) if s[0] not in ("U3", "CRot", "CRX", "CRY", "CRZ")]
    observables = [qml.Z(i) for i in range(n_wires)]
    x = torch.tensor(rng.uniform(-np.pi, np.pi, (1, n_wires)))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, max(_n_params(spec), 1)))
    ref = _reference(spec, n_wires, observables, x, w)
    got = _ours(spec, n_wires, observables, x, w, torch.complex128, "parameter-shift")
    assert torch.allclose(got[0], ref[0], atol=1e-10, rtol=0)
    assert torch.allclose(got[2], ref[2], atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_strongly_entangling_layers(dtype, diff_method):
    """The benchmark circuit (W1 shape, smaller): embedding, SEL, all Z expectations."""
    n_wires, batch = 5, 1 if diff_method == "parameter-shift" else 6
    observables = [qml.Z(i) for i in range(n_wires)]

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n_wires), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n_wires))
        return [qml.expval(o) for o in observables]

    x = torch.rand(batch, n_wires, dtype=torch.float64)
    w = torch.rand(3, n_wires, 3, dtype=torch.float64)
    ref_qn = qml.QNode(f, qml.device("default.qubit", wires=n_wires), interface="torch", diff_method="backprop")
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    ref = torch.stack(ref_qn(xr, wr))
    ref.sum().backward()
    dev = qhybrid.device("tensornet", wires=n_wires, dtype=dtype)
    qn = qhybrid.qnode(dev, diff_method=diff_method)(f)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    for _ in range(2):  # the second call replays cached plans (and the preprocessing cache)
        xo, wo = x.clone().to(real).requires_grad_(True), w.clone().to(real).requires_grad_(True)
        out = torch.stack(qn(xo, wo))
        out.sum().backward()
        tol = TOL[dtype]
        assert torch.allclose(out.double(), ref.detach(), atol=tol, rtol=0)
        assert torch.allclose(wo.grad.double(), wr.grad, atol=tol, rtol=0)
        if diff_method == "adjoint":
            assert torch.allclose(xo.grad.double(), xr.grad, atol=tol, rtol=0)
    assert dev.plan_cache_info().hits >= 1


@pytest.mark.parametrize("batch", [None, 3])
def test_parameter_shift_stack_redoes_only_the_differing_rows(batch, monkeypatch):
    """Shifted variants differ in one parameter each: a stacked gate runs as row 0's gate (Kronecker
    fused) plus a redo of its few differing rows. Both layouts (with and without broadcast data) must match
    default.qubit, and the sparse redo must actually run."""
    from qhybrid.devices.tensornet.engines.statevector.program import StateVectorProgram

    taken = []
    original = StateVectorProgram._sparse_rows

    def spy(self, values, slots):
        rows = original(self, values, slots)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(StateVectorProgram, "_sparse_rows", spy)
    n_wires = 5

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n_wires), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n_wires))
        qml.RX(w[0, 0, 0] * 0.5, wires=2)  # a second gate on a wire, sharing a parameter
        return qml.expval(qml.Z(0) @ qml.Z(3)), qml.expval(qml.Y(2))

    rng = np.random.default_rng(5)
    shape = (n_wires,) if batch is None else (batch, n_wires)
    x = torch.tensor(rng.uniform(-np.pi, np.pi, shape))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, (3, n_wires, 3)))
    ref_qn = qml.QNode(f, qml.device("default.qubit", wires=n_wires), interface="torch", diff_method="backprop")
    wr = w.clone().requires_grad_(True)
    ref = torch.stack(ref_qn(x, wr))
    (ref * torch.tensor([0.7, -1.3]).reshape(2, *[1] * (ref.ndim - 1))).sum().backward()
    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=n_wires), diff_method="parameter-shift")(f)
    wo = w.clone().requires_grad_(True)
    out = torch.stack(qn(x, wo))
    (out * torch.tensor([0.7, -1.3]).reshape(2, *[1] * (out.ndim - 1))).sum().backward()
    assert torch.allclose(out, ref.detach(), atol=1e-10, rtol=0)
    assert torch.allclose(wo.grad, wr.grad, atol=1e-10, rtol=0)
    assert any(taken)


def test_state_and_probs_read_from_vector_program():
    """Non-Z measurements take the state out of the vector program's layout."""
    n = 3

    def f(x):
        qml.RY(x, wires=0)
        qml.Hadamard(1)
        qml.CNOT([0, 2])
        qml.CRX(x, wires=[2, 0])
        return qml.probs(wires=[2, 0]), qml.expval(qml.X(1)), qml.var(qml.Z(0))

    x = torch.tensor([0.3, 1.1], dtype=torch.float64)
    ref = qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch")(x)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(f)(x)
    for r, g in zip(ref, got):
        assert torch.allclose(g, r, atol=1e-10)


def test_global_phase_and_stacked_variants_of_matrix_gates():
    """Generic-matrix gates stacked across shifted variants, with a global phase in the circuit."""

    def f(w):
        qml.Hadamard(0)
        qml.U3(w[0], w[1], w[2], wires=0)
        qml.IsingXY(w[3], wires=[0, 1])
        qml.GlobalPhase(0.5)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    w = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5], dtype=torch.float64)
    wr = w.clone().requires_grad_(True)
    ref = qml.QNode(f, qml.device("default.qubit", wires=2), interface="torch")(wr)
    ref.backward()
    for method in ("adjoint", "parameter-shift"):
        wo = w.clone().requires_grad_(True)
        got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method)(f)(wo)
        got.backward()
        assert torch.allclose(got, ref, atol=1e-10)
        assert torch.allclose(wo.grad[:4], wr.grad[:4], atol=1e-10)


def _ladder(n, theta):
    for layer in range(2):
        for i in range(n):
            qml.RY(theta[layer, i], wires=i)
        for i in range(n - 1):
            qml.CNOT([i, i + 1])


def test_wide_circuit_closed_network_matches_default_qubit():
    """W3 shape at 22 wires (closed light-cone network) against default.qubit."""
    n = 22

    def f(t):
        _ladder(n, t)
        return qml.expval(qml.Z(n // 2))

    t = torch.rand(2, n, dtype=torch.float64)
    tr = t.clone().requires_grad_(True)
    ref = qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch", diff_method="adjoint")(tr)
    ref.backward()
    to = t.clone().requires_grad_(True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(f)(to)
    got.backward()
    assert torch.allclose(got, ref, atol=1e-10)
    assert torch.allclose(to.grad, tr.grad, atol=1e-10)


def test_wide_hamiltonian_as_one_mpo_network_matches_its_terms():
    """A Pauli sentence on a wide circuit is one MPO network; it must equal the sum of its words, each
    measured through its own light-cone network (the path checked against default.qubit above)."""
    n = 24
    terms = [(0.5 + 0.1 * i, qml.Z(i)) for i in range(n)]
    terms += [(0.3, qml.X(0) @ qml.X(1)), (-0.7, qml.Y(3) @ qml.Z(7) @ qml.Y(9)), (1.1, qml.Z(2) @ qml.Z(20))]
    terms += [(0.25, qml.X(5) @ qml.Z(6)), (2.0, qml.Identity(0))]
    hamiltonian = qml.dot([c for c, _ in terms], [o for _, o in terms])

    def f(t):
        _ladder(n, t)
        return qml.expval(hamiltonian)

    def g(t):
        _ladder(n, t)
        return [qml.expval(o) for _, o in terms]

    dev = qhybrid.device("tensornet", wires=n)
    t = torch.rand(2, n, dtype=torch.float64)
    ta, tb = t.clone().requires_grad_(True), t.clone().requires_grad_(True)
    got = qhybrid.qnode(dev, diff_method="adjoint")(f)(ta)
    got.backward()
    parts = qhybrid.qnode(dev, diff_method="adjoint")(g)(tb)
    ref = sum(c * p for (c, _), p in zip(terms, parts))
    ref.backward()
    assert torch.allclose(got, ref, atol=1e-10)
    assert torch.allclose(ta.grad, tb.grad, atol=1e-10)


@pytest.fixture
def mallopt_calls(monkeypatch):
    """glibc's ``mallopt`` calls, recorded instead of made, with the allocator's once-per-process flags reset."""
    import ctypes
    import sys

    from qhybrid.devices.tensornet.engines.statevector import allocator as _sv_allocator

    if not sys.platform.startswith("linux"):
        pytest.skip("glibc tuning applies on Linux only")
    seen = []

    class FakeLibc:
        def mallopt(self, option, value):
            seen.append((option, value))

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(_sv_allocator, "_TUNED", False)
    monkeypatch.setattr(_sv_allocator, "_LARGE", False)
    return seen


@pytest.mark.parametrize("setting, calls", [("0", 0), ("1", 2)])
def test_allocator_tuning_can_be_switched_off(monkeypatch, mallopt_calls, setting, calls):
    from qhybrid.devices.tensornet.engines.statevector import allocator as _sv_allocator

    seen = mallopt_calls
    monkeypatch.setenv("QHYBRID_MALLOC_TUNING", setting)
    _sv_allocator.tune_allocator(_sv_allocator.LARGE_STATE_BYTES - 1)  # small states never tune
    assert seen == []
    _sv_allocator.tune_allocator(_sv_allocator.LARGE_STATE_BYTES)
    assert len(seen) == calls


@pytest.mark.parametrize("setting", ["0", "1"])
def test_large_intermediates_raise_the_heap_threshold_once(monkeypatch, mallopt_calls, setting):
    """A contraction whose intermediates exceed the state threshold asks glibc (once) to serve them from the
    heap; smaller ones leave the settings alone; the opt-out holds here too."""
    from qhybrid.devices.tensornet.backends.torch_backend import TorchBackend
    from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
    from qhybrid.devices.tensornet.engines.statevector import allocator as _sv_allocator

    seen = mallopt_calls
    monkeypatch.setenv("QHYBRID_MALLOC_TUNING", setting)
    small = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
    TorchBackend("cpu").contract(small, [torch.ones(2, 3), torch.ones(3, 4)])
    assert seen == []
    monkeypatch.setattr(_sv_allocator, "MALLOC_MMAP_THRESHOLD", 1024)  # (bytes: 64 complex128 elements)
    big = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 64})  # a result of 128 elements
    ops = [torch.ones(2, 3, dtype=torch.complex128), torch.ones(3, 64, dtype=torch.complex128)]
    for _ in range(2):
        out = TorchBackend("cpu").contract(big, ops)
        del out
    want = [(-3, _sv_allocator.LARGE_INTERMEDIATE_MMAP_THRESHOLD), (-1, _sv_allocator.MALLOC_TRIM_THRESHOLD)]
    assert seen == (want if setting == "1" else [])
    assert _sv_allocator._TUNED  # the state vectors' own tuning no longer overrides it


@pytest.mark.parametrize("gate", [qml.RZ, qml.PhaseShift, qml.U1, qml.RX])
@pytest.mark.parametrize("measure", ["Z", "X", "probs"])
@pytest.mark.parametrize("diff_method", ["parameter-shift", "adjoint"])
def test_an_adjoint_gate_alone_is_a_product_state_of_a_conjugated_column(gate, measure, diff_method):
    """A circuit whose only gate is ``adjoint(RZ)`` is one wire's vector: a column of the gate's conjugated matrix, a
    lazy conjugate view, which the Z-word readout read as real numbers ("view_as_real doesn't work on unresolved
    conjugated tensors", the forward of parameter-shift; found by a fuzzing helper). Batched too."""

    def circuit(x):
        qml.adjoint(gate)(x, wires=0)
        if measure == "probs":
            return qml.probs(wires=0)
        return qml.expval(qml.Z(0) if measure == "Z" else qml.X(0))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=1), interface="torch", diff_method="backprop")
    for x0 in (0.3, [0.3, -1.2, 2.0]):
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        got, want = ours(x), ref(x)
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
        (g,), (h,) = torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(g, h, atol=1e-10, rtol=0)

"""The state-vector program's actions (``engines/statevector/kernels``): a real gate matrix multiplies the state's
real view (``REAL_GEMM_MIN_AMPLITUDES``, lowered to 0 here so that small circuits take it).

Random circuits with real gates (``RY``, Hadamard, their Kronecker blocks) among complex ones, against
default.qubit to 1e-10 (complex128) and 1e-5 (complex64): values and gradients, batched inputs, the bound and
general paths, states kept from the forward pass and recomputed by the adjoint walk. A spy checks that the
real path ran, and a direct check that a complex matrix never takes it.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from qhybrid.devices.tensornet.engines.statevector import adjoint as _sv_adjoint
from qhybrid.devices.tensornet.engines.statevector import block_cotangent, kernels

TOL = {torch.complex128: 1e-10, torch.complex64: 1e-5}


def _hea(n: int, layers: int, extra: list):
    """RY layers and a CNOT brickwork (real blocks), with ``extra`` complex gates (name, wire) after layer 0."""

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        for layer in range(layers):
            for i in range(n):
                qml.RY(w[layer, i], wires=i)
                if layer == 1 and i % 3 == 0:
                    qml.Hadamard(wires=i)
            for i in range(0, n - 1, 2):
                qml.CNOT([i, i + 1])
            for i in range(1, n - 1, 2):
                qml.CNOT([i, i + 1])
            if layer == 0:
                for name, wire, angle in extra:
                    getattr(qml, name)(angle * w[0, wire], wires=wire)
        return [qml.expval(qml.Z(i)) for i in range(n)] + [qml.expval(qml.X(0) @ qml.Y(n - 1))]

    return f


def _case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 8))  # a Kronecker block of 4 wires leaves wires after it: not the flat GEMM
    layers = int(rng.integers(2, 4))
    extra = [(str(rng.choice(["RX", "RZ", "PhaseShift"])), int(rng.integers(n)), float(rng.uniform(0.5, 2)))
             for _ in range(int(rng.integers(0, 3)))]
    batch = int(rng.integers(1, 4))
    x = torch.tensor(rng.uniform(-np.pi, np.pi, (batch, n)))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, (layers, n)))
    return n, layers, extra, x, w


def _loss_and_grads(qn, x, w):
    out = torch.stack(list(qn(x, w)))
    weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))
    return out.detach(), torch.autograd.grad((out * weights).sum(), (x, w))


@pytest.fixture
def real_gemms(monkeypatch):
    """Every state takes the real path; counts the real GEMMs that ran."""
    monkeypatch.setattr(kernels, "REAL_GEMM_MIN_AMPLITUDES", 0)
    calls = []
    original = kernels._real_part

    def spy(psi, m, known_real):
        real = original(psi, m, known_real)
        calls.append(real is not None)
        return real

    monkeypatch.setattr(kernels, "_real_part", spy)
    return calls


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
@pytest.mark.parametrize("bound", [True, False])
@pytest.mark.parametrize("keep_states", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_real_blocks_match_default_qubit(seed, keep_states, bound, dtype, real_gemms, monkeypatch):
    monkeypatch.setattr(_bound, "ENABLED", bound)
    if not keep_states:
        monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    n, layers, extra, x, w = _case(seed)
    ref = qml.QNode(_hea(n, layers, extra), qml.device("default.qubit", wires=n), interface="torch",
                    diff_method="backprop")
    want, want_grads = _loss_and_grads(ref, x.clone().requires_grad_(True), w.clone().requires_grad_(True))
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, dtype=dtype), diff_method="adjoint")(_hea(n, layers, extra))
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    xs, ws = x.to(real).requires_grad_(True), w.to(real).requires_grad_(True)
    for _ in range(2):  # the first call preprocesses, the second runs the bound path where enabled
        got, got_grads = _loss_and_grads(ours, xs, ws)
        assert torch.allclose(got.double(), want, atol=TOL[dtype], rtol=0), (got.double() - want).abs().max()
        for g, r in zip(got_grads, want_grads):
            assert torch.allclose(g.double(), r, atol=TOL[dtype], rtol=0), (g.double() - r).abs().max()
    assert any(real_gemms), "no real GEMM ran: the test would not see that path"


def test_a_complex_or_recorded_matrix_keeps_the_complex_gemm(real_gemms):
    psi = torch.randn(1 << 6, 1, 1, dtype=torch.complex128)
    rx = qml.matrix(qml.RX(0.3, wires=0))
    complex_m = torch.kron(torch.tensor(rx), torch.eye(2, dtype=torch.complex128))
    real_m = torch.kron(torch.tensor(qml.matrix(qml.RY(0.3, wires=0))), torch.eye(2)).to(torch.complex128)
    for m, known_real in ((complex_m, False), (real_m, True), (real_m.clone().requires_grad_(True), True)):
        got = kernels.apply_plain(psi, m, 1, 2, known_real)  # real-valued by construction: the plan knows it
        want = torch.einsum("ij,ajr->air", m, psi.reshape(2, 4, -1)).reshape(psi.shape)
        assert torch.allclose(got, want, atol=1e-12, rtol=0)
    assert real_gemms == [False, True, False]


@pytest.mark.parametrize("chunk_elements", [1, 64, 1 << 20])
@pytest.mark.parametrize("trace_rest", [0, 4])
def test_block_cotangent_in_chunks_and_by_trace_matches_the_plain_sum(chunk_elements, trace_rest, monkeypatch):
    monkeypatch.setattr(block_cotangent, "COTANGENT_CHUNK_ELEMENTS", chunk_elements)
    monkeypatch.setattr(block_cotangent, "COTANGENT_TRACE_MAX_REST", trace_rest)
    gen = torch.Generator().manual_seed(7)
    n = 9
    for q, k in [(0, 2), (1, 2), (3, 3), (5, 2), (6, 1), (7, 2), (4, 4)]:
        h, before = (torch.randn(1 << n, 1, 1, dtype=torch.complex128, generator=gen) for _ in range(2))
        m = torch.randn(1 << k, 1 << k, dtype=torch.complex128, generator=gen)
        want = torch.einsum("air,ajr->ij", h.reshape(1 << q, 1 << k, -1), before.reshape(1 << q, 1 << k, -1)).conj()
        got = block_cotangent.block_cotangent(h, before, m, q, k, False)
        assert torch.allclose(got, want, atol=1e-10, rtol=0), (q, k, (got - want).abs().max())


@pytest.mark.parametrize("seed", range(3))
def test_gradients_with_chunked_and_traced_cotangents_match_default_qubit(seed, monkeypatch):
    monkeypatch.setattr(block_cotangent, "COTANGENT_CHUNK_ELEMENTS", 16)
    monkeypatch.setattr(block_cotangent, "COTANGENT_TRACE_MAX_REST", 2 if seed % 2 else 0)
    n, layers, extra, x, w = _case(100 + seed)
    ref = qml.QNode(_hea(n, layers, extra), qml.device("default.qubit", wires=n), interface="torch",
                    diff_method="backprop")
    want, want_grads = _loss_and_grads(ref, x.clone().requires_grad_(True), w.clone().requires_grad_(True))
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(_hea(n, layers, extra))
    xs, ws = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    for _ in range(2):
        got, got_grads = _loss_and_grads(ours, xs, ws)
        assert torch.allclose(got, want, atol=1e-10, rtol=0)
        for g, r in zip(got_grads, want_grads):
            assert torch.allclose(g, r, atol=1e-10, rtol=0), (g - r).abs().max()

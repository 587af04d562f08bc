"""Recycled state buffers (``engines/statevector/buffers``): a run and its adjoint walk write into states they
made themselves, never into one somebody else holds.

A second backward through the same graph (``retain_graph``) re-reads the final state and the kept states, and a
returned state is the user's: both must come out of a backward unchanged. Random circuits (monomials with
phases, kept and recomputed states, bound and general paths) against default.qubit to 1e-10.
"""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from qhybrid.devices.tensornet.engines.statevector import adjoint as _sv_adjoint
from qhybrid.devices.tensornet.engines.statevector.buffers import StatePool, fresh

from test_fast_paths import _circuit, random_case

TOL = 1e-10


def _loss(outs):
    out = torch.stack([o.real if o.is_complex() else o for o in outs])
    weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))
    return (out * weights).sum()


def _ours_and_reference_gradients(seed):
    """A random circuit's qhybrid adjoint qnode, its inputs, and default.qubit's gradients for them."""
    spec, n, observables, x, w = random_case(seed)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(_circuit(spec, n, observables))
    ref = qml.QNode(_circuit(spec, n, observables), qml.device("default.qubit", wires=n), interface="torch",
                    diff_method="backprop")
    x, w = x.requires_grad_(True), w.requires_grad_(True)
    want = torch.autograd.grad(_loss(ref(x, w)), (x, w))
    return ours, x, w, want


@pytest.mark.parametrize("bound", [True, False])
@pytest.mark.parametrize("keep_states", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_a_second_backward_through_the_same_graph_gives_the_same_gradients(seed, keep_states, bound, monkeypatch):
    monkeypatch.setattr(_bound, "ENABLED", bound)
    if not keep_states:
        monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    ours, x, w, want = _ours_and_reference_gradients(2000 + seed)
    ours(x, w)  # first call preprocesses; the next ones run the gathered (bound) path
    loss = _loss(ours(x, w))
    first = torch.autograd.grad(loss, (x, w), retain_graph=True)
    second = torch.autograd.grad(loss, (x, w))
    for a, b, r in zip(first, second, want):
        assert torch.allclose(a, r, atol=TOL, rtol=0), (a - r).abs().max()
        assert torch.equal(a, b)


@pytest.mark.parametrize("bound", [True, False])
def test_a_returned_state_is_not_overwritten_by_the_backward_walk(bound, monkeypatch):
    monkeypatch.setattr(_bound, "ENABLED", bound)
    monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    n = 3

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        qml.S(wires=0)
        qml.CZ(wires=[0, 2])
        return qml.state()

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x = torch.rand(4, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)
    probe = torch.linspace(-1.0, 1.0, 1 << n, dtype=torch.float64)
    want_state = ref(x, w).detach()
    want = torch.autograd.grad((ref(x, w).real * probe).sum(), (x, w))
    for _ in range(2):
        state = ours(x, w)
        before = state.detach().clone()
        got = torch.autograd.grad((state.real * probe).sum(), (x, w))
        assert torch.equal(state.detach(), before)
        assert torch.allclose(before, want_state, atol=TOL, rtol=0)
        for g, r in zip(got, want):
            assert torch.allclose(g, r, atol=TOL, rtol=0), (g - r).abs().max()


def test_pool_hands_out_only_matching_buffers_and_fresh_sees_shared_storage():
    pool = StatePool()
    a = torch.zeros(8, 1, 2, dtype=torch.complex128)
    pool.give(a)
    assert pool.take(torch.zeros(8, 1, 1, dtype=torch.complex128)) is None
    assert pool.take(torch.zeros(8, 1, 2, dtype=torch.complex64)) is None
    assert pool.take(a) is a and pool.take(a) is None
    pool.give(torch.zeros(8, 1, 4, dtype=torch.complex128)[..., ::2])  # not contiguous: never an out= buffer
    assert pool.take(a) is None
    assert not fresh(a[1:], [a]) and fresh(a.clone(), [a])


@pytest.mark.parametrize("seed", range(4))
def test_the_product_state_vjp_split_for_large_states_matches(seed, monkeypatch):
    """Above PRODUCT_VJP_SPLIT_BYTES the product-state VJP reduces one wire value at a time (W5's memory)."""
    from qhybrid.devices.tensornet.engines.statevector import product

    monkeypatch.setattr(product, "PRODUCT_VJP_SPLIT_BYTES", 0)
    monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    ours, x, w, want = _ours_and_reference_gradients(3000 + seed)
    for _ in range(2):
        got = torch.autograd.grad(_loss(ours(x, w)), (x, w))
        for a, r in zip(got, want):
            assert torch.allclose(a, r, atol=TOL, rtol=0), (a - r).abs().max()

"""The adjoint state-vector program (``AdjointProgram``) against PennyLane default.qubit.

Random circuits, called several times so that later calls take the gathered-inputs path (the circuit as
one autograd node between the user's tensors and the results); both backward walks (states kept from
the forward pass, and states recomputed by un-applying the actions); broadcast inputs with per-sample
gradients; partial ``requires_grad``; float32; Hessians (the node falls back to torch reverse mode);
non-unitary user matrices (torch reverse mode); and the shape of the recorded autograd graph.
"""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from qhybrid.devices.tensornet.engines.statevector import adjoint as _sv_adjoint
from qhybrid.devices.tensornet.engines.statevector import program as _statevector

from test_fast_paths import _circuit, random_case
from _autograd_graph import autograd_node_names

TOL = 1e-10


def _pair(spec, n_wires, observables, diff_method="adjoint", dtype=torch.complex128):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n_wires, dtype=dtype), diff_method=diff_method)(
        _circuit(spec, n_wires, observables)
    )
    ref = qml.QNode(_circuit(spec, n_wires, observables), qml.device("default.qubit", wires=n_wires),
                    interface="torch", diff_method="backprop")
    return ours, ref


def _value_and_grads(qn, x, w):
    out = torch.stack([o.real if o.is_complex() else o for o in qn(x, w)])
    weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))
    leaves = [t for t in (x, w) if t.requires_grad]
    grads = torch.autograd.grad((out * weights).sum(), leaves)
    return out.detach(), grads


def _random_case(seed):
    return random_case(1000 + seed)


@pytest.mark.parametrize("keep_states", [True, False])
@pytest.mark.parametrize("seed", range(10))
def test_random_circuits_match_default_qubit_on_every_call(seed, keep_states, monkeypatch):
    if not keep_states:  # every state recomputed by un-applying the (unitary) actions
        monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    spec, n_wires, observables, x, w = _random_case(seed)
    ours, ref = _pair(spec, n_wires, observables)
    x, w = x.requires_grad_(True), w.requires_grad_(True)
    want, want_grads = _value_and_grads(ref, x, w)
    for _ in range(3):  # the first call preprocesses; later ones differentiate the gathered inputs
        got, got_grads = _value_and_grads(ours, x, w)
        assert torch.allclose(got, want, atol=TOL, rtol=0), (got - want).abs().max()
        for g, r in zip(got_grads, want_grads):
            assert torch.allclose(g, r, atol=TOL, rtol=0), (g - r).abs().max()


@pytest.mark.parametrize("seed", range(4))
def test_partial_requires_grad_gives_only_those_gradients(seed):
    spec, n_wires, observables, x, w = _random_case(seed)
    ours, ref = _pair(spec, n_wires, observables)
    w = w.requires_grad_(True)  # data x is a plain tensor
    want, (want_w,) = _value_and_grads(ref, x, w)
    for _ in range(2):
        got, (got_w,) = _value_and_grads(ours, x, w)
        assert torch.allclose(got_w, want_w, atol=TOL, rtol=0)
    x2 = x.clone().requires_grad_(True)  # and the other way round: inputs only
    _, (want_x,) = _value_and_grads(ref, x2, w.detach())
    for _ in range(2):
        _, (got_x,) = _value_and_grads(ours, x2, w.detach())
        assert torch.allclose(got_x, want_x, atol=TOL, rtol=0)


def test_float32_parameters_get_float32_gradients_that_match():
    spec, n_wires, observables, x, w = _random_case(3)
    ours, ref = _pair(spec, n_wires, observables, dtype=torch.complex64)
    want, want_grads = _value_and_grads(ref, x.clone().requires_grad_(True), w.clone().requires_grad_(True))
    x32, w32 = x.float().requires_grad_(True), w.float().requires_grad_(True)
    for _ in range(2):
        got, got_grads = _value_and_grads(ours, x32, w32)
        assert got.dtype == torch.float32
        for g, r in zip(got_grads, want_grads):
            assert g.dtype == torch.float32
            assert torch.allclose(g.double(), r, atol=1e-4, rtol=0)


def test_hessian_through_the_node_with_a_source_that_views_another():
    """``w`` feeds the template and ``w[0, 0, 0]`` a gate of its own: a view of another input, which
    the higher-order path must not count twice."""
    n = 3

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        qml.CRX(w[0, 0, 0], wires=[0, 2])
        return [qml.expval(qml.Z(i)) for i in range(n)]

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x = torch.rand(4, n, dtype=torch.float64)
    w = torch.rand(2, n, 3, dtype=torch.float64)
    ours(x, w)  # first call: preprocessing; the Hessian then runs the gathered path
    h_ours = torch.autograd.functional.hessian(lambda w_: torch.stack(ours(x, w_)).sum(), w)
    h_ref = torch.autograd.functional.hessian(lambda w_: torch.stack(ref(x, w_)).sum(), w)
    assert torch.allclose(h_ours, h_ref, atol=TOL, rtol=0), (h_ours - h_ref).abs().max()


def test_non_unitary_user_matrix_is_differentiated_by_torch(monkeypatch):
    """The walk back inverts actions by their conjugate transpose, so a non-unitary QubitUnitary must not
    reach it: such programs keep torch reverse mode (and agree with default.qubit)."""
    m = torch.tensor([[1.0, 0.5], [0.0, 0.8]], dtype=torch.complex128)

    def circuit(w):
        qml.RY(w[0], wires=0)
        qml.CNOT(wires=[0, 1])
        qml.QubitUnitary(m, wires=1, unitary_check=False)
        qml.RX(w[1], wires=1)
        return qml.expval(qml.Z(1))

    w = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    (g_ref,) = torch.autograd.grad(ref(w), w)
    monkeypatch.setattr(_sv_adjoint, "KEEP_STATES_MAX_BYTES", 0)
    for _ in range(2):
        (g,) = torch.autograd.grad(ours(w), w)
        assert torch.allclose(g, g_ref, atol=TOL, rtol=0)




@pytest.mark.parametrize("bound", [True, False])
def test_one_step_records_one_autograd_node_for_the_circuit(monkeypatch, bound):
    """Between the user's tensors and the results: one node for the circuit (no per-parameter views or
    stacks). Bound (the default for gathered circuits): BoundNode builds the gate matrices inside itself and
    records nothing else. General path: ExecuteTapes, inside it one AdjointProgram node for the whole state
    evolution and measurement, never the op-by-op torch program."""
    n = 4
    monkeypatch.setattr(_bound, "ENABLED", bound)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit)
    x = torch.rand(8, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(5, n, 3, dtype=torch.float64, requires_grad=True)
    qn(x, w)

    programs, op_by_op = [], []
    apply = _statevector.AdjointProgram.apply
    run = _statevector.kernels.run
    monkeypatch.setattr(_statevector.AdjointProgram, "apply", lambda *a: programs.append(1) or apply(*a))

    def spy_run(*a, **k):
        if k.get("differentiable"):
            op_by_op.append(1)
        return run(*a, **k)

    monkeypatch.setattr(_statevector.kernels, "run", spy_run)
    out = torch.stack(qn(x, w))
    names = autograd_node_names(out.sum())
    node = "BoundNodeBackward" if bound else "ExecuteTapesBackward"
    assert sorted(names) == ["AccumulateGrad", "AccumulateGrad", node, "StackBackward0", "SumBackward0"]
    out.sum().backward()
    assert programs == ([] if bound else [1]) and op_by_op == []
    assert x.grad is not None and w.grad is not None


def test_only_some_product_wires_need_gradients():
    """The product-state walk when only early wires' vectors carry gradients (constant rotations after)."""
    n = 4

    def circuit(x, w):
        qml.RY(x[:, 0], wires=0)
        qml.RX(x[:, 1], wires=1)
        for i in range(2, n):
            qml.RY(torch.tensor(0.3 * i, dtype=torch.float64), wires=i)
        for i in range(n - 1):
            qml.CNOT(wires=[i, i + 1])
        qml.Rot(w[0], w[1], w[2], wires=n - 1)
        return [qml.expval(qml.Z(i)) for i in range(n)]

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x = torch.rand(3, 2, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, dtype=torch.float64, requires_grad=True)
    want, want_grads = _value_and_grads(ref, x, w)
    for _ in range(2):
        got, got_grads = _value_and_grads(ours, x, w)
        assert torch.allclose(got, want, atol=TOL, rtol=0)
        for g, r in zip(got_grads, want_grads):
            assert torch.allclose(g, r, atol=TOL, rtol=0), (g - r).abs().max()

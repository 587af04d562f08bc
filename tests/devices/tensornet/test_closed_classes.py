"""Closed cone classes run together (engines/lightcone/closed_classes.py): against default.qubit, values,
gradients and second derivatives, classes of one and of many members, members with distinct and with shared
parameter rows, X / Y / Z words."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import closed_classes, closed_sourced, whole

RING = [(i, (i + 1) % 8) for i in range(8)]  # every edge's cone alike: one class of 8 members
IRREGULAR = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (0, 4), (2, 6), (1, 7)]


def _circuit(edges, words, spread=0.0):
    """QAOA-shaped; ``spread`` > 0 gives every edge its own angle (members of a class then differ)."""

    def circuit(gamma, beta):
        for w in range(8):
            qml.Hadamard(w)
        for layer in range(2):
            for k, (u, v) in enumerate(edges):
                angle = gamma[layer] * (1 + spread * k)
                if edges is not RING and k % 3 == 2:
                    qml.CRZ(angle, wires=[u, v])
                else:
                    qml.IsingZZ(angle, wires=[u, v])
            for w in range(8):
                qml.RX(beta[layer], wires=w)
                qml.RY(0.3 * beta[layer] + spread * w, wires=w)
        return qml.expval(qml.Hamiltonian([0.5 + 0.1 * k for k in range(len(words))], words))

    return circuit


@pytest.fixture
def closed_classes_runs(monkeypatch):
    """Every cone class a closed network, no whole-circuit network, and a count of together runs."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    runs = []
    run = closed_classes.ClassesTogether.run
    monkeypatch.setattr(closed_classes.ClassesTogether, "run", lambda self, p: runs.append(1) or run(self, p))
    shared = closed_classes.SharedTogether.run
    monkeypatch.setattr(closed_classes.SharedTogether, "run", lambda self, c, d: runs.append(2) or shared(self, c, d))
    sourced = closed_sourced.SourcedShared.run  # (shared rows known from the plan)
    monkeypatch.setattr(closed_sourced.SourcedShared, "run", lambda self, p: runs.append(3) or sourced(self, p))
    return runs


CASES = {  # (edges, words, spread, whether the classes run together)
    "ring-shared": (RING, [qml.Z(u) @ qml.Z(v) for u, v in RING], 0.0, True),  # one class, one distinct row
    "ring-distinct": (RING, [qml.Z(u) @ qml.Z(v) for u, v in RING], 0.1, True),  # one class of 8 members
    "irregular-shared": (IRREGULAR, [qml.Z(u) @ qml.Z(v) for u, v in IRREGULAR], 0.0, True),  # shared rows
    "irregular-xyz": (
        IRREGULAR, [qml.Z(0) @ qml.Z(1), qml.X(3), qml.Y(5) @ qml.Z(6), qml.X(2) @ qml.Y(7), qml.Z(4)], 0.1, True
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_closed_classes_together_match_default_qubit(case, dtype, closed_classes_runs):
    edges, words, spread, together = CASES[case]
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    tol = 1e-10 if dtype == torch.complex128 else 2e-5
    circuit = _circuit(edges, words, spread)
    gamma, beta = torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([1.1, 0.3], dtype=torch.float64)
    g, b = gamma.to(real).requires_grad_(), beta.to(real).requires_grad_()
    value = qhybrid.qnode(qhybrid.device("tensornet", wires=8, dtype=dtype))(circuit)(g, b)
    grads = torch.autograd.grad(value, (g, b))
    rg, rb = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(rg, rb)
    want_grads = torch.autograd.grad(want, (rg, rb))
    assert bool(closed_classes_runs) == together
    assert abs(float(value) - float(want)) < tol
    for a, w in zip(grads, want_grads):
        assert torch.allclose(a.to(torch.float64), w, atol=tol)


def test_closed_classes_together_second_derivatives(closed_classes_runs):
    circuit = _circuit(*CASES["irregular-xyz"][:3])
    x = torch.tensor([0.4, -0.9, 1.1, 0.3], dtype=torch.float64)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=8), diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch", diff_method="backprop")
    hess = torch.autograd.functional.hessian(lambda v: node(v[:2], v[2:]), x)
    want = torch.autograd.functional.hessian(lambda v: ref(v[:2], v[2:]), x)
    assert closed_classes_runs
    assert torch.allclose(hess, want, atol=1e-10)


def _assert_matches_default_qubit(circuit):
    """The float64 value and gradients of ``circuit(gamma, beta)`` on the tensornet device equal
    default.qubit's to 1e-10."""
    gamma, beta = torch.tensor([0.4, -0.9], dtype=torch.float64), torch.tensor([1.1, 0.3], dtype=torch.float64)
    g, b = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
    value = qhybrid.qnode(qhybrid.device("tensornet", wires=8))(circuit)(g, b)
    grads = torch.autograd.grad(value, (g, b))
    rg, rb = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(rg, rb)
    want_grads = torch.autograd.grad(want, (rg, rb))
    assert abs(float(value) - float(want)) < 1e-10
    for a, w in zip(grads, want_grads):
        assert torch.allclose(a, w, atol=1e-10)


@pytest.mark.parametrize("case", ["irregular-shared", "irregular-xyz"])
def test_one_by_one_steps_read_writable_positions(case, monkeypatch, closed_classes_runs):
    """Every step one by one (``BIG_STEP_ELEMENTS = 0``): operand positions shared read-only between classes
    reach torch as copies (torch's tensors over read-only arrays are undefined behaviour), and the values
    and gradients equal default.qubit's."""
    from qhybrid.devices.tensornet.engines.network import many

    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 0)
    writable = []
    from_numpy = torch.from_numpy
    monkeypatch.setattr(torch, "from_numpy", lambda a: writable.append(a.flags.writeable) or from_numpy(a))
    _assert_matches_default_qubit(_circuit(*CASES[case][:3]))
    assert closed_classes_runs and writable and all(writable)


def test_classes_beyond_the_kept_budget_recompute(monkeypatch, closed_classes_runs):
    """Classes run one by one whose kept intermediates would exceed max_memory together recompute them in
    the backward: same values and gradients as default.qubit, and some class did recompute."""
    monkeypatch.setattr(closed_classes, "TOGETHER_MIN_MEMBERS", 10**9)  # one by one
    monkeypatch.setattr(closed_classes, "SHARED_MIN_ROWS", 10**9)
    from qhybrid.devices.tensornet.engines.network import tree_grad

    admitted = []
    admit = tree_grad.KeptBudget.admit
    monkeypatch.setattr(tree_grad.KeptBudget, "__init__", lambda self, max_bytes: setattr(self, "left", 3000.0))
    monkeypatch.setattr(tree_grad.KeptBudget, "admit", lambda self, p, s: admitted.append(admit(self, p, s)) or admitted[-1])
    _assert_matches_default_qubit(_circuit(*CASES["irregular-xyz"][:3]))
    assert False in admitted  # the budget ran out for some class


@pytest.mark.parametrize("lazy", [False, True])
def test_shared_rows_give_each_gate_its_own_gradient(closed_classes_runs, monkeypatch, lazy):
    """Members of shared classes read equal angles from distinct inputs: each input gets its own gradient
    (the row's gradient times that member's cotangent), as on default.qubit; second derivatives too.

    Recorded from the tensors themselves (``lazy=False``), equal rows are found by value and the shared classes
    run together; recorded lazily (a plain qnode's default) rows are shared by where they are read from, so
    equal values at distinct positions run as distinct rows (capture-safe: no ``unique``), with the same numbers."""
    from qhybrid.workflow import _lazy

    monkeypatch.setattr(_lazy, "ENABLED", lazy)
    words = [qml.Z(u) @ qml.Z(v) for u, v in IRREGULAR]
    n_edges = len(IRREGULAR)

    def circuit(angles, beta):
        for w in range(8):
            qml.Hadamard(w)
        for layer in range(2):
            for k, (u, v) in enumerate(IRREGULAR):
                qml.IsingZZ(angles[layer * n_edges + k], wires=[u, v])
            for w in range(8):
                qml.RX(beta[layer], wires=w)
        return qml.expval(qml.Hamiltonian([0.5 + 0.1 * k for k in range(n_edges)], words))

    angles = torch.cat([torch.full((n_edges,), 0.4), torch.full((n_edges,), -0.9)]).double()
    beta = torch.tensor([1.1, 0.3], dtype=torch.float64)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=8))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")
    a, b = angles.clone().requires_grad_(), beta.clone().requires_grad_()
    value = node(a, b)
    grads = torch.autograd.grad(value, (a, b))
    ra, rb = angles.clone().requires_grad_(), beta.clone().requires_grad_()
    want = ref(ra, rb)
    want_grads = torch.autograd.grad(want, (ra, rb))
    assert (2 in closed_classes_runs) is not lazy  # by value, the shared classes ran together
    assert abs(float(value) - float(want)) < 1e-10
    for g, w in zip(grads, want_grads):
        assert torch.allclose(g, w, atol=1e-10)
    assert not torch.allclose(grads[0][:n_edges], grads[0][0].expand(n_edges))  # the gates' gradients differ
    x = torch.cat([angles[:3], beta])
    pad = angles[3:]
    hess = torch.autograd.functional.hessian(lambda v: node(torch.cat([v[:3], pad]), v[3:]), x)
    want_hess = torch.autograd.functional.hessian(lambda v: ref(torch.cat([v[:3], pad]), v[3:]), x)
    assert torch.allclose(hess, want_hess, atol=1e-10)

"""Wide circuits measured term by term on light cones (engines/lightcone), against an independent
light-cone reference on default.qubit (tests/_lightcone_reference.py)."""

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone.program import ConeProgram

from _lightcone_reference import expval, qaoa_blocks, var

ATOL = 1e-10


def _graph(n, degree=3, seed=1):
    return list(nx.random_regular_graph(degree, n, seed=seed).edges())


def _hamiltonian(edges, n, rng):
    """ZZ per edge with random weights, a few X, Y and mixed words, and a constant."""
    coeffs = list(rng.uniform(-1, 1, len(edges)))
    ops = [qml.Z(u) @ qml.Z(v) for u, v in edges]
    coeffs += [0.3, -0.7, 0.45, 1.5]
    ops += [qml.X(0), qml.Y(n // 2) @ qml.Z(n // 2 + 1), qml.X(3) @ qml.Y(edges[0][0]), qml.Identity(0)]
    return qml.Hamiltonian(coeffs, ops)


def _qaoa_qnode(dev, edges, n, observable, diff_method, make=qhybrid.qnode, **kw):
    @make(dev, diff_method=diff_method, **kw)
    def circuit(gamma, beta):
        qaoa_blocks(edges, n, gamma, beta)  # the gates queue themselves
        return qml.expval(observable)

    return circuit


def _angles(p):
    gamma = torch.linspace(0.15, 0.5, p, dtype=torch.float64).requires_grad_()
    beta = torch.linspace(-0.4, -0.1, p, dtype=torch.float64).requires_grad_()
    return gamma, beta


def _reference(edges, n, observable, gamma, beta, kind=expval):
    g, b = gamma.detach().clone().requires_grad_(), beta.detach().clone().requires_grad_()
    value = kind(qaoa_blocks(edges, n, g, b), observable)
    return value, torch.autograd.grad(value, [g, b])


def _assert_matches_reference(circuit, edges, n, observable, gamma, beta):
    """The circuit's value and its gradients for gamma, beta equal the light-cone reference's."""
    value = circuit(gamma, beta)
    grads = torch.autograd.grad(value, [gamma, beta])
    ref, ref_grads = _reference(edges, n, observable, gamma, beta)
    torch.testing.assert_close(value, ref, atol=ATOL, rtol=0)
    for g, h in zip(grads, ref_grads):
        torch.testing.assert_close(g, h, atol=ATOL, rtol=0)


@pytest.mark.parametrize("p", [1, 2])
def test_hamiltonian_on_30_wires_matches_the_light_cone_reference(p):
    n = 30
    # p=1: a 3-regular graph; p=2: a ring with two chords (3-regular cones at p=2 reach 17 wires, slow
    # on the reference)
    edges = _graph(n) if p == 1 else [(i, (i + 1) % n) for i in range(n)] + [(0, 15), (7, 22)]
    H = _hamiltonian(edges if p == 1 else edges[::4], n, np.random.default_rng(p))
    gamma, beta = _angles(p)
    circuit = _qaoa_qnode(qhybrid.device("tensornet", wires=n), edges, n, H, "adjoint")
    _assert_matches_reference(circuit, edges, n, H, gamma, beta)


@pytest.mark.parametrize("diff_method", ["parameter-shift", "backprop"])
def test_other_gradient_methods_on_a_ring(diff_method):
    n = 30
    edges = [(i, (i + 1) % n) for i in range(n)]
    H = qml.Hamiltonian([0.5, -1.0, 0.25, 2.0], [qml.Z(0) @ qml.Z(1), qml.Z(7) @ qml.Z(8), qml.X(12), qml.Y(20)])
    gamma, beta = _angles(1)
    circuit = _qaoa_qnode(qhybrid.device("tensornet", wires=n), edges, n, H, diff_method)
    _assert_matches_reference(circuit, edges, n, H, gamma, beta)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_through_plain_pennylane(diff_method):
    n = 32
    edges = _graph(n, seed=3)
    H = qml.dot([0.7, -0.2, 1.1], [qml.Z(edges[0][0]) @ qml.Z(edges[0][1]), qml.X(5), qml.Z(edges[9][0]) @ qml.Z(edges[9][1])])
    gamma, beta = _angles(1)
    circuit = _qaoa_qnode(qml.device("qhybrid.tensornet", wires=n), edges, n, H, diff_method, make=qml.qnode, interface="torch")
    _assert_matches_reference(circuit, edges, n, H, gamma, beta)


def test_variance_and_sum_observables():
    n = 30
    edges = [(i, (i + 1) % n) for i in range(n)]
    gamma, beta = _angles(1)
    dev = qhybrid.device("tensornet", wires=n)
    obs_sum = qml.sum(qml.s_prod(0.5, qml.Z(3) @ qml.Z(4)), qml.X(10), qml.s_prod(-2.0, qml.Y(17)))
    obs_var = qml.X(2) @ qml.Z(3) + 0.5 * qml.Z(20)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def circuit(gamma, beta):
        qaoa_blocks(edges, n, gamma, beta)  # the gates queue themselves
        return qml.expval(obs_sum), qml.var(obs_var), qml.probs(wires=[5, 6])

    e, v, probs = circuit(gamma, beta)
    ref_e, ref_ge = _reference(edges, n, obs_sum, gamma, beta)
    ref_v, ref_gv = _reference(edges, n, obs_var, gamma, beta, kind=var)
    torch.testing.assert_close(e, ref_e, atol=ATOL, rtol=0)
    torch.testing.assert_close(v, ref_v, atol=ATOL, rtol=0)
    for g, h in zip(torch.autograd.grad(e + v, [gamma, beta]), (a + b for a, b in zip(ref_ge, ref_gv))):
        torch.testing.assert_close(g, h, atol=ATOL, rtol=0)
    zz = qml.Z(5) @ qml.Z(6)
    ref_zz, _ = _reference(edges, n, zz, gamma, beta)
    torch.testing.assert_close(probs @ torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64), ref_zz, atol=ATOL, rtol=0)


_MIXED = [
    (qml.RX, 1, 1), (qml.RY, 1, 1), (qml.RZ, 1, 1), (qml.Rot, 1, 3), (qml.PhaseShift, 1, 1), (qml.Hadamard, 1, 0),
    (qml.S, 1, 0), (qml.T, 1, 0), (qml.CNOT, 2, 0), (qml.CZ, 2, 0), (qml.SWAP, 2, 0), (qml.IsingZZ, 2, 1),
    (qml.IsingXX, 2, 1), (qml.CRX, 2, 1), (qml.CRZ, 2, 1), (qml.ControlledPhaseShift, 2, 1),
    (qml.MultiRZ, 3, 1), (qml.PauliRot, 2, 1),
]  # fmt: skip


def _random_blocks(rng, n, n_gates, span=3):
    """Gates on nearby wires (light cones stay narrow), each its own block; torch parameter leaves."""
    blocks, leaves = [], []
    for _ in range(n_gates):
        gate, k, n_params = _MIXED[rng.integers(len(_MIXED))]
        start = int(rng.integers(0, n - span))
        wires = [int(w) + start for w in rng.choice(span + 1, size=k, replace=False)]
        params = [torch.tensor(float(x), dtype=torch.float64, requires_grad=True) for x in rng.uniform(-3, 3, n_params)]
        leaves += params
        if gate is qml.PauliRot:
            op = gate(*params, "XY", wires=wires)
        else:
            op = gate(*params, wires=wires)
        blocks.append([op])
    return blocks, leaves


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_mixed_circuits_with_local_observables(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(24, 41))
    blocks, leaves = _random_blocks(rng, n, 60)
    letters = "XYZ"
    observables = []
    for _ in range(4):
        w = int(rng.integers(0, n - 2))
        observables.append(qml.pauli.PauliWord({w: letters[rng.integers(3)], w + 2: letters[rng.integers(3)]}).operation())
    H = qml.Hamiltonian(list(rng.uniform(-1, 1, 3)), [qml.Z(int(rng.integers(n))), qml.X(1) @ qml.X(2), qml.Y(n - 1)])
    dev = qhybrid.device("tensornet", wires=n)
    tape = qml.tape.QuantumScript([op for b in blocks for op in b], [qml.expval(o) for o in observables] + [qml.expval(H)])
    (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
    refs = [expval(blocks, o) for o in observables] + [expval(blocks, H)]
    for r, e in zip(res, refs):
        torch.testing.assert_close(r, e.detach(), atol=ATOL, rtol=0)
    weights = torch.tensor(rng.uniform(-1, 1, len(refs)), dtype=torch.float64)
    got = torch.autograd.grad(sum(w * r for w, r in zip(weights, res)), leaves, allow_unused=True)
    want = torch.autograd.grad(sum(w * r for w, r in zip(weights, refs)), leaves, allow_unused=True)
    for g, h in zip(got, want):
        g = torch.zeros((), dtype=torch.float64) if g is None else g
        h = torch.zeros((), dtype=torch.float64) if h is None else h
        torch.testing.assert_close(g, h, atol=ATOL, rtol=0)


def test_broadcast_parameters():
    n = 30
    edges = [(i, (i + 1) % n) for i in range(n)]
    gamma = torch.tensor([0.1, 0.3, 0.7], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor(0.25, dtype=torch.float64, requires_grad=True)
    H = qml.Hamiltonian([1.0, -0.5], [qml.Z(0) @ qml.Z(1), qml.X(9)])
    dev = qhybrid.device("tensornet", wires=n)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for u, v in edges:
            qml.IsingZZ(gamma, wires=[u, v])
        for i in range(n):
            qml.RX(beta, wires=i)
        return qml.expval(H)

    value = circuit(gamma, beta)
    assert value.shape == (3,)
    gg, gb = torch.autograd.grad(value.sum(), [gamma, beta])
    for k in range(3):
        g = gamma.detach()[k].clone().requires_grad_()
        b = beta.detach().clone().requires_grad_()
        blocks = [[qml.Hadamard(i) for i in range(n)], [qml.IsingZZ(g, wires=e) for e in edges], [qml.RX(b, wires=i) for i in range(n)]]
        ref = expval(blocks, H)
        torch.testing.assert_close(value[k], ref.detach(), atol=ATOL, rtol=0)
        rg, rb = torch.autograd.grad(ref, [g, b])
        torch.testing.assert_close(gg[k], rg, atol=ATOL, rtol=0)
        if k == 0:
            total_b = rb
        else:
            total_b = total_b + rb
    torch.testing.assert_close(gb, total_b, atol=ATOL, rtol=0)


def test_isomorphic_cones_run_as_one_execution_per_class(monkeypatch):
    """A 30-node ring at p=1: every ZZ cone is the same 4-wire circuit, so the whole Hamiltonian is ONE
    class execution (its members share one parameter row; the backward pass reads the forward's graph)."""
    n = 30
    edges = [(i, (i + 1) % n) for i in range(n)]
    H = qml.Hamiltonian([1.0] * n, [qml.Z(u) @ qml.Z(v) for u, v in edges])
    gamma, beta = _angles(1)
    dev = qhybrid.device("tensornet", wires=n)
    circuit = _qaoa_qnode(dev, edges, n, H, "adjoint")
    value = circuit(gamma, beta)
    (program,) = [p for p in dev._cache._programs.values() if isinstance(p, ConeProgram)]
    assert len(program.classes) == 1 and len(program.classes[0].terms) == n
    # one class run (on the bound path: one bound node; the general path counts the same)
    assert program.executions == 1
    torch.autograd.grad(value, [gamma, beta])
    assert program.executions == 1
    ref, _ = _reference(edges, n, H, gamma, beta)
    torch.testing.assert_close(value, ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("p", [1, 2])
def test_q100_qnode_and_graph_layer_match_the_light_cone_reference(p):
    """Q100 at p=1 and p=2 written as a plain qnode (one Hamiltonian expval) and through GraphQLayer (which
    builds the circuit and lets the device cut the cones): both against the independent light-cone reference
    (p=2's cones are up to 14 wires wide)."""
    n = 100
    edges = _graph(n)
    H = qml.Hamiltonian([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])
    gamma, beta = _angles(p)
    circuit = _qaoa_qnode(qhybrid.device("tensornet", wires=n), edges, n, H, "best")
    value = circuit(gamma, beta)
    grads = torch.autograd.grad(value, [gamma, beta])
    layer = qhybrid.GraphQLayer(edges, n_layers=p, output="cost").double()
    with torch.no_grad():
        layer.gamma.copy_(gamma)
        layer.beta.copy_(beta)
    got = layer()
    got_grads = torch.autograd.grad(got, [layer.gamma, layer.beta])
    g, b = gamma.detach().clone().requires_grad_(), beta.detach().clone().requires_grad_()
    ref = expval(qaoa_blocks(edges, n, g, b), H)
    ref_grads = torch.autograd.grad(ref, [g, b])
    for v, gs in ((value, grads), (got, got_grads)):
        torch.testing.assert_close(v, ref.detach(), atol=ATOL, rtol=0)
        for x, y in zip(gs, ref_grads):
            torch.testing.assert_close(x, y, atol=ATOL, rtol=0)


def test_cone_program_is_the_wide_program():
    n = 24
    x = torch.tensor(0.3, dtype=torch.float64)  # (a Python float loses digits on the way: float32 on main too)
    tape = qml.tape.QuantumScript([qml.RX(x, w) for w in range(n)] + [qml.CNOT([w, w + 1]) for w in range(n - 1)], [qml.expval(qml.Z(n - 1))])
    dev = qhybrid.device("tensornet", wires=n)
    (res,) = qhybrid.execute([tape], dev)
    assert any(isinstance(p, ConeProgram) for p in dev._cache._programs.values())
    torch.testing.assert_close(res, torch.tensor(np.cos(0.3) ** n, dtype=torch.float64), atol=ATOL, rtol=0)


def _ring_reference(n, H, gamma, beta):
    """The whole circuit on default.qubit (small n): no light cones at all."""
    edges = [(i, (i + 1) % n) for i in range(n)]

    @qml.qnode(qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    def circuit(gamma, beta):
        qaoa_blocks(edges, n, gamma, beta)
        return qml.expval(H)

    return circuit, edges


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_classes_as_closed_networks(diff_method, monkeypatch):
    """Cone classes too wide for a state vector run as one closed network each (forced here on a
    12-node ring), with shared and stacked parameter rows; the whole circuit on default.qubit agrees."""
    from qhybrid.devices.tensornet import _simulate
    from qhybrid.devices.tensornet.engines.lightcone import whole

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 3)
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    n = 12
    H = qml.Hamiltonian([0.5, -1.0, 0.25, 2.0, 0.7], [qml.Z(0) @ qml.Z(1), qml.Z(7) @ qml.Z(8), qml.X(4), qml.Y(9), qml.Z(3)])
    ref_circuit, edges = _ring_reference(n, H, None, None)
    gamma, beta = _angles(2)
    dev = qhybrid.device("tensornet", wires=n)
    value = _qaoa_qnode(dev, edges, n, H, diff_method)(gamma, beta)
    grads = torch.autograd.grad(value, [gamma, beta])
    prog = next(p for p in dev._cache._programs.values() if isinstance(p, ConeProgram))
    assert any(c.width > 3 for c in prog.classes) and not prog.closed
    g, b = gamma.detach().clone().requires_grad_(), beta.detach().clone().requires_grad_()
    ref = ref_circuit(g, b)
    torch.testing.assert_close(value, ref.detach(), atol=ATOL, rtol=0)
    for x, y in zip(grads, torch.autograd.grad(ref, [g, b])):
        torch.testing.assert_close(x, y, atol=ATOL, rtol=0)


def test_second_derivatives_through_shared_rows():
    """Members sharing one parameter row still get exact Hessians (backprop, create_graph)."""
    n = 24
    H = qml.Hamiltonian([1.0] * 3 + [0.5], [qml.Z(0) @ qml.Z(1), qml.Z(5) @ qml.Z(6), qml.Z(11) @ qml.Z(12), qml.X(3)])
    edges = [(i, (i + 1) % n) for i in range(n)]
    gamma, beta = _angles(1)
    circuit = _qaoa_qnode(qhybrid.device("tensornet", wires=n), edges, n, H, "backprop")
    hess = torch.autograd.functional.hessian(lambda g, b: circuit(g, b), (gamma.detach(), beta.detach()))
    ref = torch.autograd.functional.hessian(
        lambda g, b: expval(qaoa_blocks(edges, n, g, b), H), (gamma.detach(), beta.detach())
    )
    for row, ref_row in zip(hess, ref):
        for h, r in zip(row, ref_row):
            torch.testing.assert_close(h, r, atol=1e-9, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_trainable_hamiltonian_coefficients(diff_method):
    """Coefficients are read from the parameters (not a rebound copy of the observable): their gradients too."""
    n = 30
    edges = [(i, (i + 1) % n) for i in range(n)]
    coeffs = torch.tensor([0.5, -1.0, 0.25, 2.0], dtype=torch.float64, requires_grad=True)
    ops = [qml.Z(0) @ qml.Z(1), qml.X(12), qml.Y(20) @ qml.Z(21), qml.Identity(3)]
    gamma, beta = _angles(1)

    @qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method)
    def circuit(gamma, beta, coeffs):
        qaoa_blocks(edges, n, gamma, beta)
        return qml.expval(qml.Hamiltonian(coeffs, ops))

    for scale in (1.0, 3.0):  # a second call reuses the structure with new coefficient values
        c = (coeffs * scale)
        value = circuit(gamma, beta, c)
        grads = torch.autograd.grad(value, [gamma, beta, coeffs])
        g, b, cc = (t.detach().clone().requires_grad_() for t in (gamma, beta, coeffs))
        ref = expval(qaoa_blocks(edges, n, g, b), qml.Hamiltonian(cc * scale, ops))
        torch.testing.assert_close(value, ref.detach(), atol=ATOL, rtol=0)
        for x, y in zip(grads, torch.autograd.grad(ref, [g, b, cc])):
            torch.testing.assert_close(x, y, atol=ATOL, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_closed_networks_drop_commuting_diagonal_gates(seed, monkeypatch):
    """Closed networks walk the same commutation-aware light cone as the cones (one walker): diagonal gates
    that commute past a Z word, a Z-only sentence or each other are left out. Random circuits of diagonal
    and mixing gates, measured by every cap (Pauli words, a Hermitian matrix, probabilities, a variance)
    with the state-vector limit forced to 3 wires, against default.qubit: values and gradients."""
    from qhybrid.devices.tensornet import _simulate

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 3)
    n, rng = 8, np.random.default_rng(seed)
    plan = []
    for _ in range(24):
        kind = rng.choice(["RX", "RY", "RZ", "IsingZZ", "CZ", "CNOT", "CRZ", "PhaseShift"])
        wires = [int(w) for w in rng.choice(n, 2, replace=False)]
        plan.append((kind, wires))
    theta = torch.tensor(rng.uniform(-2, 2, len(plan)), dtype=torch.float64, requires_grad=True)
    herm = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))
    herm = torch.tensor(herm + herm.conj().T)

    def circuit(t):
        for k, (kind, wires) in enumerate(plan):
            op = getattr(qml, kind)
            if kind in ("RX", "RY", "RZ", "PhaseShift"):
                op(t[k], wires=wires[0])
            elif kind in ("CZ", "CNOT"):
                op(wires=wires)
            else:
                op(t[k], wires=wires)
        return (
            qml.expval(qml.Z(0) @ qml.Z(5)),
            qml.expval(qml.X(2) @ qml.Z(6)),
            qml.expval(qml.Hermitian(herm, wires=3)),
            qml.probs(wires=[1, 4]),
            qml.var(qml.Y(7) @ qml.Z(1)),
        )

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    got, want = ours(theta), ref(theta)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    cot = [torch.randn(np.shape(b), dtype=torch.float64) for b in want]
    g = torch.autograd.grad(sum((a * c).sum() for a, c in zip(got, cot)), theta)[0]
    r = torch.autograd.grad(sum((b * c).sum() for b, c in zip(want, cot)), theta)[0]
    torch.testing.assert_close(g, r, atol=ATOL, rtol=0)


def test_closed_network_light_cone_leaves_out_commuting_gates():
    """The walker keeps a diagonal gate only where it meets a mixing action: before a Z word the RZ and the
    IsingZZ commute through; before an X word (or a generic observable) the IsingZZ is kept, and the RZ on
    its other wire still commutes with it. (The walker before issue 19 kept all three.)"""
    from qhybrid.devices.tensornet._structure import tape_structure
    from qhybrid.devices.tensornet.engines.network.network import light_cone

    ops = [qml.RX(0.1, 0), qml.RZ(0.2, 1), qml.IsingZZ(0.3, wires=[0, 1]), qml.RY(0.4, 2)]
    s = tape_structure(qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0))]), None)
    assert light_cone(s.slots, [0], "Z") == [0]  # only the RX mixes before Z_0
    assert light_cone(s.slots, [0], "X") == [0, 2]
    assert light_cone(s.slots, [0]) == [0, 2]  # a generic observable: as X


def test_walker_commutes_gates_of_one_pauli_basis():
    """Gates diagonal in one Pauli basis per wire commute: an IsingXX chain in any order widens a Z word's
    cone by one neighbour on each side; RX commutes with a CNOT's target; the cones' canonical layers put
    commuting gates in one layer."""
    from qhybrid.devices.tensornet._structure import tape_structure
    from qhybrid.devices.tensornet.engines.lightcone.cones import _layers, cone_slots

    chain = [qml.IsingXX(0.1 * k, wires=[k, k + 1]) for k in range(6)]
    s = tape_structure(qml.tape.QuantumScript(chain, [qml.expval(qml.Z(3))]), None)
    assert list(s.sim_wires) == list(range(7))
    assert cone_slots(s.slots, {3: "Z"}) == [2, 3]  # (2,3) and (3,4); (1,2) commutes with (2,3) on wire 2
    assert _layers(s.slots, [0, 1, 2, 3, 4, 5]) == [[0, 1, 2, 3, 4, 5]]
    ops = [qml.RX(0.3, 1), qml.CNOT(wires=[0, 1]), qml.RX(0.2, 1)]
    s = tape_structure(qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0))]), None)
    at = {w: i for i, w in enumerate(s.sim_wires)}  # the walker speaks simulated-wire positions
    assert cone_slots(s.slots, {at[0]: "Z"}) == []  # Z on the control commutes with the CNOT; RX never reaches
    assert cone_slots(s.slots, {at[1]: "Z"}) == [0, 1, 2]
    assert cone_slots(s.slots, {at[1]: "X"}) == []  # everything is a function of X_1 there, or acts elsewhere

"""Diagonal runs of the state-vector program (``engines.statevector.diagonal``) against PennyLane default.qubit.

Random circuits mix every diagonal gate the runs take (on non-adjacent wires, reversed wire orders, with
non-diagonal gates and CNOTs between them): values and adjoint gradients to 1e-10 in complex128, batched
angles, complex64, parameter-shift stacks, Hessians, a QAOA cost layer with one Hamiltonian expval, and the
compiled steps themselves (a run of diagonal gates is one action, so it cannot silently fall back).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet._simulate import _run_group  # noqa: F401  (the program under test runs there)
from qhybrid.devices.tensornet._structure import tape_structure
from qhybrid.devices.tensornet.engines.statevector import diagonal
from qhybrid.devices.tensornet.engines.statevector.program import StateVectorProgram

ANGLE = ["RZ", "PhaseShift", "CRZ", "ControlledPhaseShift", "IsingZZ", "MultiRZ", "PauliRot"]
CONST = ["CZ", "S", "T", "PauliZ", "CCZ"]
OTHER = ["RX", "RY", "Hadamard", "CNOT", "CRX", "IsingXX"]
TOL = {torch.complex128: 1e-10, torch.complex64: 2e-5}


def _random_spec(rng, n_wires: int, depth: int, vector: bool = True):
    """(name, wires, extra) per gate: mostly diagonal gates (runs), some non-diagonal ones between them."""
    spec = []
    for _ in range(depth):
        r = rng.random()
        if r < 0.55:
            name = ANGLE[rng.integers(len(ANGLE))]
        elif r < 0.7:
            name = CONST[rng.integers(len(CONST))]
        elif r < 0.75 and vector:
            name = "DiagonalQubitUnitary"
        else:
            name = OTHER[rng.integers(len(OTHER))]
        if name in ("MultiRZ", "PauliRot", "DiagonalQubitUnitary"):
            k = int(rng.integers(1, min(n_wires, 3) + 1))
        elif name == "CCZ":
            k = 3
        else:
            k = getattr(qml, name).num_wires
        wires = [int(w) for w in rng.choice(n_wires, k, replace=False)]
        extra = None
        if name == "PauliRot":
            extra = "".join(rng.choice(["Z", "I"], k))
        elif name == "DiagonalQubitUnitary":
            extra = rng.uniform(-np.pi, np.pi, 1 << k)
        spec.append((name, wires, extra))
    return spec


def _angled(name: str) -> bool:
    return name in ANGLE or name in ("RX", "RY", "CRX", "IsingXX")


def _circuit(spec, n_wires, observables, batched: frozenset = frozenset()):
    """Gate g takes w[g] (or x[:, g] where g is in ``batched``: one angle per sample)."""

    def circuit(x, w):
        for g, (name, wires, extra) in enumerate(spec):
            angle = x[:, g] if g in batched else w[g]
            if name == "PauliRot":
                qml.PauliRot(angle, extra, wires=wires)
            elif name == "DiagonalQubitUnitary":
                qml.DiagonalQubitUnitary(np.exp(1j * extra), wires=wires)
            elif _angled(name):
                getattr(qml, name)(angle, wires=wires)
            else:
                getattr(qml, name)(wires=wires)
        return [qml.expval(o) for o in observables]

    return circuit


def _observables(n_wires):
    return [qml.Z(0), qml.Z(0) @ qml.Z(n_wires - 1), qml.X(1), qml.Y(n_wires - 1) @ qml.Z(0), qml.sum(*[qml.Z(i) for i in range(n_wires)])]


def _loss(out):
    out = torch.stack([o.real if o.is_complex() else o for o in out])
    weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))
    return out, (out * weights).sum()


def _run(qnode, x, w, real):
    x = x.detach().clone().to(real).requires_grad_(True)
    w = w.detach().clone().to(real).requires_grad_(True)
    out, loss = _loss(qnode(x, w))
    loss.backward()
    return out.detach(), x.grad, w.grad


def _compare(spec, n_wires, x, w, batched=frozenset(), dtype=torch.complex128, diff_method="adjoint"):
    observables = _observables(n_wires)
    circuit = _circuit(spec, n_wires, observables, batched)
    ref_qn = qml.QNode(circuit, qml.device("default.qubit", wires=n_wires), interface="torch", diff_method="backprop")
    ref = _run(ref_qn, x, w, torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n_wires, dtype=dtype), diff_method=diff_method)(circuit)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    got = _run(ours, x, w, real)
    for name, r, g in zip(("values", "x grad", "w grad"), ref, got):
        if r is None:
            assert g is None or not g.abs().max() > 0, name
            continue
        err = (g.to(torch.float64) - r).abs().max()
        assert err <= TOL[dtype], f"{name}: {err}"


def _case(seed, n_wires=None, depth=None, vector=True):
    rng = np.random.default_rng(seed)
    n_wires = n_wires or int(rng.integers(3, 7))
    spec = _random_spec(rng, n_wires, depth or int(rng.integers(12, 30)), vector)
    x = torch.tensor(rng.uniform(-np.pi, np.pi, (3, len(spec))))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, len(spec)))
    return rng, spec, n_wires, x, w


@pytest.mark.parametrize("seed", range(10))
def test_random_diagonal_circuits_adjoint_match_default_qubit(seed):
    _, spec, n_wires, x, w = _case(seed)
    _compare(spec, n_wires, x, w)


@pytest.mark.parametrize("seed", range(5))
def test_batched_angles_match_default_qubit(seed):
    rng, spec, n_wires, x, w = _case(100 + seed)
    batched = frozenset(g for g, (name, _, _) in enumerate(spec) if _angled(name) and rng.random() < 0.5)
    _compare(spec, n_wires, x, w, batched)


@pytest.mark.parametrize("seed", range(3))
def test_complex64_matches_default_qubit(seed):
    rng, spec, n_wires, x, w = _case(200 + seed)
    batched = frozenset(g for g, (name, _, _) in enumerate(spec) if _angled(name) and rng.random() < 0.3)
    _compare(spec, n_wires, x, w, batched, dtype=torch.complex64)


@pytest.mark.parametrize("seed", range(4))
def test_parameter_shift_stacks_match_default_qubit(seed):
    rng, spec, n_wires, x, w = _case(300 + seed, depth=12)
    # parameter-shift's two-term rule holds for every gate here except the controlled rotations' four-term
    # ones, which PennyLane shifts too: all angles are shifted, in one stacked program
    batched = frozenset(g for g, (name, _, _) in enumerate(spec) if _angled(name) and rng.random() < 0.3) if seed % 2 else frozenset()
    _compare(spec, n_wires, x, w, batched, diff_method="parameter-shift")


def test_hessian_through_a_diagonal_run_is_exact():
    _, spec, n_wires, x, w = _case(400, n_wires=4, depth=14, vector=False)
    observables = [qml.sum(*[qml.Z(i) for i in range(n_wires)]) + qml.X(0)]
    circuit = _circuit(spec, n_wires, observables)

    def f(qn):
        return lambda ww: qn(x, ww)[0]

    ref_qn = qml.QNode(circuit, qml.device("default.qubit", wires=n_wires), interface="torch", diff_method="backprop")
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n_wires), diff_method="adjoint")(circuit)
    h_ref = torch.autograd.functional.hessian(f(ref_qn), w)
    h_got = torch.autograd.functional.hessian(f(ours), w)
    assert (h_got - h_ref).abs().max() <= 1e-10


def test_trainable_diagonal_unitary_gets_its_gradient():
    """A DiagonalQubitUnitary built from trainable phases: the run's gather cotangent chains to them."""
    n = 4
    phi0 = torch.tensor(np.random.default_rng(7).uniform(-np.pi, np.pi, 8))

    def circuit(phi, a):
        for i in range(n):
            qml.Hadamard(i)
        qml.IsingZZ(a, wires=[0, 3])
        qml.DiagonalQubitUnitary(torch.exp(1j * phi), wires=[3, 0, 2])
        qml.RZ(a * 0.5, wires=1)
        qml.CRX(0.3, wires=[2, 1])
        return qml.expval(qml.X(0) @ qml.Y(3) + qml.X(2))

    def grads(qn):
        phi = phi0.clone().requires_grad_(True)
        a = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
        v = qn(phi, a)
        v.backward()
        return v.detach(), phi.grad, a.grad

    ref = grads(qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop"))
    got = grads(qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit))
    for r, g in zip(ref, got):
        assert (r - g).abs().max() <= 1e-10


def _qaoa(graph, p):
    edges = list(graph.edges())
    n = graph.number_of_nodes()
    weights = np.random.default_rng(3).uniform(0.5, 1.5, len(edges))
    H = qml.Hamiltonian(list(weights), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(gamma, beta):
        for w in range(n):
            qml.Hadamard(w)
        for layer in range(p):
            for (u, v), we in zip(edges, weights):
                qml.IsingZZ(2 * gamma[layer] * we, wires=[u, v])
            for w in range(n):
                qml.RX(2 * beta[layer], wires=w)
        return qml.expval(H)

    return circuit


def test_qaoa_cost_layer_with_one_hamiltonian_expval():
    graph = nx.random_regular_graph(3, 10, seed=5)
    circuit = _qaoa(graph, 2)

    def grads(qn):
        gamma = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
        beta = torch.tensor([0.5, 0.1], dtype=torch.float64, requires_grad=True)
        v = qn(gamma, beta)
        v.backward()
        return v.detach(), gamma.grad, beta.grad

    ref = grads(qml.QNode(circuit, qml.device("default.qubit", wires=10), interface="torch", diff_method="backprop"))
    got = grads(qhybrid.qnode(qhybrid.device("tensornet", wires=10), diff_method="adjoint")(circuit))
    for r, g in zip(ref, got):
        assert (r - g).abs().max() <= 1e-10


def _program(ops, measurements, n):
    tape = qml.tape.QuantumScript(ops, measurements)
    structure = tape_structure(tape, qml.wires.Wires(range(n)))
    return StateVectorProgram(structure, frozenset(), 0, tape, torch.complex128)


def test_a_run_of_diagonal_gates_compiles_to_one_action():
    n = 6
    ops = [qml.Hadamard(w) for w in range(n)]
    ops += [
        qml.IsingZZ(0.1, [0, 5]),
        qml.RZ(0.2, 3),  # waits on its wire, then joins the run
        qml.CRZ(0.3, [4, 1]),
        qml.CZ([2, 5]),  # constant phases join an open run
        qml.MultiRZ(0.4, [0, 2, 4]),
        qml.PauliRot(0.5, "ZIZ", [5, 1, 3]),
        qml.ControlledPhaseShift(0.6, [3, 0]),
        qml.DiagonalQubitUnitary(np.exp(1j * np.arange(4.0)), [1, 4]),
        qml.RX(0.7, 2),  # non-diagonal on wire 2: commutes with the rest of the run on other wires
        qml.IsingZZ(0.8, [1, 3]),
        qml.PhaseShift(0.9, 1),
    ]
    program = _program(ops, [qml.expval(qml.X(2))], n)
    kinds = [s.kind for s in program.steps]
    assert kinds == ["product", "diagonal", "local"], kinds
    run = program.steps[1].data
    assert len(run.angles) == 8 and len(run.vectors) == 1 and run.const is not None
    assert run.table.shape == (8, 1 << n)


def test_non_diagonal_gate_on_a_run_wire_splits_the_run():
    n = 4
    ops = [qml.Hadamard(w) for w in range(n)]
    ops += [qml.IsingZZ(0.1, [0, 3]), qml.RX(0.2, 3), qml.IsingZZ(0.3, [3, 1]), qml.CRZ(0.4, [0, 2])]
    program = _program(ops, [qml.expval(qml.X(3))], n)
    kinds = [s.kind for s in program.steps]
    assert kinds == ["product", "diagonal", "local", "diagonal"], kinds


@pytest.mark.parametrize("name", ANGLE)
def test_angle_patterns_are_the_gates_matrices(name):
    """Each angle gate's pattern a(x) gives PennyLane's matrix: U = diag(exp(i theta a))."""
    theta = 0.731
    k = {"RZ": 1, "PhaseShift": 1, "MultiRZ": 3, "PauliRot": 3}.get(name, 2)
    op = qml.PauliRot(theta, "ZIZ", wires=range(3)) if name == "PauliRot" else getattr(qml, name)(theta, wires=range(k))
    assert diagonal.member_kind(op, "matrix") == "angle"
    a = diagonal._exponent(op)
    assert np.allclose(np.diag(np.exp(1j * theta * a)), qml.matrix(op), atol=1e-14)


def test_pauli_rot_with_x_is_not_diagonal():
    assert diagonal.member_kind(qml.PauliRot(0.3, "ZX", wires=[0, 1]), "matrix") is None


def test_constant_diagonal_gates_outside_a_run_stay_monomials():
    ops = [qml.Hadamard(w) for w in range(3)] + [qml.CNOT([0, 1]), qml.CZ([0, 2]), qml.CNOT([1, 2])]
    program = _program(ops, [qml.expval(qml.X(2))], 3)
    assert [s.kind for s in program.steps] == ["product", "monomial"]


def test_runs_split_at_the_table_budget_and_stay_exact(monkeypatch):
    monkeypatch.setattr(diagonal, "DIAGONAL_TABLE_MAX_ELEMENTS", 2 << 5)  # two angle rows on 5 wires
    _, spec, n_wires, x, w = _case(500, n_wires=5, depth=20)
    _compare(spec, n_wires, x, w)
    ops = [qml.Hadamard(i) for i in range(5)] + [qml.IsingZZ(0.1 * i, [i, (i + 2) % 5]) for i in range(5)]
    assert [s.kind for s in _program(ops, [qml.expval(qml.X(0))], 5).steps] == ["product"] + ["diagonal"] * 3


@pytest.mark.parametrize("seed", range(3))
def test_states_wider_than_runs_apply_each_diagonal_gate_alone(seed, monkeypatch):
    """Above ``RUN_MAX_WIRES`` no run (and no ``2**n`` table) is formed: each diagonal gate is a gate step,
    values and gradients as default.qubit's, batched angles included."""
    monkeypatch.setattr(diagonal, "RUN_MAX_WIRES", 2)
    rng, spec, n_wires, x, w = _case(700 + seed)
    ops = [qml.Hadamard(i) for i in range(n_wires)] + [qml.IsingZZ(0.1 * i, [i, (i + 1) % n_wires]) for i in range(n_wires)]
    assert "diagonal" not in [s.kind for s in _program(ops, [qml.expval(qml.X(0))], n_wires).steps]
    batched = frozenset(g for g, (name, _, _) in enumerate(spec) if _angled(name) and rng.random() < 0.5)
    _compare(spec, n_wires, x, w, batched)


def test_no_grad_values_match_default_qubit():
    _, spec, n_wires, x, w = _case(600)
    circuit = _circuit(spec, n_wires, _observables(n_wires), frozenset({0, 3}))
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n_wires), interface="torch")(x, w)
    with torch.no_grad():
        got = qhybrid.qnode(qhybrid.device("tensornet", wires=n_wires))(circuit)(x, w)
    assert max(float((torch.as_tensor(r) - g).abs().max()) for r, g in zip(ref, got)) <= 1e-10


def test_python_float_angles_keep_float64_precision():
    """Plain-number angles reach the gates in the device's real dtype, not through torch's float32 default
    (which put 1e-9 errors into every result that used one)."""

    def circuit(a):
        qml.Hadamard(0)
        qml.Hadamard(2)
        qml.CRX(0.3, wires=[2, 1])
        qml.RY(0.7, wires=0)
        qml.IsingZZ(0.1, wires=[0, 2])
        qml.RZ(a, wires=1)
        return qml.expval(qml.Y(1) @ qml.X(0))

    a = torch.tensor(0.2, dtype=torch.float64)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch")(a)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=3))(circuit)(a)
    assert abs(float(ref - got)) <= 1e-13


def test_hamiltonian_coefficients_plain_numbers_or_trainable():
    """Plain-number coefficients are folded into the Z-word sign matrix; trainable ones keep their gradient."""

    def make(coeffs):
        H = qml.Hamiltonian(coeffs, [qml.Z(0) @ qml.Z(2), qml.Z(1), qml.Z(0) @ qml.Z(1) @ qml.Z(2)])

        def circuit(a):
            for w in range(3):
                qml.RY(0.4 + w * a, wires=w)
            qml.IsingZZ(a, wires=[0, 2])
            qml.CNOT(wires=[2, 1])
            return qml.expval(H)

        return circuit

    def run(qnode_factory, coeffs):
        a = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
        v = qnode_factory(make(coeffs))(a)
        v.backward()
        return v.detach(), a.grad, (coeffs.grad if isinstance(coeffs, torch.Tensor) else None)

    ref_f = lambda c: qml.QNode(c, qml.device("default.qubit", wires=3), interface="torch")  # noqa: E731
    our_f = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")
    plain = [0.7, -1.3, 0.25]
    for r, g in zip(run(ref_f, plain), run(our_f, plain)):
        assert r is None and g is None or float((r - g).abs().max()) <= 1e-12
    ref = run(ref_f, torch.tensor(plain, dtype=torch.float64, requires_grad=True))
    got = run(our_f, torch.tensor(plain, dtype=torch.float64, requires_grad=True))
    for r, g in zip(ref, got):
        assert float((r - g).abs().max()) <= 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_factored_run_tables_match_default_qubit(monkeypatch, seed):
    """Run tables kept as their factors over the wire halves (``FACTOR_MIN_ENTRIES`` lowered so that every run
    takes them): values and gradients, plain and batched angles (the lead-column path), as default.qubit's."""
    monkeypatch.setattr(diagonal, "FACTOR_MIN_ENTRIES", 1)
    taken = []
    original = diagonal.DiagonalRun._factors
    monkeypatch.setattr(diagonal.DiagonalRun, "_factors", lambda self: taken.append(original(self)) or taken[-1])
    rng, spec, n_wires, x, w = _case(400 + seed, n_wires=4 + seed % 3)
    batched = frozenset(g for g, (name, _, _) in enumerate(spec) if _angled(name) and rng.random() < 0.5) if seed % 2 else frozenset()
    _compare(spec, n_wires, x, w, batched)
    assert any(f is not None for f in taken)

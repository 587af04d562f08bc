"""Engines chosen by cost (``engines.lightcone.choice``, ``_simulate.build_program``): a case each way for a
cone class and for the whole circuit, results against independent references (default.qubit, or an exact
formula where default.qubit would take minutes), the QAOA classes unchanged, and ``plan_cache_info().engines``.
"""

from __future__ import annotations

import math

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone import whole
from qhybrid.devices.tensornet.engines.lightcone.choice import EngineChoice

TOL = 1e-10


@pytest.fixture
def no_whole_network(monkeypatch):
    """Measurements with wide cones stay with their classes (not one network of the whole circuit)."""
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)


def _chain(n_deep: int, layers: int):
    def circuit(w):
        for layer in range(layers):
            for i in range(n_deep):
                qml.RY(w[layer, i], wires=i)
            for i in range(n_deep - 1):
                qml.CNOT([i, i + 1])
        return qml.expval(qml.Z(0) @ qml.Z(n_deep - 1))

    return circuit


def test_narrow_deep_cone_runs_as_a_state_vector(no_whole_network):
    """A 17-wire cone, 10 layers deep, inside a 26-wire circuit whose state does not fit max_memory: a state
    vector (cheaper than its network: 2^27.7 against 2^30.9 flops), where the width rule made every cone over
    16 wires a network. (At 6 layers a min-fill tree prices its network below the state vector.)"""
    deep = _chain(17, 10)

    def circuit(w):
        for i in range(17, 26):
            qml.RY(w[0, i - 17], wires=i)
        return deep(w)

    dev = qhybrid.device("tensornet", wires=26, max_memory=1e9)
    w = torch.rand(10, 17, dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(dev, diff_method="adjoint")(circuit)(w)
    (got_grad,) = torch.autograd.grad(got, w)
    whole_choice, cone = dev.plan_cache_info().engines
    assert whole_choice.engine == "light cones" and "does not fit" in whole_choice.reason
    assert cone.engine == "state vector" and cone.reason == "cheaper"
    assert cone.network_flops > cone.state_flops and "17 wires" in cone.what
    ref = qml.QNode(deep, qml.device("default.qubit", wires=17), interface="torch", diff_method="adjoint")
    want = ref(w)
    (want_grad,) = torch.autograd.grad(want, w)
    assert abs(float((got - want).detach())) < TOL
    assert torch.allclose(got_grad, want_grad, atol=TOL, rtol=0)


def test_wide_shallow_cone_runs_as_a_closed_network(no_whole_network):
    """A 24-wire Z word after one layer of CNOT pairs: its cone is every wire, but its network costs far less
    than the state vector; the value is a product of independent 2-wire expectations (default.qubit each)."""
    n = 24

    def circuit(w):
        for i in range(n):
            qml.RY(w[i], wires=i)
        for i in range(0, n - 1, 2):
            qml.CNOT([i, i + 1])
        return qml.expval(qml.prod(*[qml.Z(i) for i in range(n)]))

    def pair(a, b):
        qml.RY(a, wires=0)
        qml.RY(b, wires=1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    dev = qhybrid.device("tensornet", wires=n, max_memory=3e9)
    w = torch.rand(n, dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(dev, diff_method="adjoint")(circuit)(w)
    (got_grad,) = torch.autograd.grad(got, w)
    whole_choice, cone = dev.plan_cache_info().engines
    assert whole_choice.engine == "light cones" and whole_choice.reason == "cheaper"
    assert cone.engine == "closed network" and cone.network_flops < cone.state_flops
    ref = qml.QNode(pair, qml.device("default.qubit", wires=2), interface="torch")
    want = torch.stack([ref(w[i], w[i + 1]) for i in range(0, n, 2)]).prod()
    (want_grad,) = torch.autograd.grad(want, w)
    assert abs(float((got - want).detach())) < TOL
    assert torch.allclose(got_grad, want_grad, atol=TOL, rtol=0)


def _z_word_after_cnots(n: int, gates: list, word: set) -> set:
    """The Z word ``C^dag Z_word C`` for a CNOT circuit ``C`` (Heisenberg picture, gates walked backwards:
    ``CNOT^dag Z_t CNOT = Z_c Z_t``, ``Z_c`` unchanged)."""
    word = set(word)
    for c, t in reversed(gates):
        if t in word:
            word ^= {c}
    return word


def test_21_wire_deep_circuit_runs_as_one_state_vector():
    """21 wires (over the old 20-wire rule, which made it light cones) and 8 CNOT brickwork layers after
    an RY layer: one state vector, cheaper than its cones. Reference: the exact value, prod of cos(theta_i)
    over the Z word the CNOTs carry the global Z word to."""
    n, layers = 21, 8
    gates = [(i, i + 1) for _ in range(layers) for s in (0, 1) for i in range(s, n - 1, 2)] + [(n - 1, 0)]

    def circuit(w):
        for i in range(n):
            qml.RY(w[i], wires=i)
        for c, t in gates:
            qml.CNOT([c, t])
        return qml.expval(qml.prod(*[qml.Z(i) for i in range(n)]))

    dev = qhybrid.device("tensornet", wires=n)
    w = torch.linspace(0.1, 1.3, n, dtype=torch.float64).requires_grad_(True)
    got = qhybrid.qnode(dev, diff_method="adjoint")(circuit)(w)
    (got_grad,) = torch.autograd.grad(got, w)
    (choice,) = dev.plan_cache_info().engines
    assert choice.engine == "state vector" and choice.reason == "cheaper", str(choice)
    support = sorted(_z_word_after_cnots(n, gates, set(range(n))))
    want = torch.cos(w[support]).prod()
    (want_grad,) = torch.autograd.grad(want, w)
    assert abs(float((got - want).detach())) < TOL
    assert torch.allclose(got_grad, want_grad, atol=TOL, rtol=0)


def test_qaoa_100_p2_keeps_its_six_state_vector_classes():
    """Q100 p=2 (WORKLOADS.md): light cones, six classes, every one a state vector, as under the width rule."""
    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, 100, seed=1).edges()]
    cost = qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(gamma, beta):
        for i in range(100):
            qml.Hadamard(i)
        for layer in range(2):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in range(100):
                qml.RX(2 * beta[layer], wires=i)
        return qml.expval(cost)

    dev = qhybrid.device("tensornet", wires=100)
    gamma = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([0.2, 0.4], dtype=torch.float64, requires_grad=True)
    qhybrid.qnode(dev, diff_method="adjoint")(circuit)(gamma, beta).backward()
    engines = dev.plan_cache_info().engines
    assert engines[0].engine == "light cones"
    assert [c.engine for c in engines[1:]] == ["state vector"] * 6


def test_engine_choice_reads_as_a_sentence():
    choice = EngineChoice("whole circuit, 24 wires", "state vector", "cheaper", 2.0**31, 2.0**30, 2.0**40, 2.0**33)
    text = str(choice)
    assert text.startswith("whole circuit, 24 wires: state vector (cheaper)")
    assert "2^31.0 flops" in text and "1.0 GiB" in text and "2^40.0 flops" in text and "8.0 GiB" in text
    assert math.isclose(choice.state_flops, 2.0**31)


def _qaoa_word_tape(seed: int):
    """A 10-wire 3-regular QAOA p=2 circuit (IsingZZ hyperedges, RX, a CNOT and an RY for dense gates)
    measuring one ZZ word."""
    g = nx.random_regular_graph(3, 10, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    ops = [qml.Hadamard(i) for i in range(10)]
    for _ in range(2):
        ops += [qml.IsingZZ(float(torch.rand(1, generator=gen)), wires=e) for e in g.edges()]
        ops += [qml.RX(float(torch.rand(1, generator=gen)), wires=i) for i in range(10)]
    ops += [qml.CNOT([0, 1]), qml.RY(0.3, wires=2)]
    u, v = next(iter(g.edges()))
    return qml.tape.QuantumScript(ops, [qml.expval(qml.Z(u) @ qml.Z(v))])


@pytest.mark.parametrize("seed", [1, 2])
def test_network_pricing_without_plans_equals_pricing_by_a_closed_program(seed, tmp_path):
    """``choice.network_cost`` prices a word's network from its path alone (no ContractionPlan built): the
    same flops and bytes as through a greedy-planned ``ClosedProgram``; with a store holding a cheaper tree
    for the network, it prices that tree (a second process prices what the first planned)."""
    from dataclasses import replace

    from qhybrid.devices.tensornet._structure import tape_structure
    from qhybrid.devices.tensornet.engines.lightcone import choice
    from qhybrid.devices.tensornet.engines.network import pathfind
    from qhybrid.devices.tensornet.engines.network.path_cache import PathStore

    tape = _qaoa_word_tape(seed)
    structure = tape_structure(tape, None)
    opts = qhybrid.device("tensornet", wires=10)._options([])
    for gradient in (False, True):
        new = choice.network_cost(structure, tape, opts, 16, gradient)
        old = choice._program_cost(structure, tape, opts, 16, gradient)
        assert new == old and new[0] > 0
    store = PathStore(tmp_path)
    stored = replace(opts, optimizer=pathfind.PathSettings("auto", math.inf, store))
    (spec,) = [s for s in choice._closed_terms(tape.measurements[0], structure)]
    net = choice.closed_network(structure, frozenset(), 0, *spec[:3], (), choice.diagonal_slots(structure, tape))
    problem = choice.Problem.of(net.inputs, net.output, net.sizes, net.positions, choice.BATCH)
    greedy = pathfind._quick(problem, "greedy")
    worse = tuple((0, 1) for _ in range(problem.n - 1))  # a different (here costlier) tree, as a marker
    store.save(problem.inputs, problem.output, problem.sizes, worse, True)
    flops, _ = choice.network_cost(structure, tape, stored, 16, False)
    marked = pathfind._evaluate(problem, worse)
    assert marked.flops != greedy.flops  # the stored tree's price can be told from the greedy one's
    assert flops == marked.flops + choice.NETWORK_STEP_FLOPS * choice._calls(net, marked)


@pytest.mark.parametrize("limit", [1 << 2, 1 << 5, 1 << 30])
def test_whole_network_refusal_before_building_agrees_with_the_program(monkeypatch, limit):
    """``whole._refused`` settles a Hamiltonian's whole-circuit network from its words' paths before any
    program is built; where it refuses, the program it saves building would have been refused too."""
    from dataclasses import replace

    from qhybrid.devices.tensornet._structure import tape_structure
    from qhybrid.devices.tensornet.engines.network.pathfind import PathSettings
    from qhybrid.devices.tensornet.engines.network.programs import ClosedProgram

    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", limit)
    g = nx.random_regular_graph(3, 10, seed=3)
    ops = [qml.Hadamard(i) for i in range(10)]
    for layer in range(2):
        ops += [qml.IsingZZ(0.3 + layer, wires=e) for e in g.edges()] + [qml.RX(0.2, wires=i) for i in range(10)]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.sum(*[qml.Z(u) @ qml.Z(v) for u, v in g.edges()]))])
    structure = tape_structure(tape, None)
    opts = qhybrid.device("tensornet", wires=10)._options([])
    refused = whole._refused(structure, frozenset(), 0, opts, tape, 0)
    judged = replace(opts, optimizer=replace(PathSettings.of(opts.optimizer), hyper=False, rescue=False))
    program = ClosedProgram(structure, frozenset(), 0, judged, tape, only=[0])
    small = whole._small(program, tape.measurements[0])
    assert not (refused and small)
    assert refused == (limit < 1 << 30) and small == (limit == 1 << 30)


def test_call_count_equals_the_plans_einsum_calls():
    """``choice.call_count`` counts the einsum calls ``plan._chunks`` builds, on random networks and paths."""
    import random

    from qhybrid.devices.tensornet.engines.lightcone.choice import call_count
    from qhybrid.devices.tensornet.engines.network.plan import _binary_tree, _chunks

    rng = random.Random(5)
    for _ in range(200):
        n, labels = rng.randint(1, 30), list(range(rng.randint(1, 24)))
        inputs = [tuple(rng.sample(labels, rng.randint(1, min(5, len(labels))))) for _ in range(n)]
        used = sorted({i for ix in inputs for i in ix})
        output = tuple(rng.sample(used, rng.randint(0, min(3, len(used)))))
        path, left = [], n
        while left > 1:
            k = rng.choice((2, 2, 2, 3))
            k = min(k, left)
            path.append(tuple(rng.sample(range(left), k)))
            left -= k - 1
        if n == 1:
            path = [(0,)]
        tree = _binary_tree(inputs, output, path)
        assert call_count(*tree) == len(_chunks(n, *tree))


def test_sentence_cheaper_word_by_word_runs_by_cone_classes(monkeypatch):
    """A Hamiltonian whose words cost less apart than as one united network is measured by cone classes,
    not by the whole circuit's word networks one by one: those are the same light cones without the classes'
    sharing, and were taken wherever their paths came under the size bound (an 8x8 lattice QAOA p=3 at
    ``plan_time=20`` ran a step in 16 s where its cone classes take 0.16 s). Values and gradients against
    default.qubit."""
    from qhybrid.devices.tensornet.engines.lightcone import program as _program

    monkeypatch.setattr(_program, "WHOLE_NETWORK_CANDIDATE_WIRES", 2)  # every word's cone is a candidate
    n, p = 16, 2
    g = nx.random_regular_graph(3, n, seed=3)
    hamiltonian = qml.sum(*[qml.Z(u) @ qml.Z(v) for u, v in g.edges()])

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(p):
            for e in g.edges():
                qml.IsingZZ(gamma[layer], wires=e)
            for i in range(n):
                qml.RX(beta[layer], wires=i)
        return qml.expval(hamiltonian)

    dev = qhybrid.device("tensornet", wires=n, max_memory=2**19, path_cache=False)  # the whole state: 2^20 B
    args = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in ([0.3, 0.7], [0.2, 0.5])]
    value = qhybrid.qnode(dev, diff_method="adjoint")(circuit)(*args)
    grads = torch.autograd.grad(value, args)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(*args)
    ref_grads = torch.autograd.grad(ref, args)
    whole_choice, *classes = dev.plan_cache_info().engines
    assert whole_choice.engine == "light cones" and classes  # (before: no class, every word a whole network)
    assert sum(int(c.what.split(", ")[1].split()[0]) for c in classes) == len(g.edges())
    assert abs(value.item() - ref.item()) < TOL
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)

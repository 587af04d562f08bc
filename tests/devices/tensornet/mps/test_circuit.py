"""Circuits at full bond dimension equal default.qubit to 1e-10: values and gradients, every gate kind
(distant and three-wire gates included), batched and float32."""

import numpy as np
import pennylane as qml
import pytest
import torch

from _reference import random_ops, run_both

N = 6


def _measure(n):
    return [qml.expval(qml.PauliZ(i)) for i in range(n)] + [
        qml.expval(qml.PauliX(0) @ qml.PauliY(n // 2) @ qml.PauliZ(n - 1)),
        qml.probs(wires=[n - 1, 1]),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_circuits_every_gate_kind(seed):
    rng = np.random.default_rng(seed)
    params = torch.tensor(rng.uniform(-np.pi, np.pi, 200), dtype=torch.float64, requires_grad=True)

    def circuit(p):
        it = iter(p)
        for op in random_ops(N, 40, np.random.default_rng(seed), lambda: next(it)):
            qml.apply(op)
        qml.GlobalPhase(p[-1])
        return _measure(N)

    ours, ref, dev = run_both(circuit, N, params)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-10)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), params)[0]
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), params)[0]
    assert torch.allclose(g1, g2, atol=1e-10)
    assert dev.last_truncation.discarded_weight < 1e-20  # only numerically zero Schmidt values dropped


@pytest.mark.parametrize("dtype, atol", [(torch.complex128, 1e-10), (torch.complex64, 1e-4)])
def test_batched_inputs_values_and_gradients(dtype, atol):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = torch.rand(4, N, dtype=real, requires_grad=True)
    w = torch.rand(2, N, 3, dtype=real, requires_grad=True)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(N), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(N))
        qml.Toffoli([0, 3, 5])
        qml.CSWAP([4, 1, 2])
        return _measure(N)

    ours, ref, _ = run_both(circuit, N, x, w, dtype=dtype)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == real
        assert torch.allclose(a, b.to(real), atol=atol)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), [x, w])
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), [x, w])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b.to(real), atol=atol * 10)


def test_basis_state_start_and_unused_wires():
    def circuit(t):
        qml.BasisState(np.array([1, 0, 1]), wires=[0, 2, 4])
        qml.RX(t, wires=2)
        qml.CNOT([4, 1])
        return [qml.expval(qml.PauliZ(i)) for i in range(N)]

    t = torch.tensor(0.4, dtype=torch.float64)
    ours, ref, _ = run_both(circuit, N, t)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-12)


def test_state_preparation_is_refused_clearly():
    import qhybrid

    dev = qhybrid.device("tensornet", wires=2, method="mps")

    @qhybrid.qnode(dev)
    def circuit():
        qml.StatePrep(np.array([0.6, 0.8, 0, 0]), wires=[0, 1])
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(qml.exceptions.DeviceError, match="basis state"):
        circuit()


DIAGONAL = ["IsingZZ", "CZ", "CRZ", "ControlledPhaseShift", "MultiRZ", "CCZ", "RZ", "PhaseShift", "S", "T"]


@pytest.mark.parametrize("dtype, atol", [(torch.complex128, 1e-10), (torch.complex64, 1e-4)])
def test_commuting_diagonal_gates_reordered_and_routed(dtype, atol):
    """Diagonal gates on shared, distant wires (which the router reorders), between non-diagonal one- and
    two-wire gates (which it must not), batched; wires end away from their start: probs, expvals and the
    state come back in wire order."""
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    rng = np.random.default_rng(4)
    x = torch.rand(3, N, dtype=real, requires_grad=True)
    params = torch.tensor(rng.uniform(-np.pi, np.pi, 120), dtype=real, requires_grad=True)
    layer = random_ops(N, 14, np.random.default_rng(9), lambda: 0.0, kinds=DIAGONAL)
    mixers = random_ops(N, 4, np.random.default_rng(10), lambda: 0.0, kinds=["CNOT", "CRX", "IsingXY"])

    def circuit(x, p):
        it = iter(p)
        for i in range(N):
            qml.RY(x[:, i], wires=i)
        for layer_ops in (layer, mixers, layer):
            for op in layer_ops:
                qml.apply(type(op)(*[next(it) for _ in op.data], wires=op.wires))
            qml.RX(next(it), wires=1)
        return _measure(N) + [qml.probs(wires=[3, 0, 5])]

    ours, ref, dev = run_both(circuit, N, x, params, dtype=dtype)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and torch.allclose(a, b.to(real), atol=atol)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), [x, params])
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), [x, params])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b.to(real), atol=atol * 10)
    assert dev.last_truncation.discarded_weight < atol**2  # only numerically zero Schmidt values dropped (relative cutoff per dtype)


def test_state_after_routing_is_in_wire_order():
    def circuit(t):
        for i in range(N):
            qml.RY(0.3 * (i + 1), wires=i)
        qml.CNOT([0, N - 1])  # the router leaves a wire moved
        qml.CRY(t, wires=[N - 1, 2])
        qml.IsingZZ(t, wires=[1, 4])
        return qml.state()

    t = torch.tensor(0.7, dtype=torch.float64)
    ours, ref, _ = run_both(circuit, N, t)
    assert torch.allclose(ours[0], ref[0], atol=1e-12)


def test_routed_truncation_is_accounted():
    """A routed 3x3-lattice QAOA layer at a small bond cap: the reported discarded weight is what the state
    lost (its infidelity against the exact state, to second order), and every <Z_i> is within the bound."""
    import networkx as nx

    import qhybrid

    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 3))

    def circuit(g, b):
        for i in range(9):
            qml.Hadamard(i)
        for layer in range(2):
            for u, v in graph.edges:
                qml.IsingZZ(g[layer], wires=[u, v])
            for i in range(9):
                qml.RX(b[layer], wires=i)
        return qml.state()

    g, b = torch.tensor([0.7, 1.1], dtype=torch.float64), torch.tensor([0.4, 0.9], dtype=torch.float64)
    exact = qml.QNode(circuit, qml.device("default.qubit", wires=9), interface="torch")(g, b)
    dev = qhybrid.device("tensornet", wires=9, method="mps", max_bond_dim=6)
    with pytest.warns(UserWarning):
        approx = qhybrid.qnode(dev)(circuit)(g, b)
    report = dev.last_truncation
    infidelity = 1 - float(abs(torch.vdot(exact, approx)) ** 2)
    assert report.discarded_weight > 0.1 and report.max_bond == 6
    assert 1 - report.fidelity == pytest.approx(infidelity, rel=0.25)  # the estimate tracks the true loss (0.50 vs 0.55)
    z = torch.tensor([1.0, -1.0], dtype=torch.float64)
    for i in range(9):
        zi = z[(torch.arange(512) >> (8 - i)) & 1]  # Z_i on each basis state (wire 0 the leading bit)
        err = abs(float(((exact.abs() ** 2) * zi).sum() - ((approx.abs() ** 2) * zi).sum()))
        assert err <= 2 * np.sqrt(infidelity) + 1e-12


@pytest.mark.parametrize("n, depth, cap", [(12, 8, 16), (14, 10, 32)])
def test_gradient_when_the_cap_only_cuts_zero_schmidt_values(n, depth, cap):
    """A RY/CNOT brickwork whose bonds reach the cap exactly (each is crossed by depth / 2 CNOTs): the cap
    cuts only zero Schmidt values of padded bonds (discarded weight 0), some splits among tied zeros. The
    truncated map is then exact for every parameter value, and so is its gradient: the pairs of a small kept
    value and a zero keep their exact 1/(s_i^2 - s_j^2) (an absolute broadening made this 1e-5 off)."""

    def circuit(theta):
        for d in range(depth):
            for i in range(n):
                qml.RY(theta[d, i], wires=i)
            for i in range(d % 2, n - 1, 2):
                qml.CNOT([i, i + 1])
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    theta = torch.rand(depth, n, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).requires_grad_(True)
    ours, ref, dev = run_both(circuit, n, theta, mps_options={"max_bond_dim": cap})
    assert dev.last_truncation.discarded_weight < 1e-20 and dev.last_truncation.max_bond == cap
    assert torch.allclose(torch.stack(ours), torch.stack(ref), atol=1e-12)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), theta)[0]
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), theta)[0]
    assert torch.allclose(g1, g2, atol=1e-10)


def test_lattice_qaoa_through_the_sorting_router(monkeypatch):
    """A 3x3-lattice QAOA (three layers, batched angles) at full bond dimension, planned by the sorting router
    (rows interleaved and apart, wires far from where they started): values and gradients equal
    default.qubit's."""
    import networkx as nx

    from qhybrid.devices.tensornet.engines.mps import circuit as circuit_module
    from qhybrid.devices.tensornet.engines.mps.route import Block, _dependencies
    from qhybrid.devices.tensornet.engines.mps.route_match import MatchRouter

    plans = []
    original = circuit_module.plan
    monkeypatch.setattr(circuit_module, "plan", lambda gates, n: plans.append((gates, n)) or original(gates, n))
    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 3))
    gamma = torch.tensor([[0.3, 0.8, -0.5], [1.1, -0.2, 0.6]], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([0.7, -0.4, 0.2], dtype=torch.float64, requires_grad=True)

    def circuit(gamma, beta):
        for i in range(9):
            qml.Hadamard(i)
        for layer in range(3):
            for k, (u, v) in enumerate(graph.edges):
                qml.IsingZZ(gamma[:, layer] * (1 + 0.1 * k), wires=[u, v])
            for i in range(9):
                qml.RX(beta[layer] * (1 + 0.05 * i), wires=i)
        return [qml.expval(qml.PauliZ(i) @ qml.PauliZ((i + 4) % 9)) for i in range(9)] + [qml.probs(wires=[8, 0])]

    ours, ref, dev = run_both(circuit, 9, gamma, beta)
    gates, n = plans[-1]
    assert original(gates, n)[0] == MatchRouter(gates, n, *_dependencies(gates), Block).run()[0]
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-10)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), [gamma, beta])
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), [gamma, beta])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-10)
    assert dev.last_truncation.discarded_weight < 1e-20  # only numerically zero Schmidt values dropped

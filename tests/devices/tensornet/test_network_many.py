"""Many networks contracted together (engines/network/many.py, many_waves.py, many_sequence.py, fuse.py,
together.py): against one-by-one plans and default.qubit, values, gradients and second derivatives, float64
and float32, with the steps batched by waves, run one by one, or split between the two."""

import math

import numpy as np
import opt_einsum.testing
import pennylane as qml
import pytest
import torch

import qhybrid
from benchmarks.workloads import ladder_layers
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.network import many, many_sequence, many_tiny, programs, together
from qhybrid.devices.tensornet.engines.network import products as network_products
from qhybrid.devices.tensornet.engines.network.fuse import fuse_chains
from qhybrid.devices.tensornet.engines.network.many import ManyTrees, NotTogether
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan, _binary_tree


def _random_networks(count, seed):
    """(plans, leaves, table) of ``count`` random networks with hyperedges, operands laid end to end."""
    plans, leaves, parts, size = [], [], [], 0
    for net in range(seed * 100, seed * 100 + 50):
        if len(plans) == count:
            break
        eq, shapes = opt_einsum.testing.rand_equation(7 + net % 4, 3, seed=net, d_min=2, d_max=3, n_out=net % 3)
        terms, out = eq.split("->")
        terms = terms.split(",")
        label = {c: i for i, c in enumerate(sorted(set("".join(terms) + out)))}
        if any(len(set(t)) != len(t) for t in terms):
            continue
        sizes = {label[c]: d for t, sh in zip(terms, shapes) for c, d in zip(t, sh)}
        plans.append(ContractionPlan([tuple(label[c] for c in t) for t in terms], tuple(label[c] for c in out), sizes))
        gen = torch.Generator().manual_seed(net)
        ops = []
        for sh in shapes:
            t = torch.randn(*sh, dtype=torch.complex128, generator=gen)
            ops.append(size + np.arange(t.numel()).reshape(sh))
            parts.append(t.reshape(-1))
            size += t.numel()
        leaves.append(ops)
    return plans, leaves, torch.cat(parts)


def _one_by_one(plans, leaves, table):
    return torch.cat([p.contract([table[pos.reshape(-1)].reshape(pos.shape) for pos in lv]).reshape(-1)
                      for p, lv in zip(plans, leaves)])  # fmt: skip


SPLITS = {"waves": 10**9, "sequence": 0, "split": 6}
"""``BIG_STEP_ELEMENTS``: every step batched by waves, every step one by one, or both kinds in one tree."""

TINY = {"bmm": 0, "tiny": 10**9, "mixed": 40}
"""``many_tiny.TINY_PRODUCTS``: every wave group a ``bmm``, every one elementwise products, or some of each."""


OUTER = {"outer": 1, "bmm_only": 10**9}
"""``products.OUTER_MIN_ELEMENTS``: every step with no summed index a broadcast product, or none."""


@pytest.mark.parametrize("outer", sorted(OUTER))
@pytest.mark.parametrize("tiny", sorted(TINY))
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_trees_match_plans_one_by_one(seed, split, tiny, outer, monkeypatch):
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", SPLITS[split])
    monkeypatch.setattr(many_tiny, "TINY_PRODUCTS", TINY[tiny])
    monkeypatch.setattr(network_products, "OUTER_MIN_ELEMENTS", OUTER[outer])
    if split == "split" and seed == 2:  # fragmented permutations read through position tables
        monkeypatch.setattr(many_sequence, "MAX_COPY_RUNS", 1)
    plans, leaves, table = _random_networks(6, seed)
    table = table.requires_grad_()
    # a conjugated operand: network 0's first operand read from the table's conjugate block
    leaves[0][0] = leaves[0][0] + len(table)
    doubled = torch.cat([table, table.conj()])
    trees = ManyTrees(plans, leaves, len(table))
    bmm, products = any(w.groups for w in trees.waves), any(w.tiny for w in trees.waves)
    assert not (bmm if tiny == "tiny" else products if tiny == "bmm" else split == "waves" and not (bmm and products))
    got, want = trees.contract(table), _one_by_one(plans, leaves, doubled)
    assert torch.allclose(got, want, atol=1e-12, rtol=1e-12)
    w = torch.randn(got.shape, dtype=got.dtype, generator=torch.Generator().manual_seed(seed))
    (g1,) = torch.autograd.grad((got * w).real.sum(), table, create_graph=True)
    (g2,) = torch.autograd.grad((want * w).real.sum(), table, create_graph=True)
    assert torch.allclose(g1, g2, atol=1e-11)
    v = torch.randn(g1.shape, dtype=g1.dtype, generator=torch.Generator().manual_seed(seed + 7))
    (h1,) = torch.autograd.grad((g1 * v.conj()).real.sum(), table)
    (h2,) = torch.autograd.grad((g2 * v.conj()).real.sum(), table)
    assert torch.allclose(h1, h2, atol=1e-10)


@pytest.mark.parametrize("tiny", ["bmm", "tiny"])
@pytest.mark.parametrize("split", ["sequence", "split"])
def test_constant_leaves_get_no_cotangent_work_and_the_rest_theirs(split, tiny, monkeypatch):
    """The table's first ``constants`` entries need no gradient: their products are skipped, every other
    entry's gradient is the one-by-one plan's."""
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", SPLITS[split])
    monkeypatch.setattr(many_tiny, "TINY_PRODUCTS", TINY[tiny])
    plans, leaves, table = _random_networks(5, 3)
    constants = len(table) // 3
    table = table.requires_grad_()
    doubled = torch.cat([table, table.conj()])
    trees = many.ManyTrees(plans, leaves, len(table), constants=constants)
    got, want = trees.contract(table), _one_by_one(plans, leaves, doubled)
    assert torch.allclose(got, want, atol=1e-12)
    w = torch.randn(got.shape, dtype=got.dtype, generator=torch.Generator().manual_seed(5))
    (g1,) = torch.autograd.grad((got * w).real.sum(), table)
    (g2,) = torch.autograd.grad((want * w).real.sum(), table)
    assert torch.allclose(g1[constants:], g2[constants:], atol=1e-11)
    assert g2[:constants].abs().max() > 0  # (the skipped entries had a gradient to skip)
    if split == "sequence":  # a step whose one operand needs no cotangent keeps only the other's reader
        steps = trees.sequence.steps
        assert any(st.a.grad != st.b.grad for st in steps)
        assert trees.sequence.held_elements < sum(st.rows * st.k * (st.m + st.n) for st in steps)


def test_a_large_step_reads_its_larger_operand_in_that_operand_own_order(monkeypatch):
    """The indices a step's operands share (batch and summed) follow the larger operand's order, so that it is
    read as it lies (or in few runs) and the small one takes the permutation: ``B = B1 V`` (a..g, 128 elements,
    held) meets ``A`` (c, b, a, x), whose order of the shared a, b, c differs, and ``B`` is read unpermuted."""
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 0)  # every step one by one, ``B`` held
    monkeypatch.setattr(many, "fuse_chains", lambda nodes, indices, sizes, root, big: (nodes, indices, root))
    a_, b_, c_, d, e, f, g, x, y = range(9)
    inputs = [(a_, b_, c_, d, e, f, g, y), (y,), (c_, b_, a_, x)]
    output = (x, a_, b_, d, e, f, g)
    plan = ContractionPlan(inputs, output, dict.fromkeys(range(9), 2))
    plan._tree = _binary_tree(inputs, output, [(0, 1), (0, 1)])  # B1 V first, then A
    gen = torch.Generator().manual_seed(4)
    parts = [torch.randn(2 ** len(ix), dtype=torch.complex128, generator=gen) for ix in inputs]
    starts = np.cumsum([0] + [len(t) for t in parts])
    leaves = [[starts[j] + np.arange(len(t)).reshape([2] * len(ix)) for j, (t, ix) in enumerate(zip(parts, inputs))]]
    table = torch.cat(parts).requires_grad_()
    trees = ManyTrees([plan], leaves, len(table))
    steps = trees.sequence.steps
    assert len(steps) == 2 and (steps[1].rows, steps[1].m, steps[1].k, steps[1].n) == (4, 2, 2, 16)
    held, small = (steps[1].b, steps[1].a) if steps[1].b.slot == 0 else (steps[1].a, steps[1].b)
    assert held.slot == 0 and small.slot < 0
    assert held.perm is None and held.index is None  # read as it lies (before: through (1, 0, 2, 3, 4, 5, 6))
    got, want = trees.contract(table), _one_by_one([plan], leaves, torch.cat([table, table.conj()]))
    assert torch.allclose(got, want, atol=1e-12)
    w = torch.randn(got.shape, dtype=got.dtype, generator=gen)
    (g1,) = torch.autograd.grad((got * w).real.sum(), table)
    (g2,) = torch.autograd.grad((want * w).real.sum(), table)
    assert torch.allclose(g1, g2, atol=1e-11)


def _doubled_networks(count, seed):
    """``<psi|H|psi>`` networks: a random chain of ket tensors from the table, their bra copies read from its
    conjugate block on their own bond indices, and a Hermitian ``H`` (the table's constant head) on the
    first two open indices; the other open indices join ket to bra directly."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(4, 4, dtype=torch.complex128, generator=gen)
    parts, size = [(h + h.conj().T).reshape(-1)], 16
    plans, leaves = [], []
    for net in range(count):
        n = 4 + net % 3
        ket = [tuple(x for x in (100 + j, j, 101 + j) if x not in (100, 100 + n)) for j in range(n)]
        bra = [tuple(200 + x - 100 if x >= 100 else (50 + x if x < 2 else x) for x in ix) for ix in ket]
        inputs = ket + bra + [(0, 1, 50, 51)]
        sizes = {x: 2 for ix in inputs for x in ix}
        plans.append(ContractionPlan(inputs, (), sizes))
        ops = []
        for ix in ket:
            t = torch.randn(*[2] * len(ix), dtype=torch.complex128, generator=gen)
            ops.append(size + np.arange(t.numel()).reshape(t.shape))
            parts.append(t.reshape(-1))
            size += t.numel()
        leaves.append(ops)
    table = torch.cat(parts)
    leaves = [ops + [p + len(table) for p in ops] + [np.arange(16).reshape(2, 2, 2, 2)] for ops in leaves]
    return plans, leaves, table


@pytest.mark.parametrize("tiny", ["bmm", "tiny"])
@pytest.mark.parametrize("split", ["waves", "sequence", "split"])
def test_mirrored_networks_take_the_bra_gradient_from_the_ket(split, tiny, monkeypatch):
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", SPLITS[split])
    monkeypatch.setattr(many_tiny, "TINY_PRODUCTS", TINY[tiny])
    plans, leaves, table = _doubled_networks(4, 11)
    table = table.requires_grad_()
    plain = many.ManyTrees(plans, leaves, len(table), constants=16)
    mirrored = many.ManyTrees(plans, leaves, len(table), constants=16, mirrored=True)
    assert mirrored.mirrored and not plain.mirrored
    v1, v2 = plain.contract(table), mirrored.contract(table)
    assert torch.allclose(v1, v2, atol=1e-12) and v1.imag.abs().max() < 1e-10  # <psi|H|psi> is real
    w = torch.randn(v1.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    (g1,) = torch.autograd.grad((v1.real * w).sum(), table)
    (g2,) = torch.autograd.grad((v2.real * w).sum(), table)
    assert torch.allclose(g1[16:], g2[16:], atol=1e-11)
    leaves[0][-1] = leaves[0][-1] + 16  # H read from elsewhere: not every entry mirrored, the plain way
    assert not many.ManyTrees(plans, leaves, len(table), constants=16, mirrored=True).mirrored


def test_retained_graph_backs_twice(monkeypatch):
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 0)
    plans, leaves, table = _random_networks(3, 4)
    table = table.requires_grad_()
    out = ManyTrees(plans, leaves, len(table)).contract(table).real.sum()
    (g1,) = torch.autograd.grad(out, table, retain_graph=True)
    (g2,) = torch.autograd.grad(out, table)
    assert torch.equal(g1, g2)


@pytest.mark.parametrize("seed", range(6))
def test_fused_chains_contract_as_the_tree_they_rewrite(seed):
    """A cone tensor meeting gates one by one: ``(T g1) g2 ...`` rewritten ``T (g1 g2 ...)``, same result."""
    rng = np.random.default_rng(seed)
    n_axes = 9
    inputs, wires = [tuple(range(n_axes))], list(range(n_axes))
    label = n_axes
    for _ in range(6):  # gates on random wires: one-wire dense, two-wire dense, or diagonal (hyperedge)
        kind = rng.integers(3)
        w = sorted(rng.choice(n_axes, size=1 if kind == 0 else 2, replace=False).tolist())
        if kind == 2:
            inputs.append(tuple(wires[x] for x in w))
            continue
        new = list(range(label, label + len(w)))
        label += len(w)
        inputs.append(tuple(new) + tuple(wires[x] for x in w))
        for x, nw in zip(w, new):
            wires[x] = nw
    output = tuple(wires[:3])
    sizes = {i: 2 for i in range(label)}
    nodes, indices = _binary_tree(inputs, output, [(0, 1)] * (len(inputs) - 1))  # gate after gate into T
    fused, fused_ix, root = fuse_chains(nodes, indices, sizes, max(nodes), big=16)
    assert len(fused) == len(nodes) and fused != nodes  # the same number of steps, re-associated
    gen = torch.Generator().manual_seed(seed)
    ops = [torch.randn([2] * len(ix), dtype=torch.complex128, generator=gen) for ix in inputs]
    got = _contract_tree(fused, fused_ix, root, ops)
    want = _contract_tree(nodes, indices, max(nodes), ops)
    assert fused_ix[root] == indices[max(nodes)] == output
    assert torch.allclose(got, want, atol=1e-12)


def _contract_tree(nodes, indices, node, ops):
    if node not in nodes:
        return ops[node]
    left, right = nodes[node]
    letters = {}
    sym = lambda ix: "".join(letters.setdefault(x, chr(97 + len(letters))) for x in ix)  # noqa: E731
    eq = f"{sym(indices[left])},{sym(indices[right])}->{sym(indices[node])}"
    return torch.einsum(eq, _contract_tree(nodes, indices, left, ops), _contract_tree(nodes, indices, right, ops))


def test_many_trees_refuse_what_they_do_not_take():
    plan = ContractionPlan([(0, 1)], (0,), {0: 2, 1: 2})  # one tensor, an index summed inside it
    with pytest.raises(NotTogether):
        ManyTrees([plan], [[np.arange(4).reshape(2, 2)]], 4)
    plan = ContractionPlan([(0, 1), (1,)], (0,), {0: 2, 1: 2})
    with pytest.raises(NotTogether):  # an operand shaped otherwise than its indices
        ManyTrees([plan], [[np.arange(2).reshape(2, 1), np.arange(2)]], 4)
    with pytest.raises(NotTogether, match="memory"):  # refused before any position table is made
        ManyTrees([plan], [[np.arange(4).reshape(2, 2), np.array([4, 5])]], 6, max_elements=20)
    trees = ManyTrees([plan], [[np.arange(4).reshape(2, 2), np.array([4, 5])]], 6, max_elements=1e6)
    with pytest.raises(ValueError, match="table"):
        trees.contract(torch.zeros(5, dtype=torch.complex128))


N = 7
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 0), (0, 3), (2, 5)]


def _qaoa_like(seed):
    """A QAOA-shaped circuit with diagonal gates of several kinds and a few dense two-qubit gates."""
    rng = np.random.default_rng(seed)
    offsets, targets = rng.uniform(size=2), rng.integers(N, size=2)

    def circuit(gamma, beta, coeffs):
        for w in range(N):
            qml.Hadamard(w)
        for layer in range(2):
            for k, (u, v) in enumerate(EDGES):
                kind = (k + layer + seed) % 3
                if kind == 0:
                    qml.IsingZZ(gamma[layer] * (1 + 0.1 * k), wires=[u, v])
                elif kind == 1:
                    qml.CRZ(gamma[layer], wires=[u, v])
                else:
                    qml.CZ(wires=[u, v])
            for w in range(N):
                qml.RX(beta[layer], wires=w)
            qml.RY(beta[layer] * 0.7 + float(offsets[layer]), wires=int(targets[layer]))
            qml.CNOT(wires=[1, 4])
        obs = [qml.Z(0) @ qml.Z(1), qml.X(2), qml.Y(3) @ qml.Z(5), qml.Z(4) @ qml.Z(6), qml.Identity(0)]
        return qml.expval(qml.Hamiltonian(coeffs, obs))

    return circuit


@pytest.fixture
def word_networks(monkeypatch):
    """Closed networks, one per Pauli word (no sentence as one network), and a count of together runs."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(programs, "PAULI_SUM_MIN_WORDS", 10**9)
    runs = []
    contract = together.Together.contract
    monkeypatch.setattr(together.Together, "contract", lambda self, values: runs.append(1) or contract(self, values))
    return runs


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_words_together_match_default_qubit(seed, dtype, word_networks):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    tol = 1e-10 if dtype == torch.complex128 else 2e-5
    circuit = _qaoa_like(seed)
    args = [torch.tensor([0.4, -0.9], dtype=real), torch.tensor([1.1, 0.3], dtype=real),
            torch.tensor([0.7, -0.4, 1.2, 0.5, 0.25], dtype=real)]  # fmt: skip
    results = {}
    for name, dev in (("qhybrid", qhybrid.device("tensornet", wires=N, dtype=dtype)), ("ref", qml.device("default.qubit"))):
        xs = [a.clone().to(torch.float64 if name == "ref" else real).requires_grad_() for a in args]
        node = qhybrid.qnode(dev)(circuit) if name == "qhybrid" else qml.QNode(circuit, dev, interface="torch")
        value = node(*xs)
        grads = torch.autograd.grad(value, xs)
        results[name] = (value.detach(), grads)
    assert word_networks, "the words' networks were not contracted together"
    (v, g), (rv, rg) = results["qhybrid"], results["ref"]
    assert abs(float(v) - float(rv)) < tol
    for a, b in zip(g, rg):
        assert torch.allclose(a.to(torch.float64), b, atol=tol)


def test_words_together_second_derivatives(word_networks):
    circuit = _qaoa_like(0)
    coeffs = torch.tensor([0.7, -0.4, 1.2, 0.5, 0.25], dtype=torch.float64)
    x = torch.tensor([0.4, -0.9, 1.1, 0.3], dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=N)
    node = qhybrid.qnode(dev, diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch", diff_method="backprop")
    hess = torch.autograd.functional.hessian(lambda v: node(v[:2], v[2:], coeffs), x)
    want = torch.autograd.functional.hessian(lambda v: ref(v[:2], v[2:], coeffs), x)
    assert word_networks
    assert torch.allclose(hess, want, atol=1e-10)


def test_batched_words_fall_back_one_by_one(word_networks):
    circuit = _qaoa_like(1)
    gamma = torch.tensor([[0.4, -0.9], [0.1, 0.2], [1.5, -0.3]], dtype=torch.float64).T  # a batch of 3 in layer 0
    beta = torch.tensor([1.1, 0.3], dtype=torch.float64)
    coeffs = torch.tensor([0.7, -0.4, 1.2, 0.5, 0.25], dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=N)
    got = qhybrid.qnode(dev)(circuit)(gamma, beta, coeffs)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(gamma, beta, coeffs)
    assert got.shape == want.shape == (3,)
    assert torch.allclose(got, want, atol=1e-10)


def test_trainable_coefficients_of_a_sentence_keep_their_gradients(monkeypatch):
    """A sentence measured as one network baked its coefficients in as numbers: their gradients were 0."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)

    def circuit(c):
        qml.RX(0.3, wires=0)
        qml.CNOT(wires=[0, 1])
        qml.RY(0.2, wires=2)
        return qml.expval(qml.Hamiltonian(c, [qml.Z(0) @ qml.Z(1), qml.X(2), qml.Y(1), qml.Identity(0)]))

    c = torch.tensor([0.5, 0.4, -0.3, 0.25], dtype=torch.float64, requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=3))(circuit)(c)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(c)
    assert abs(float(got) - float(want)) < 1e-10
    assert torch.allclose(torch.autograd.grad(got, c)[0], torch.autograd.grad(want, c)[0], atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_held_reads_position_tables_and_their_inverse(seed, monkeypatch):
    monkeypatch.setattr(many_sequence, "MAX_COPY_RUNS", 1)  # every fragmented read through tables
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(1, 4, size=int(rng.integers(2, 9))))
    perm = tuple(int(i) for i in rng.permutation(len(shape)))
    src = np.arange(math.prod(shape)).reshape(shape)
    want = src.transpose(perm).reshape(-1)
    for kind in (np.int32, np.int64):
        np.testing.assert_array_equal(many_sequence.permuted_positions(shape, perm, kind), want)
    fetch = many_sequence.held_fetch(0, shape, perm, True)
    if fetch.index is None:  # one run: read as it lies or as one permuted copy
        assert many_sequence._runs(shape, perm) <= 1
        return
    index, inverse = fetch.index.numpy(), fetch.inverse.numpy()
    np.testing.assert_array_equal(index, want)
    np.testing.assert_array_equal(inverse[index], np.arange(index.size))


LADDER = 8


def _ladder(hamiltonian: bool, seed: int):
    """W3 in small: RY layers and a CNOT ladder, one Z word in the middle (its light cone: the ladder below
    it) or a sentence of every wire's Z with a few other words (one MPO network)."""
    rng = np.random.default_rng(seed)
    coeffs = [float(c) for c in rng.uniform(-1, 1, size=LADDER + 2)]

    def circuit(theta):
        ladder_layers(theta, LADDER)
        if not hamiltonian:
            return qml.expval(qml.Z(LADDER // 2))
        words = [qml.Z(w) for w in range(LADDER)] + [qml.X(1) @ qml.Y(5), qml.Z(0) @ qml.X(7)]
        return qml.expval(qml.Hamiltonian(coeffs, words))

    return circuit


@pytest.fixture
def one_network(monkeypatch):
    """Closed networks of the whole circuit; counts of ``Together`` runs and of trees contracted one by one."""
    from qhybrid.devices.tensornet.backends import torch_backend

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    runs = {"together": 0, "one by one": 0}
    contract = together.Together.contract
    tree = torch_backend.contract_tree

    def counted(self, values):
        runs["together"] += 1
        return contract(self, values)

    def counted_tree(*args, **kwargs):
        runs["one by one"] += 1
        return tree(*args, **kwargs)

    monkeypatch.setattr(together.Together, "contract", counted)
    monkeypatch.setattr(torch_backend, "contract_tree", counted_tree)
    return runs


@pytest.mark.parametrize("hamiltonian", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_network_runs_as_many_trees_and_matches_default_qubit(hamiltonian, seed, one_network):
    """A single network (one word, or a sentence as one MPO network) used to be contracted by ``contract_tree``,
    an ``einsum`` a step (W3: 10,751 ops a step); now its tree runs through ``ManyTrees`` (342)."""
    circuit = _ladder(hamiltonian, seed)
    theta = torch.tensor(np.random.default_rng(seed).uniform(0, math.pi, size=(2, LADDER)))
    results = {}
    for name, dev in (("qhybrid", qhybrid.device("tensornet", wires=LADDER)), ("ref", qml.device("default.qubit"))):
        x = theta.clone().requires_grad_()
        node = qhybrid.qnode(dev)(circuit) if name == "qhybrid" else qml.QNode(circuit, dev, interface="torch")
        value = node(x)
        results[name] = (value.detach(), torch.autograd.grad(value, x)[0])
    assert one_network == {"together": 1, "one by one": 0}
    (v, g), (rv, rg) = results["qhybrid"], results["ref"]
    assert abs(float(v) - float(rv)) < 1e-10
    assert torch.allclose(g, rg, atol=1e-10)


def test_one_network_second_derivatives(one_network):
    circuit = _ladder(True, 2)
    theta = torch.tensor(np.random.default_rng(2).uniform(0, math.pi, size=(2, LADDER)))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=LADDER), diff_method="backprop")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit"), interface="torch", diff_method="backprop")
    hess = torch.autograd.functional.hessian(node, theta)
    want = torch.autograd.functional.hessian(ref, theta)
    assert one_network["together"] and not one_network["one by one"]
    assert torch.allclose(hess, want, atol=1e-10)


def test_an_observable_matrix_network_is_still_contracted_one_by_one(one_network):
    """A network reading the observable's own matrix (given with each call) stays on ``contract_tree``."""

    def circuit(theta):
        ladder_layers(theta, LADDER)
        return qml.expval(qml.Hermitian(np.diag([1.0, -2.0, 0.5, 3.0]), wires=[2, 5]))

    theta = torch.tensor(np.random.default_rng(3).uniform(0, math.pi, size=(2, LADDER)), requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=LADDER))(circuit)(theta)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(theta)
    assert one_network["one by one"] and not one_network["together"]
    assert abs(float(got.detach()) - float(want.detach())) < 1e-10


def test_a_network_the_budget_did_not_admit_is_contracted_one_by_one(one_network, monkeypatch):
    """A tree the step's ``KeptBudget`` turned away recomputes its intermediates in the backward
    (``contract_tree(keep=False)``); ``ManyTrees`` would keep them all, so it is not taken there."""
    init = programs._Contraction.__init__

    def refused(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.keep = False

    monkeypatch.setattr(programs._Contraction, "__init__", refused)
    circuit = _ladder(False, 4)
    theta = torch.tensor(np.random.default_rng(4).uniform(0, math.pi, size=(2, LADDER)), requires_grad=True)
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=LADDER))(circuit)(theta)
    want = qml.QNode(circuit, qml.device("default.qubit"), interface="torch")(theta)
    assert one_network["one by one"] and not one_network["together"]
    assert abs(float(got.detach()) - float(want.detach())) < 1e-10
    g, r = torch.autograd.grad(got, theta)[0], torch.autograd.grad(want, theta)[0]
    assert torch.allclose(g, r, atol=1e-10)

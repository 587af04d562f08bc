"""The hyper tier of the path search (``network/hyper.py``): min-fill elimination trees, subtree
reconfiguration and randomised greedy rounds for networks whose greedy path is costly, cotengra's
HyperOptimizer on what their budget share leaves, kahypar or cotengra's own partitioner; kept on disk;
the budget shared among cone classes by their flops (``lightcone/budget.py``). Values and gradients through hyper-planned networks equal
default.qubit. No timing."""

from __future__ import annotations

import math
import sys

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from _second_process import run_json
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import program as _cone_program
from qhybrid.devices.tensornet.engines.lightcone import whole as _whole
from qhybrid.devices.tensornet.engines.lightcone.budget import MIN_SHARE_S, plan_shares
from qhybrid.devices.tensornet.engines.network import hyper, partition, pathfind
from qhybrid.devices.tensornet.engines.network.path_cache import PathStore, valid_path
from qhybrid.devices.tensornet.engines.network.problem import Problem, _evaluate

TOL = 1e-10
pytestmark = pytest.mark.usefixtures("fresh_planner")  # tests/devices/tensornet/conftest.py


@pytest.fixture
def every_network_hyper(monkeypatch):
    """Every network above the exhaustive size gets the hyper tier (the test networks are cheap)."""
    monkeypatch.setattr(hyper, "HYPER_MIN_FLOPS", 0)


def _random_network(seed: int, n: int = 24, hyperedges: int = 6) -> Problem:
    """A random 3-regular graph's tensor network (bond 2) with a few extra tensors on shared (hyper) indices."""
    g = nx.random_regular_graph(3, n, seed=seed)
    edge_index = {tuple(sorted(e)): k for k, e in enumerate(g.edges())}
    inputs = [tuple(edge_index[tuple(sorted((v, u)))] for u in g.neighbors(v)) for v in g.nodes()]
    rng = torch.Generator().manual_seed(seed)
    for _ in range(hyperedges):  # diagonal-gate-like tensors on two existing indices: hyperedges
        a, b = torch.randperm(len(edge_index), generator=rng)[:2].tolist()
        inputs.append((a, b))
    return Problem.of(inputs, (), {k: 2 for k in range(len(edge_index))})


@pytest.mark.parametrize("seed", [1, 2])
def test_hyper_tier_is_never_worse_than_greedy(every_network_hyper, seed):
    problem = _random_network(seed)
    greedy = pathfind.find_paths([problem], "greedy")[0]
    (found,) = pathfind.find_paths([problem], "auto", plan_time=0.01)
    assert pathfind.STATS.hyper == 1 and found.searched
    assert valid_path([list(s) for s in found.path], problem.n)
    assert found.cost <= greedy.cost  # (ranked by flops and writes)
    assert _evaluate(problem, found.path).cost == found.cost  # its cost is that of its path
    # and without a start, improve's own tree still beats or ties greedy on these networks
    assert hyper.improve(problem, 0.0, greedy).flops <= greedy.flops


def test_cheap_networks_and_zero_budget_skip_the_hyper_tier():
    problem = _random_network(3)
    pathfind.find_paths([problem], "auto", plan_time=1.0)  # greedy costs far below HYPER_MIN_FLOPS
    assert pathfind.STATS.hyper == 0
    hyper.HYPER_MIN_FLOPS, saved = 0, hyper.HYPER_MIN_FLOPS
    try:
        pathfind.find_paths([problem], "auto", plan_time=0.0)  # plan_time=0: greedy paths only
        pathfind.find_paths([problem], pathfind.PathSettings("auto", hyper=False), plan_time=1.0)
    finally:
        hyper.HYPER_MIN_FLOPS = saved
    assert pathfind.STATS.hyper == 0


def test_deep_search_falls_back_to_cotengras_partitioner_without_kahypar(monkeypatch):
    import cotengra as ctg

    monkeypatch.setitem(sys.modules, "kahypar", None)  # `import kahypar` raises ImportError
    assert hyper.partitioner() == "labels" and hyper.deep_methods() == ["greedy", "labels"]
    built = []
    original = ctg.HyperOptimizer

    def spy(*args, **kwargs):
        built.append(kwargs)
        kwargs["max_repeats"] = 2  # two trials are enough to see it run
        return original(*args, **kwargs)

    monkeypatch.setattr(ctg, "HyperOptimizer", spy)
    monkeypatch.setattr(hyper, "DEEP_MIN_S", 0.0)
    monkeypatch.setattr(hyper, "PARTITION_MIN_S", 0.0)  # partitioned trees in any deep search
    problem = _random_network(4, n=16, hyperedges=2)
    greedy = pathfind.find_paths([problem], "greedy")[0]
    found = hyper.improve(problem, 5.0, greedy)  # two trials (max_repeats above), far within 5 s
    assert built and built[0]["methods"] == ["greedy", "labels"] and built[0]["reconf_opts"] == hyper.RECONF_OPTS
    assert found.flops <= greedy.flops and found.searched


def test_kahypar_is_the_partitioner_where_installed():
    pytest.importorskip("kahypar")
    assert hyper.partitioner() == partition.METHOD == "qhybrid-kahypar"


def test_hyper_paths_are_kept_on_disk_and_read_back(tmp_path, every_network_hyper):
    problems = [_random_network(5), _random_network(6)]
    settings = pathfind.PathSettings("auto", math.inf, PathStore(tmp_path))
    first = pathfind.find_paths(problems, settings, plan_time=0.01)
    assert pathfind.STATS.hyper == 2 and pathfind.STATS.disk_writes == 2
    pathfind.clear_memo()
    stats = pathfind.reset_stats()
    # the same networks numbered differently (indices shifted): the entries are found by structure
    shifted = [Problem.of([tuple(i + 100 for i in ix) for ix in p.inputs], (), {i + 100: s for i, s in p.sizes.items()})
               for p in problems]  # fmt: skip
    second = pathfind.find_paths(shifted, settings, plan_time=0.01)
    assert stats.disk_hits == 2 and stats.hyper == 0 and stats.disk_writes == 0 and stats.quick == 0
    assert [f.path for f in second] == [f.path for f in first] and [f.flops for f in second] == [f.flops for f in first]


def test_sliced_paths_keep_their_slices_on_disk(tmp_path):
    problem = _random_network(7)
    path = pathfind.find_paths([problem], "greedy")[0].path
    sliced = pathfind.sliced_path(problem, path, 8)
    assert sliced is not None and sliced.sliced
    store = PathStore(tmp_path)
    store.save(problem.inputs, problem.output, problem.sizes, sliced.path, True, sliced=sliced.sliced)
    (back,) = pathfind._from_store([problem], [None], store)
    assert back is not None and back.sliced == sliced.sliced
    assert (back.flops, back.largest, back.path) == (sliced.flops, sliced.largest, sliced.path)


def _qaoa(edges, n, p):
    cost = qml.dot([0.5 + 0.1 * k for k in range(len(edges))], [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(p):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in range(n):
                qml.RX(2 * beta[layer], wires=i)
        return qml.expval(cost)

    return circuit


def test_values_and_gradients_through_hyper_planned_cones_equal_default_qubit(monkeypatch, every_network_hyper):
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # light cones, each a closed network
    monkeypatch.setattr(_cone_program, "CONE_STATE_MAX_WIRES", 0)
    monkeypatch.setattr(_whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)  # not one network of the whole circuit
    n, p = 7, 3
    edges = [(i, (i + 1) % n) for i in range(n)] + [(0, 3)]
    f = _qaoa(edges, n, p)
    gen = torch.Generator().manual_seed(11)
    gamma, beta = torch.rand(p, generator=gen, dtype=torch.float64), torch.rand(p, generator=gen, dtype=torch.float64)

    def value_and_grad(node):
        g, b = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
        v = node(g, b)
        v.backward()
        return v.detach(), g.grad, b.grad

    dev = qhybrid.device("tensornet", wires=n, path_cache=False)
    got = value_and_grad(qhybrid.qnode(dev)(f))
    assert pathfind.STATS.hyper >= 1  # the cones' networks were hyper-planned
    ref = value_and_grad(qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop"))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_plan_shares_follow_the_flops():
    class Choice:
        def __init__(self, engine, flops):
            self.engine, self.network_flops = engine, flops

    a, b, c = object(), object(), object()
    choices = [Choice("closed network", 3e9), Choice("state vector", None), Choice("closed network", 1e9)]
    shares = plan_shares([a, b, c], choices, 2.0, True)
    assert shares == {id(a): 1.5, id(c): 0.5}  # the state-vector class plans nothing
    assert plan_shares([a, c], [choices[0], choices[2]], 0.0, True) == {id(a): MIN_SHARE_S, id(c): MIN_SHARE_S}
    assert plan_shares([a, c], [choices[0], choices[2]], 0.0, False) == {id(a): 0.0, id(c): 0.0}
    unpriced = [Choice("closed network", None), Choice("closed network", 5.0)]
    assert plan_shares([a, c], unpriced, 1.0, True) == {id(a): 0.5, id(c): 0.5}  # equal parts


# One process: a 9-node QAOA p=2 measured by light-cone classes, each a hyper-planned closed network with
# paths kept in argv[1]; prints what the planner did.
_SCRIPT = r"""
import json, sys, torch, pennylane as qml, qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.lightcone import program, whole
from qhybrid.devices.tensornet.engines.network import hyper, partition, pathfind
_simulate.STATE_MODE_MAX_WIRES = 0; program.CONE_STATE_MAX_WIRES = 0; whole.WHOLE_NETWORK_MAX_ELEMENTS = 0
hyper.HYPER_MIN_FLOPS = 0
n = 9
edges = [(i, (i + 1) % n) for i in range(n)] + [(0, 3), (2, 6)]
cost = qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])
def f(g, b):
    for i in range(n): qml.Hadamard(i)
    for l in range(2):
        for u, v in edges: qml.IsingZZ(2 * g[l], wires=[u, v])
        for i in range(n): qml.RX(2 * b[l], wires=i)
    return qml.expval(cost)
dev = qhybrid.device("tensornet", wires=n, path_cache=sys.argv[1])
value = qhybrid.qnode(dev, diff_method=None)(f)(torch.tensor([0.3, 0.5]), torch.tensor([0.2, -0.4]))
from qhybrid.devices.tensornet.engines.lightcone import together_store
s = pathfind.STATS
print(json.dumps({"value": repr(float(value)), "hyper": s.hyper, "disk_hits": s.disk_hits,
                  "schedules": together_store.STATS.hits}))
"""


def test_a_second_process_reads_the_cone_classes_hyper_paths(tmp_path):
    """Cone classes' networks are the same structures in every process (their canonical wire order must
    not depend on Python's per-process string hashing), so a second process plans none of them."""
    first, second = (run_json(_SCRIPT, tmp_path, hash_seed=str(seed), OMP_NUM_THREADS="1") for seed in (1, 2))
    assert first["hyper"] >= 5
    # a second process reads the paths, or the closed classes' compiled schedule that holds them
    assert second["hyper"] == 0 and (second["disk_hits"] >= first["hyper"] or second["schedules"] >= 1)
    assert second["value"] == first["value"]  # bit for bit: the same paths


def test_hyper_rounds_draw_new_seeds_while_they_pay(monkeypatch):
    """Steps 1-3: elimination draws in batches and randomised greedy rounds (a new seed each) while the
    payback rule allows (at most MAX_DRAWS / MAX_ROUNDS); one batch of draws and no round where it does
    not. Never worse than the one batch; the same structure gets the same tree on every call."""
    from cotengra.pathfinders import path_basic

    from qhybrid.devices.tensornet.engines.network import eliminate

    seeds, draws = [], []
    original, drawn = path_basic.RandomGreedyOptimizer, eliminate.min_fill_order

    def spy(*args, **kwargs):
        seeds.append(kwargs["seed"])
        return original(*args, **kwargs)

    def count(graph, seed=0, noise=0.0):
        draws.append(seed)
        return drawn(graph, seed, noise)

    monkeypatch.setattr(path_basic, "RandomGreedyOptimizer", spy)
    monkeypatch.setattr(hyper, "min_fill_order", count)
    problem = _random_network(8, n=20)
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", 0)
    one = hyper.improve(problem, 0.0)
    assert seeds == [] and draws == [hyper.SEED + k for k in range(hyper.DRAW_BATCH)]
    seeds.clear(), draws.clear()
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", math.inf)
    monkeypatch.setattr(hyper, "MAX_ROUNDS", 3)
    monkeypatch.setattr(hyper, "MAX_DRAWS", 2 * hyper.DRAW_BATCH)
    three = hyper.improve(problem, 0.0)
    assert seeds == [hyper.SEED, hyper.SEED + 1, hyper.SEED + 2] and len(draws) == 2 * hyper.DRAW_BATCH
    assert three.flops <= one.flops and three.searched
    assert valid_path([list(s) for s in three.path], problem.n)
    assert hyper.improve(problem, 0.0) == three


def test_costly_trees_get_partitioned_trials_while_they_pay(monkeypatch):
    """Step 4: a tree still costing PARTITION_MIN_FLOPS after steps 1-3 gets cotengra's HyperOptimizer over
    partitioned trees (the partitioner, reconfigured trials, as many as the payback allows up to
    MAX_PARTITION_TRIALS); never worse than steps 1-3; a cheaper tree gets none."""
    import cotengra as ctg

    built = []
    original = ctg.HyperOptimizer

    def spy(*args, **kwargs):
        built.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(ctg, "HyperOptimizer", spy)
    problem = _random_network(5, n=20)
    monkeypatch.setattr(hyper, "MAX_ROUNDS", 0)
    before = hyper.improve(problem, 0.0)
    assert built == []  # far below PARTITION_MIN_FLOPS
    monkeypatch.setattr(hyper, "PARTITION_MIN_FLOPS", 0.0)
    monkeypatch.setattr(hyper, "MAX_PARTITION_TRIALS", 3)
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", math.inf)
    after = hyper.improve(problem, 0.0)
    assert [b["seed"] for b in built] == list(hyper.PARTITION_SEEDS)  # one seeded search per seed
    for b in built:
        assert b["methods"] == [hyper.partitioner()] and b["max_repeats"] == 3 and b["reconf_opts"] == hyper.RECONF_OPTS
        assert b["optlib"] == hyper.PARTITION_OPTLIB and b["constants"] == {hyper.partitioner(): {"seed": b["seed"]}}
    assert after.cost <= before.cost and after.searched  # (ranked by flops and writes)
    assert valid_path([list(s) for s in after.path], problem.n)
    again = hyper.improve(problem, 0.0)  # seeded: a tree of the same cost again (its linear order may differ)
    assert (again.flops, again.write) == (after.flops, after.write)
    built.clear()
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", 0)  # no trial pays: none is run
    hyper.improve(problem, 0.0)
    assert built == []


def test_a_seeded_search_gives_its_tree_whatever_the_global_random_state(monkeypatch):
    """cotengra's partitioned trials also draw from Python's global ``random``: ``partition_search`` seeds it for
    the search (the same tree in every process) and gives the caller's state back."""
    import random

    problem = _random_network(5, n=20)
    trees = []
    for state in (1, 2, 3):
        random.seed(state)
        expected = random.random()
        random.seed(state)
        found = hyper.partition_search(problem, 3, 2, math.inf)
        trees.append((found.path, found.flops, found.write))
        assert random.random() == expected  # the caller's draws go on as if no search had run
    assert trees[0] == trees[1] == trees[2]


@pytest.mark.parametrize("seed", [3, 4])
def test_written_elements_match_cotengra_and_weigh_in_the_cost(seed):
    """``Found.write`` (elements the steps write, every slice counted) against cotengra's own count of the
    same tree; ``Found.cost`` is flops plus ``WRITE_WEIGHT`` per written element."""
    import cotengra as ctg

    from qhybrid.devices.tensornet.engines.network.problem import WRITE_WEIGHT
    from qhybrid.devices.tensornet.engines.network.slicing import _with_slices

    problem = _random_network(seed, n=18)
    found = pathfind.find_paths([problem], "greedy")[0]
    inputs, output, sizes = problem.symbolic()
    tree = ctg.ContractionTree.from_path(inputs, output, sizes, path=[list(s) for s in found.path])
    assert found.write == int(tree.total_write()) > 0
    assert found.cost == found.flops + WRITE_WEIGHT * found.write
    sliced = _with_slices(problem, found.path, (0, 1))
    inner = _evaluate(Problem.of([tuple(i for i in ix if i not in (0, 1)) for ix in problem.inputs], (), problem.sizes), found.path)
    assert sliced.write == 4 * inner.write

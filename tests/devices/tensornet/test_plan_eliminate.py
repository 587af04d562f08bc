"""Contraction trees from min-fill elimination orders (``network/eliminate.py``), the hyper tier's first
step: valid paths whose cost is their path's, orders that eliminate every non-output index once, the
incremental fill counts equal to a direct count, and contractions along them equal to the greedy path's
(and, through a device, to default.qubit in test_plan_hyper.py). No timing."""

from __future__ import annotations

import random

import networkx as nx
import pytest
import torch

from qhybrid.devices.tensornet.engines.network import eliminate, hyper
from qhybrid.devices.tensornet.engines.network.path_cache import valid_path
from qhybrid.devices.tensornet.engines.network.pathfind import _greedy
from qhybrid.devices.tensornet.engines.network.problem import Problem, _evaluate, _numel


def _qaoa_like(seed: int, n: int = 10, layers: int = 2, output: int = 0) -> Problem:
    """A closed bra-ket-like network of a random 3-regular graph: per layer, each edge a rank-2 diagonal
    tensor (a hyperedge on the wires' current indices), then each wire a rank-2 mixer to a new index;
    rank-1 caps at both ends; ``output`` wires keep their last index open. Mixed extents 2 and 3."""
    g = nx.random_regular_graph(3, n, seed=seed)
    rng = random.Random(seed)
    nxt = iter(range(10**6))
    cur = {w: next(nxt) for w in g.nodes()}
    inputs = [(cur[w],) for w in g.nodes()]
    for _ in range(layers):
        inputs += [(cur[u], cur[v]) for u, v in g.edges()]
        for w in g.nodes():
            new = next(nxt)
            inputs.append((cur[w], new))
            cur[w] = new
    opened = [cur[w] for w in list(g.nodes())[:output]]
    inputs += [(cur[w],) for w in list(g.nodes())[output:]]
    used = {i for ix in inputs for i in ix}
    sizes = {i: rng.choice((2, 2, 3)) for i in used}
    return Problem.of(inputs, tuple(opened), sizes)


def _random_network(seed: int, n: int = 18) -> Problem:
    g = nx.random_regular_graph(3, n, seed=seed)
    index = {tuple(sorted(e)): k for k, e in enumerate(g.edges())}
    inputs = [tuple(index[tuple(sorted((v, u)))] for u in g.neighbors(v)) for v in g.nodes()]
    return Problem.of(inputs, (), {k: 2 for k in index.values()})


def _contract(problem: Problem, path, seed: int) -> torch.Tensor:
    """Contract random complex tensors of the network along a linear path (pairwise einsums)."""
    gen = torch.Generator().manual_seed(seed)
    tensors = [
        torch.randn(*[problem.sizes[i] for i in ix], 2, generator=gen, dtype=torch.float64) for ix in problem.inputs
    ]
    tensors = [torch.view_as_complex(t) for t in tensors]
    indices = [tuple(ix) for ix in problem.inputs]
    count = {}
    for ix in indices:
        for i in ix:
            count[i] = count.get(i, 0) + 1
    letters = {i: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26) for k, i in enumerate(problem.sizes)}
    for step in path:
        taken = [(tensors.pop(p), indices.pop(p)) for p in sorted(step, reverse=True)]
        every = [i for _, ix in taken for i in ix]
        for i in every:
            count[i] -= 1
        kept = tuple(dict.fromkeys(i for i in every if count[i] > 0 or i in problem.output))
        for i in kept:
            count[i] += 1
        eq = ",".join("".join(letters[i] for i in ix) for _, ix in taken) + "->" + "".join(letters[i] for i in kept)
        tensors.append(torch.einsum(eq, *[t for t, _ in taken]))
        indices.append(kept)
    (result,), (ix,) = tensors, indices
    return result.permute(*[ix.index(i) for i in problem.output]) if problem.output else result


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("output", [0, 2])
def test_eliminated_paths_are_valid_and_contract_to_the_greedy_result(seed, output):
    problem = _qaoa_like(seed, output=output)
    found = eliminate.eliminate(problem, draws=4, seed=seed)
    assert valid_path([list(s) for s in found.path], problem.n)
    assert _evaluate(problem, found.path) == found  # its cost is that of its path
    greedy = [tuple(s) for s in _greedy(problem)]
    torch.testing.assert_close(_contract(problem, found.path, seed), _contract(problem, greedy, seed), atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("seed", [4, 5])
def test_orders_eliminate_every_inner_index_once_and_repeat_per_seed(seed):
    problem = _qaoa_like(seed, output=3)
    graph = eliminate.IndexGraph(problem)
    order, estimate = eliminate.min_fill_order(graph, seed, eliminate.NOISE)
    inner = {i for ix in problem.inputs for i in ix} - set(problem.output)
    assert sorted(order) == sorted(inner) and estimate > 0
    assert eliminate.min_fill_order(graph, seed, eliminate.NOISE) == (order, estimate)
    assert graph.adj == eliminate.IndexGraph(problem).adj  # a draw leaves the graph as it was


def _direct_min_fill(problem: Problem) -> list:
    """Min-fill without noise by direct recounting (ties: fewer neighbours, then the lower index number)."""
    graph = eliminate.IndexGraph(problem)
    adj = {v: {u for u in range(len(graph.names)) if graph.adj[v] >> u & 1} for v in range(len(graph.names))}
    left = {v for v in adj if not graph.kept >> v & 1}
    order = []
    while left:
        def fill(v):
            near = sorted(adj[v])
            return sum(1 for a in near for b in near if a < b and b not in adj[a])

        v = min(left, key=lambda v: (fill(v), len(adj[v]), v))
        for a in adj[v]:
            adj[a] |= adj[v] - {a}
            adj[a].discard(v)
        del adj[v]
        left.discard(v)
        order.append(graph.names[v])
    return order


@pytest.mark.parametrize("make", [_qaoa_like, _random_network])
@pytest.mark.parametrize("seed", [6, 7])
def test_incremental_fill_counts_match_a_direct_count(make, seed):
    problem = make(seed)
    order, _ = eliminate.min_fill_order(eliminate.IndexGraph(problem), seed, 0.0)
    assert order == _direct_min_fill(problem)


@pytest.mark.parametrize("seed", [8, 9])
def test_hyper_tier_keeps_the_better_of_elimination_and_greedy(seed):
    problem = _qaoa_like(seed, n=12, layers=3)
    greedy = _evaluate(problem, [tuple(s) for s in _greedy(problem)])
    found = hyper.improve(problem, 0.0, greedy)
    assert found.searched and found.cost <= greedy.cost  # ranked by flops and writes (``Found.cost``)
    assert found.cost <= eliminate.eliminate(problem, 1).cost  # never worse than the plain min-fill tree
    torch.testing.assert_close(_contract(problem, found.path, seed), _contract(problem, greedy.path, seed), atol=1e-10, rtol=1e-10)


def test_elimination_beats_greedy_on_deep_hyperedge_networks():
    """The reason for the tier's first step: on a deep QAOA-like network the min-fill tree is far cheaper
    than the greedy one (here 2^28 against 2^33 flops)."""
    problem = _qaoa_like(11, n=20, layers=4)
    greedy = _evaluate(problem, [tuple(s) for s in _greedy(problem)])
    assert eliminate.eliminate(problem, 8).flops * 4 < greedy.flops


def _evaluate_sets(problem: Problem, path):
    """``problem._evaluate`` as it was, with frozensets: (flops, largest, widest) of a linear path."""
    working, output = problem.sets()
    count = {}
    for ix in working:
        for i in ix:
            count[i] = count.get(i, 0) + 1
    flops = largest = widest = 0
    for step in path:
        taken = [working.pop(p) for p in sorted(step, reverse=True)]
        every = frozenset().union(*taken)
        for ix in taken:
            for i in ix:
                count[i] -= 1
        kept = frozenset(i for i in every if count[i] > 0 or i in output)
        for i in kept:
            count[i] += 1
        working.append(kept)
        flops += _numel(every, problem.sizes) * (2 if len(kept) < len(every) else 1)
        largest = max(largest, _numel(kept, problem.sizes))
        widest = max(widest, len(every))
    return flops, largest, widest


def test_bitset_path_costs_equal_the_set_count():
    """``_evaluate`` counts with int bitsets: equal to the set count on random networks with mixed extents,
    output indices, scalars and steps of two or three tensors."""
    rng = random.Random(1)
    for _ in range(300):
        n, labels = rng.randint(1, 12), list(range(rng.randint(1, 10)))
        inputs = [tuple(rng.sample(labels, rng.randint(0, min(4, len(labels))))) for _ in range(n)]
        used = sorted({i for ix in inputs for i in ix})
        output = tuple(rng.sample(used, rng.randint(0, min(2, len(used))))) if used else ()
        problem = Problem.of(inputs, output, {i: rng.choice((1, 2, 3, 5)) for i in labels})
        path, left = [], n
        while left > 1:
            k = rng.randint(2, min(3, left))
            path.append(tuple(rng.sample(range(left), k)))
            left -= k - 1
        found = _evaluate(problem, path)
        assert (found.flops, found.largest, found.widest) == _evaluate_sets(problem, path)

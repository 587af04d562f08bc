"""Few, large ops on the closed-network engine (issue 39, item 3): a steady value + gradient step of deep QAOA
(Q100p3's kind and L8p3's: cone classes whose members share rows; and a Hamiltonian's words as closed networks of
the whole circuit contracted together, what Q100p3 ran as before its words went by cone classes) dispatches a
bounded number of aten ops, and the compact step (wave groups padded to shared shapes, one tiny part a wave, large
steps batched by levels over one pool, shared classes read by one gather) gives the values and gradients of the
per-step buffers' path.

Before (main 396b854), under this test's greedy plans: Q40p3 4,869 ops a step, L6p3 2,259; after: 1,213 and 1,876
(Q100p3 4,028 -> 1,317 and L8p3 5,237 -> 1,277 under the benchmarks' searched plans). By cone classes Q40p3
dispatches 1,775 (Q100p3 1,431, its static step 0.66x the time of its words' networks), and 1,096 (Q100p3 835) since
the classes whose members read distinct rows join the shared classes' pass."""

from __future__ import annotations

import networkx as nx
import pytest
import torch

import qhybrid
from benchmarks.workloads import lattice_edges, qaoa_function
from qhybrid.devices.tensornet.engines.lightcone import program, whole
from qhybrid.devices.tensornet.engines.network import many_arena
from qhybrid.testing import OpCount


P = 3


def _edges(kind: str) -> tuple[int, list]:
    if kind == "Q40p3":  # a random 3-regular graph (Q100p3's kind, smaller)
        return 40, [(int(u), int(v)) for u, v in nx.random_regular_graph(3, 40, seed=1).edges()]
    return 36, lattice_edges(6)  # a 6x6 lattice (L8p3's kind)


def _step(kind: str):
    n, edges = _edges(kind.split()[0])
    # greedy paths: the same plan however loaded the machine (a timed search's trees, and so the counts, vary)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n, optimizer="greedy"))(qaoa_function(edges, n))

    def step():
        gamma = torch.linspace(0.15, 0.5, P, dtype=torch.float64).requires_grad_()
        beta = torch.linspace(-0.4, -0.1, P, dtype=torch.float64).requires_grad_()
        value = node(gamma, beta)
        return (value.detach(), *torch.autograd.grad(value, (gamma, beta)))

    return step


@pytest.mark.parametrize("kind,most", [("Q40p3", 1200), ("Q40p3 words", 1400), ("L6p3", 2100)])  # 396b854: 4,869, 2,259
def test_a_deep_qaoa_step_is_few_ops_and_matches_the_per_step_buffers(kind, most, monkeypatch):
    if kind.endswith("words"):  # the whole circuit's word networks, as Q100p3 ran before
        monkeypatch.setattr(whole, "cheaper_apart", lambda *args, **kwargs: False)
        monkeypatch.setattr(program, "store_of", lambda opts: None)  # (no cone classes kept from another case)
    step = _step(kind)
    for _ in range(2):  # plans, then the arena's first step
        got = step()
    count = OpCount()
    with count:
        again = step()
    total = count.total
    assert total <= most, f"{kind}: {total} ops a step, {count.ops.most_common(6)}"
    for a, b in zip(got, again):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    # the same schedules over fresh buffers every step (no arena: ``many_sequence``, ``many_waves``' own passes)
    monkeypatch.setattr(many_arena, "ARENA_MAX_ELEMENTS", 0)
    fresh = _step(kind)()
    for a, b in zip(got, fresh):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)

"""The routing plan: every gate meets its wires on contiguous sites, non-commuting gates keep their order on
every wire (diagonal gates may trade places), and distant gates cost fewer splits than SWAPs out and back."""

import numpy as np
import pytest

from qhybrid.devices.tensornet.engines.mps.route import Block, _dependencies, _Router, plan, plan_cost
from qhybrid.devices.tensornet.engines.mps.route_match import MatchRouter


def _random_gates(n, count, seed, diagonal_share=0.5):
    rng = np.random.default_rng(seed)
    gates = []
    for _ in range(count):
        k = int(rng.choice([1, 2, 2, 2, 3]))
        slots = tuple(int(s) for s in rng.choice(n, k, replace=False))
        gates.append((slots, bool(rng.random() < diagonal_share)))
    return tuple(gates)


def _sorting_plan(gates, n):
    return MatchRouter(gates, n, *_dependencies(gates), Block).run()


def _replay(gates, n, router=plan):
    """Runs the plan on a list of wires: checks each block, returns the gate order and the final sites."""
    blocks, final = router(gates, n)
    at = list(range(n))  # site -> slot
    order = []
    for b in blocks:
        if b.gate is None:
            assert b.width == 2
            at[b.start], at[b.start + 1] = at[b.start + 1], at[b.start]
            continue
        slots = gates[b.gate][0]
        assert b.width == len(slots) and sorted(b.offsets) == list(range(b.width))
        assert [at[b.start + o] for o in b.offsets] == list(slots)  # wire j of the gate on its offset
        if b.swap_after:
            at[b.start], at[b.start + 1] = at[b.start + 1], at[b.start]
        order.append(b.gate)
    assert sorted(order) == list(range(len(gates)))
    assert all(at[final[s]] == s for s in range(n))
    return order


@pytest.mark.parametrize("router", [plan, _sorting_plan], ids=["plan", "sorting"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_blocks_meet_their_wires_and_keep_non_commuting_order(seed, router):
    n = 9
    gates = _random_gates(n, 120, seed)
    order = _replay(gates, n, router)
    rank = {g: i for i, g in enumerate(order)}
    for a in range(len(gates)):
        for b in range(a + 1, len(gates)):
            shared = set(gates[a][0]) & set(gates[b][0])
            if shared and not (gates[a][1] and gates[b][1]):
                assert rank[a] < rank[b], (a, b)


def test_diagonal_gates_are_reordered():
    """A cost layer of a ring (all diagonal): the plan is free to leave circuit order."""
    n = 8
    gates = tuple(((i, (i + 1) % n), True) for i in range(n)) * 2
    order = _replay(gates, n)
    assert order != sorted(order)


def test_a_distant_gate_costs_d_minus_1_swaps():
    n = 10
    blocks, final = plan((((0, n - 1), False),), n)
    assert sum(b.gate is None for b in blocks) == n - 2  # moved next to its partner and left there
    assert sorted(final) == list(range(n)) and abs(final[0] - final[n - 1]) == 1


def test_ring_layers_cost_less_than_swapping_back():
    """StronglyEntanglingLayers' CNOT rings (ranges 1, 2, 3) on 30 wires: SWAPs out and back need 484."""
    n = 30
    gates = tuple(((i, (i + r) % n), False) for r in (1, 2, 3) for i in range(n))
    blocks, _ = plan(gates, n)
    assert sum(b.gate is None for b in blocks) < 484 * 0.6


def _lattice_qaoa(side, layers):
    """Gate structure of a QAOA circuit on a side x side lattice (row-major wires): Hadamards, then per layer
    every edge's IsingZZ (diagonal) and every wire's RX."""
    n = side * side
    edges = [(r * side + c, r * side + c + 1) for r in range(side) for c in range(side - 1)]
    edges += [(r * side + c, (r + 1) * side + c) for r in range(side - 1) for c in range(side)]
    gates = [((i,), False) for i in range(n)]
    for _ in range(layers):
        gates += [(e, True) for e in edges] + [((i,), False) for i in range(n)]
    return tuple(gates), n


def test_lattice_layers_are_sorted_together():
    """A 6x6 lattice QAOA: sorting rows into each other costs far fewer SWAPs than moving one wire per edge,
    and the plan keeps it."""
    gates, n = _lattice_qaoa(6, 3)
    greedy, _ = _Router(gates, n).run()
    sorting, _ = _sorting_plan(gates, n)
    swaps = lambda blocks: sum(b.gate is None for b in blocks)
    assert swaps(sorting) < 0.7 * swaps(greedy)
    assert plan(gates, n)[0] == sorting
    _replay(gates, n, _sorting_plan)


@pytest.mark.parametrize("gates, n", [_lattice_qaoa(4, 2), (_random_gates(9, 80, 5), 9), (_random_gates(9, 80, 6, 0.0), 9)])
def test_plan_keeps_the_cheaper_router(gates, n):
    chosen = plan_cost(plan(gates, n)[0])
    assert chosen == min(plan_cost(_Router(gates, n).run()[0]), plan_cost(_sorting_plan(gates, n)[0]))

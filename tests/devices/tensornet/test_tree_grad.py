"""Reverse mode through the contraction tree (engines/network/tree_grad.py) against torch autograd through
the plan's own einsum steps: random networks with hyperedges, broadcast (extent-1) operands, real and
complex, first and second derivatives."""

import random

import pytest
import torch

from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
from qhybrid.devices.tensornet.engines.network.tree_grad import contract_tree


def _network(seed):
    rng = random.Random(seed)
    n, n_idx = rng.randint(2, 24), rng.randint(4, 30)
    inputs = [tuple(rng.sample(range(n_idx), rng.randint(1, 4))) for _ in range(n)]
    used = sorted({i for ix in inputs for i in ix})
    output = tuple(rng.sample(used, min(rng.randint(0, 2), len(used))))
    sizes = {i: rng.choice([2, 3]) for i in used}
    dtype = rng.choice([torch.complex128, torch.float64])
    gen = torch.Generator().manual_seed(seed)
    operands = [
        torch.randn([1 if rng.random() < 0.1 else sizes[i] for i in ix], dtype=dtype, generator=gen).requires_grad_(
            rng.random() < 0.7
        )
        for ix in inputs
    ]
    return ContractionPlan(inputs, output, sizes, optimizer="greedy"), operands, sizes


def _loss(result, weight):
    value = (result * weight).sum()
    return value.real if value.is_complex() else value


@pytest.mark.parametrize("keep, max_memory", [(True, None), (False, None), (False, 0.0), (False, 64.0)],
                         ids=["kept", "recomputed", "recomputed-nothing-kept", "recomputed-bounded"])
@pytest.mark.parametrize("seed", range(24))
def test_tree_backward_matches_autograd(seed, keep, max_memory):
    """keep=False: the forward keeps only the operands and the backward runs the steps again, keeping of its
    intermediates what fits half of max_memory (none, or a few small ones) and recomputing the others."""
    plan, operands, sizes = _network(seed)
    wanted = [o for o in operands if o.requires_grad]
    if not wanted:
        pytest.skip("no operand needs a gradient")
    weight = torch.randn([sizes[i] for i in plan.output], dtype=operands[0].dtype)
    ref = torch.autograd.grad(_loss(plan.contract(operands), weight), wanted, allow_unused=True)
    out = contract_tree(plan, operands, keep=keep, max_memory=max_memory)
    node = "_TreeContractionBackward" if keep else "_RecomputedTreeBackward"
    assert type(out.grad_fn).__name__ == node
    torch.testing.assert_close(out, plan.contract(operands), atol=1e-12, rtol=1e-12)
    got = torch.autograd.grad(_loss(out, weight), wanted, allow_unused=True)
    for g, h in zip(got, ref):
        if h is None:
            assert g is None or not g.abs().any()
            continue
        assert g.shape == h.shape
        torch.testing.assert_close(g, h, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "recomputed"])
@pytest.mark.parametrize("seed", [1, 7, 12])
def test_second_derivatives_through_the_tree(seed, keep):
    """A backward that builds a graph (higher derivatives) differentiates a recorded contraction."""
    plan, operands, sizes = _network(seed)
    operands = [o.detach().requires_grad_() for o in operands]
    weight = torch.randn([sizes[i] for i in plan.output], dtype=operands[0].dtype)

    def curvature(contract):
        grads = torch.autograd.grad(_loss(contract(plan, operands), weight), operands, create_graph=True)
        total = sum((g.abs() ** 2).sum() for g in grads)
        return torch.autograd.grad(total, operands, allow_unused=True)

    tree = lambda p, o: contract_tree(p, o, keep=keep)  # noqa: E731
    for g, h in zip(curvature(tree), curvature(lambda p, o: p.contract(o))):
        if h is None:
            continue
        torch.testing.assert_close(g, h, atol=1e-9, rtol=1e-9)


def test_one_autograd_node_per_contraction():
    plan = ContractionPlan([(0, 1), (1, 2), (2, 3), (3, 0)], (), {0: 2, 1: 2, 2: 2, 3: 2})
    ops = [torch.randn(2, 2, dtype=torch.complex128, requires_grad=True) for _ in range(4)]
    out = contract_tree(plan, ops)
    assert type(out.grad_fn).__name__ == "_TreeContractionBackward"
    assert {type(n[0]).__name__ for n in out.grad_fn.next_functions} == {"AccumulateGrad"}


def test_recomputed_tree_saves_only_its_operands():
    plan = ContractionPlan([(0, 1), (1, 2), (2, 3), (3, 4)], (0, 4), {i: 3 for i in range(5)}, optimizer="greedy")
    ops = [torch.randn(3, 3, dtype=torch.complex128, requires_grad=True) for _ in range(4)]
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        contract_tree(plan, ops, keep=False)
    assert saved == [9] * 4
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        contract_tree(plan, ops, keep=True)
    assert sum(saved) == 4 * 9 + plan.held_elements


def test_held_elements_counts_every_intermediate():
    plan = ContractionPlan([(0, 1), (1, 2), (2, 3)], (0, 3), {0: 2, 1: 3, 2: 4, 3: 5}, optimizer="greedy")
    nodes, indices = plan.binary_tree()
    # two pairwise steps: one intermediate of two of the output's or open indices, then the output (2 x 5)
    assert len(nodes) == 2 and plan.held_elements == sum(
        __import__("math").prod(plan._sizes[i] for i in indices[k]) for k in nodes
    )
    assert 10 <= plan.held_elements <= 10 + 2 * 4 * 5


def test_bounded_backward_keeps_at_most_its_budget(monkeypatch):
    """A recomputed tree whose intermediates exceed half of max_memory keeps, between its forward run and the
    reverse walk, only the smallest ones that fit; the gradients are those of the unbounded backward."""
    from qhybrid.devices.tensornet.engines.network import tree_bounded

    plan, operands, sizes = _network(3)
    operands = [o.detach().requires_grad_() for o in operands]
    weight = torch.randn([sizes[i] for i in plan.output], dtype=operands[0].dtype)
    itemsize = operands[0].element_size()
    budget = plan.held_elements // 3
    kept_sizes = []
    original = tree_bounded.kept_steps

    def spy(step_sizes, limit, costs=None):
        got = original(step_sizes, limit, costs)
        kept_sizes.append(sum(step_sizes[s] for s in got))
        return got

    monkeypatch.setattr(tree_bounded, "kept_steps", spy)
    out = contract_tree(plan, operands, keep=False, max_memory=2 * budget * itemsize)
    got = torch.autograd.grad(_loss(out, weight), operands, allow_unused=True)
    assert kept_sizes and 0 < kept_sizes[0] <= budget < plan.held_elements
    ref = torch.autograd.grad(_loss(contract_tree(plan, operands, keep=False), weight), operands, allow_unused=True)
    for g, h in zip(got, ref):
        if h is not None:
            torch.testing.assert_close(g, h, atol=1e-12, rtol=1e-12)

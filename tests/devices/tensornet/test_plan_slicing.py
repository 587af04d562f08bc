"""Contraction paths sliced to a memory target (pathfind.sliced_path, ContractionPlan.contract_slices):
every slice within the target, the sum equal to the unsliced contraction, values and gradients."""

import random

import pytest
import torch

from qhybrid.devices.tensornet.engines.network import pathfind, slicing
from qhybrid.devices.tensornet.engines.network.pathfind import PathSettings, Problem, sliced_path
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
from qhybrid.devices.tensornet.engines.network.tree_grad import contract_tree


@pytest.fixture(autouse=True)
def _short_rescue(monkeypatch):
    """The narrowing search before slicing gets 10 s by default; these networks need none of it."""
    monkeypatch.setattr(pathfind, "RESCUE_TIME_S", 0.05)
    monkeypatch.setattr(slicing, "SLICE_RECONF_MIN_SLICES", 1 << 30)  # plain slicing: seconds saved a case


def _network(seed):
    rng = random.Random(seed)
    n, n_idx = rng.randint(8, 22), rng.randint(8, 24)
    inputs = [tuple(rng.sample(range(n_idx), rng.randint(2, 4))) for _ in range(n)]
    used = sorted({i for ix in inputs for i in ix})
    output = tuple(rng.sample(used, 1))
    return inputs, output, {i: 2 for i in used}


@pytest.mark.parametrize("seed", range(8))
def test_sliced_equals_unsliced(seed):
    inputs, output, sizes = _network(seed)
    full = ContractionPlan(inputs, output, sizes, optimizer="greedy")
    target = max(4, full.largest_intermediate // 8)
    sliced = ContractionPlan(inputs, output, sizes, optimizer=PathSettings("auto", max_elements=target), plan_time=0.01)
    if not sliced.sliced:
        pytest.skip("the search found a path within the target without slicing")
    assert sliced.largest_intermediate <= max(target, *(2 ** len(ix) for ix in inputs))
    assert sliced.slices == 2 ** len(sliced.sliced)
    gen = torch.Generator().manual_seed(seed)
    ops = [torch.randn([2] * len(ix), dtype=torch.complex128, generator=gen, requires_grad=True) for ix in inputs]
    torch.testing.assert_close(sliced.contract(ops), full.contract(ops), atol=1e-10, rtol=1e-10)
    weight = torch.randn([2] * len(output), dtype=torch.complex128, generator=gen)
    g_full = torch.autograd.grad((contract_tree(full, ops) * weight).sum().real, ops)
    g_sliced = torch.autograd.grad((contract_tree(sliced, ops) * weight).sum().real, ops)
    for g, h in zip(g_sliced, g_full):
        torch.testing.assert_close(g, h, atol=1e-10, rtol=1e-10)


def test_output_indices_are_never_sliced():
    p = Problem.of([(0, 1), (1, 2)], (0, 2), {0: 8, 1: 2, 2: 8})
    assert sliced_path(p, ((0, 1),), 4) is None  # the output alone is above the target

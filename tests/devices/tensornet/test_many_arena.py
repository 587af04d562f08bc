"""A ManyTrees' wave buffers kept between steps (engines/network/many_arena.py): the same values and gradients
as fresh buffers, one step at a time owning them (two forwards before their backwards, a retained graph with
another step in between, a forward under no_grad), and far fewer ops a step than fresh buffers."""


import pytest
import torch

from qhybrid.devices.tensornet.engines.network import many, many_arena, many_seq_arena, many_tiny
from qhybrid.devices.tensornet.engines.network.many import ManyTrees
from qhybrid.testing import OpCount

from tests.devices.tensornet.test_network_many import _one_by_one, _random_networks


def _setup(seed, monkeypatch, split=10**9):
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", split)
    monkeypatch.setattr(many_arena, "SEQUENCE_DEVICES", ("cpu", "cuda"))  # the large steps' arena too
    plans, leaves, table = _random_networks(6, seed)
    trees = ManyTrees(plans, leaves, len(table))
    doubled = torch.cat([table, table.conj()])
    want = _one_by_one(plans, leaves, doubled)
    w = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(seed))
    return trees, table, want, w


def _grad(trees, table, w):
    t = table.clone().requires_grad_()
    (g,) = torch.autograd.grad((trees.contract(t) * w).real.sum(), t)
    return g


@pytest.mark.parametrize("copy", ["tables", "copies"])
@pytest.mark.parametrize("tiny", [0, 40, 10**9])
@pytest.mark.parametrize("split", [10**9, 6])
@pytest.mark.parametrize("seed", [0, 1])
def test_arena_steps_match_fresh_buffers(seed, split, tiny, copy, monkeypatch):
    """Every wave group a ``bmm``, some as elementwise products, or all of them; steps batched or split; the
    large steps' held operands gathered by tables or (where their permutation allows) copied as permuted views."""
    monkeypatch.setattr(many_tiny, "TINY_PRODUCTS", tiny)
    monkeypatch.setattr(many_seq_arena, "COPY_MIN_ELEMENTS", 1 if copy == "copies" else 10**9)
    trees, table, want, w = _setup(seed, monkeypatch, split)
    assert many_arena.arena_fits(trees)
    fresh = ManyTrees.__new__(ManyTrees)
    fresh.__dict__.update({k: v for k, v in trees.__dict__.items() if k != "_arenas"})
    fresh.keep_waves = False  # no arena: the per-step buffers
    want_grad = _grad(fresh, table, w)
    for _ in range(3):  # the arena reused from step to step
        t = table.clone().requires_grad_()
        got = trees.contract(t)
        assert torch.allclose(got, want, atol=1e-12, rtol=1e-12)
        (g,) = torch.autograd.grad((got * w).real.sum(), t)
        assert torch.allclose(g, want_grad, atol=1e-11)
    assert trees._arenas and not any(a.busy for a in trees._arenas.values())
    if split == 6:  # held operands read by copies (some permuted) exactly where asked
        copies = [c for a in trees._arenas.values() for level in a.sequence.levels for c in level[1]]
        assert bool(copies) == (copy == "copies")
        assert copy == "tables" or any(not held.is_contiguous() for _, held in copies)


def test_copied_operands_of_constant_leaves_get_no_cotangent(monkeypatch):
    """Held operands read by copies where some need no cotangent (the table's constant head): the other entries'
    gradients are the one-by-one plans' and the copies that need none write nothing back."""
    monkeypatch.setattr(many, "BIG_STEP_ELEMENTS", 0)
    monkeypatch.setattr(many_arena, "SEQUENCE_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(many_seq_arena, "COPY_MIN_ELEMENTS", 1)
    plans, leaves, table = _random_networks(5, 3)
    constants = len(table) // 3
    trees = ManyTrees(plans, leaves, len(table), constants=constants)
    want = _one_by_one(plans, leaves, torch.cat([table, table.conj()]))
    w = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(5))
    for _ in range(2):  # the arena reused
        t = table.clone().requires_grad_()
        got = trees.contract(t)
        assert torch.allclose(got, want, atol=1e-12)
        (g,) = torch.autograd.grad((got * w).real.sum(), t)
        r = table.clone().requires_grad_()
        (g_ref,) = torch.autograd.grad((_one_by_one(plans, leaves, torch.cat([r, r.conj()])) * w).real.sum(), r)
        assert torch.allclose(g[constants:], g_ref[constants:], atol=1e-11)
    (arena,) = trees._arenas.values()
    levels = arena.sequence.levels
    copies = sum(len(level[1]) for level in levels)
    gives = sum(len(level[4]) for level in levels)
    assert copies and gives < copies  # some copied operands need no cotangent


def test_two_forwards_before_their_backwards(monkeypatch):
    """The second forward finds the arena held by the first's graph: fresh buffers, both gradients right."""
    trees, table, want, w = _setup(0, monkeypatch)
    want_grad = _grad(trees, table, w)
    t1, t2 = table.clone().requires_grad_(), (2 * table).clone().requires_grad_()
    v1, v2 = trees.contract(t1), trees.contract(t2)
    assert torch.allclose(v1, want, atol=1e-12)
    (g2,) = torch.autograd.grad((v2 * w).real.sum(), t2)
    (g1,) = torch.autograd.grad((v1 * w).real.sum(), t1)
    assert torch.allclose(g1, want_grad, atol=1e-11)
    assert torch.allclose(g2, _grad(trees, 2 * table, w), atol=1e-10)


def test_retained_graph_with_a_step_in_between(monkeypatch):
    """A second backward through a retained graph after another step reused the arena: runs its forward anew."""
    trees, table, want, w = _setup(1, monkeypatch)
    want_grad = _grad(trees, table, w)
    t = table.clone().requires_grad_()
    loss = (trees.contract(t) * w).real.sum()
    (g1,) = torch.autograd.grad(loss, t, retain_graph=True)
    _grad(trees, 3 * table, w)  # another step on the arena
    (g2,) = torch.autograd.grad(loss, t)
    assert torch.allclose(g1, want_grad, atol=1e-11) and torch.allclose(g2, want_grad, atol=1e-11)


def test_unused_graph_and_no_grad_forward_give_the_arena_back(monkeypatch):
    trees, table, want, w = _setup(0, monkeypatch)
    with torch.no_grad():
        assert torch.allclose(trees.contract(table), want, atol=1e-12)
    (arena,) = trees._arenas.values()
    assert not arena.busy
    v = trees.contract(table.clone().requires_grad_())
    assert arena.busy
    del v  # the graph dropped without a backward
    assert not arena.busy


def test_arena_step_dispatches_fewer_ops(monkeypatch):
    """Every wave group a ``bmm``: views, transposes and the buffers' allocations are gone from the step."""
    monkeypatch.setattr(many_tiny, "TINY_PRODUCTS", 0)
    trees, table, want, w = _setup(0, monkeypatch)

    def ops(keep):
        trees.keep_waves = keep
        _grad(trees, table, w)
        with OpCount() as m:
            _grad(trees, table, w)
        return sum(m.ops.values())

    without, with_arena = ops(False), ops(True)
    assert with_arena < 0.8 * without, (with_arena, without)


def test_a_gpu_keeps_larger_schedules_than_the_cpu(monkeypatch):
    """The caps follow the device: the CPU's constants, a GPU's memory over ``GPU_HELD_FRACTION``."""
    trees, *_ = _setup(0, monkeypatch, 10**9)
    assert many_arena.held_caps("cpu", 16) == (many_arena.ARENA_MAX_ELEMENTS, many_arena.SEQUENCE_MAX_ELEMENTS)
    monkeypatch.setattr(many_arena, "ARENA_MAX_ELEMENTS", 0)
    assert not many_arena.arena_fits(trees, "cpu", 16)

    class Properties:
        total_memory = 16 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties)
    cap = 2**30 // many_arena.GPU_HELD_FRACTION
    assert many_arena.held_caps("cuda", 16) == (cap, cap)
    assert many_arena.arena_fits(trees, "cuda", 16)
    Properties.total_memory = 0
    assert not many_arena.arena_fits(trees, "cuda", 16)

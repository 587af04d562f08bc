"""The slices of one sliced contraction spread over the ranks of ``torch.distributed``: ``contract_spread``.

A plan sliced to the memory target (``slicing.sliced_path``) is a sum of ``plan.slices`` independent
contractions of the same smaller network, one per value of the sliced indices
(``ContractionPlan.contract_slices``). With the device option ``spread_slices`` and a process group of two
or more ranks, each rank contracts a contiguous share of those slices (``slice_share``: sizes differ by at
most one; a rank with none contributes zeros) and one all-reduce sums the partial sums, so every rank
returns the whole contraction, bit for bit the same on every rank.

It is the same option family as ``spread_classes`` (``engines/lightcone/spread.py``), whose validation,
parameter check and collectives it shares: every rank must make the same device calls, call for call, with
the same circuits and parameters (a replicated model). Two things make the ranks' slices add up:

* **one plan**: path searches run within a time budget, so two processes may plan one network differently
  (other sliced indices, or none). At a plan's first contraction rank 0's path and sliced indices are
  broadcast and every rank keeps them for that network (``agreed_plan``); an unsliced agreed plan runs
  whole on every rank, with no further collective.
* **one step**: before each spread contraction, a small all-gather of its structure (a key of the network,
  slices, sizes) and a bitwise fingerprint of its operands refuses, on every rank alike, ranks that disagree.

Gradients: ``C = sum_s C_s(operands)`` is linear in its slices, and every rank's backward brings the same
cotangent ``dy`` of ``C`` (the same loss of the same full result). The forward records nothing; the backward
recomputes each slice of this rank's share through ``tree_grad``'s one node per contraction, differentiates
it and drops it before the next (one slice in memory at a time, as the unspread sliced backward), and one
all-reduce per dtype sums the operands' cotangents: every rank holds the whole gradient. Each backward
through a spread contraction is that one collective, and the autograd nodes outside it are the same on
every rank, so every rank meets the collectives in the same order. A second derivative is refused.

>>> slice_share(3, 2, 0), slice_share(3, 2, 1), slice_share(1, 2, 1)
(range(0, 2), range(2, 3), range(1, 1))
"""

from __future__ import annotations

import functools
import math
import weakref
import zlib
from typing import Sequence

import torch

from .....errors import GradientError
from ..lightcone.spread import agree, all_reduce_sum, comm_device, fingerprint, spread_group
from .plan import ContractionPlan
from .problem import Found
from .tree_grad import contract_tree

OPTION = "spread_slices"
"""The device option this module serves (its messages name it)."""


def slice_share(slices: int, world: int, rank: int) -> range:
    """The slice numbers rank ``rank`` of ``world`` contracts: contiguous blocks whose sizes differ by at
    most one (every slice costs the same), the larger ones first; empty for the last ranks where there are
    fewer slices than ranks."""
    size, extra = divmod(slices, world)
    start = rank * size + min(rank, extra)
    return range(start, start + size + (rank < extra))


def contract_spread(option, plan, operands: Sequence[torch.Tensor], backend, max_memory: float | None = None):
    """``backend.contract(plan, operands)``, with a sliced plan's slices spread over the process group of the
    device option ``option`` (True, or a ``ProcessGroup``); differentiable in the operands. Without a group
    of two or more ranks the backend contracts it all here; with one, every rank takes rank 0's plan for
    this network (``agreed_plan``), and an unsliced one runs whole on every rank."""
    group = spread_group(option, OPTION)
    if group is None:
        return backend.contract(plan, operands, max_memory=max_memory)
    shared, network = agreed_plan(group, plan)
    if not shared.sliced or shared.too_wide:  # (too wide: refused there on every rank, before any collective)
        return backend.contract(shared, operands, max_memory=max_memory)
    step = _SliceStep(group, shared, operands, network)
    if torch.is_grad_enabled() and any(o.requires_grad for o in operands):
        return _SpreadSlices.apply(step, *operands)
    return step.reduce(step.local(operands))


_AGREED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""This rank's plan -> (the group, rank 0's plan of the same network, the network's key)."""


def agreed_plan(group, plan) -> tuple:
    """Rank 0's plan of the network ``plan`` contracts (``plan`` where it is the same), broadcast at the
    plan's first spread contraction and kept, and a key of the network (its indices) for the per-call check:
    path searches run within a time budget, so ranks may plan one network differently (other sliced
    indices, or none), and shares of different plans do not add up."""
    got = _AGREED.get(plan)
    if got is not None and got[0] is group:
        return got[1:]
    dist = torch.distributed
    mine = (plan.path, plan.sliced, plan.flops, plan.largest_intermediate)
    box = [mine if dist.get_rank(group) == 0 else None]
    dist.broadcast_object_list(box, group=group, group_src=0)
    path, sliced, flops, largest = box[0]
    shared = plan
    if (path, sliced) != mine[:2]:
        found = Found(path, flops, largest, searched=True, sliced=sliced)
        shared = ContractionPlan(plan.inputs, plan.output, plan._sizes, found=found)
    network = zlib.crc32(repr((plan.inputs, plan.output)).encode())  # the same in every process (no hash seed)
    _AGREED[plan] = (group, shared, network)
    return shared, network


class _SliceStep:
    """This rank's share of one sliced contraction, its result's shape, and its collectives."""

    def __init__(self, group, plan, operands: Sequence[torch.Tensor], network: int):
        dist = torch.distributed
        self.group, self.plan = group, plan
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.share = slice_share(plan.slices, self.world, self.rank)
        self.shape = _output_shape(plan, operands)
        self.dtype = functools.reduce(torch.promote_types, (o.dtype for o in operands))
        self.device = operands[0].device
        self.comm = comm_device(group, self.device)
        # a fixed length on every rank (an all-gather of mismatched sizes would abort the process)
        numel = sum(o.numel() for o in operands)
        structure = [network, plan.slices, len(plan.inputs), numel, len(self.shape), math.prod(self.shape)]
        agree(group, self.comm, structure + fingerprint(operands), [], OPTION)

    def local(self, operands: Sequence[torch.Tensor]) -> torch.Tensor:
        """The sum of this rank's slices (zeros where it has none), not recorded for autograd."""
        with torch.no_grad():
            part = self.plan.contract_slices(operands, self.plan._inner.contract, self.share)
        if part is None:
            return torch.zeros(self.shape, dtype=self.dtype, device=self.device)
        if tuple(part.shape) != self.shape:
            raise RuntimeError(f"a slice share gave a contraction shaped {tuple(part.shape)}, not {self.shape}")
        return part

    def local_vjp(self, operands: Sequence[torch.Tensor], needs: Sequence[bool], dy: torch.Tensor) -> list:
        """Cotangents, from this rank's slices, of the operands that ``needs`` marks: each slice recomputed
        through ``tree_grad``'s one node, differentiated and dropped before the next (within the memory
        target, as the unspread sliced backward)."""
        inner = self.plan._inner
        leaves = [o.detach().requires_grad_(n) for o, n in zip(operands, needs)]
        wanted = [leaf for leaf in leaves if leaf.requires_grad]
        total = [torch.zeros_like(leaf) for leaf in wanted]
        for s in self.share:
            with torch.enable_grad():
                part = self.plan.contract_slices(leaves, lambda ops: contract_tree(inner, ops), range(s, s + 1))
                got = torch.autograd.grad(part, wanted, dy, allow_unused=True)
            total = [t if g is None else t + g for t, g in zip(total, got)]
        return total

    def reduce(self, part: torch.Tensor) -> torch.Tensor:
        return all_reduce_sum([part], self.group, self.comm)[0]


def _output_shape(plan, operands: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """The contraction's shape: each output index at the largest extent an operand gives it (extent-1 axes
    broadcast)."""
    extent: dict = {}
    for o, ix in zip(operands, plan.inputs):
        for p, i in enumerate(ix):
            extent[i] = max(extent.get(i, 1), o.shape[p])
    return tuple(extent.get(i, 1) for i in plan.output)


class _SpreadSlices(torch.autograd.Function):
    """Operands in, the whole contraction out (this rank's slices, all-reduced); backward: this rank's
    slices' cotangents, all-reduced."""

    @staticmethod
    def forward(step: _SliceStep, *operands):
        return step.reduce(step.local(operands))

    @staticmethod
    def setup_context(ctx, inputs, output):
        step, *operands = inputs
        ctx.step = step
        ctx.save_for_backward(*operands)

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled():
            raise GradientError(
                "spread_slices differentiates once: a second derivative (create_graph=True, Hessians) of a "
                "contraction whose slices are spread over ranks is not supported. Use a device with "
                "spread_slices=False for it."
            )
        step, needs = ctx.step, ctx.needs_input_grad[1:]
        summed = iter(all_reduce_sum(step.local_vjp(ctx.saved_tensors, needs, dy), step.group, step.comm))
        return (None, *(next(summed) if n else None for n in needs))


__all__ = ["contract_spread", "agreed_plan", "slice_share", "OPTION"]

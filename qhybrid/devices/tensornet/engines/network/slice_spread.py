"""The slices of one sliced contraction spread over the ranks of ``torch.distributed``: ``contract_spread``.

A plan sliced to the memory target (``pathfind.sliced_path``) is a sum of ``plan.slices`` independent
contractions of the same smaller network, one per value of the sliced indices
(``ContractionPlan.contract_slices``). With the device option ``spread_slices`` and a process group of two
or more ranks, each rank contracts a contiguous share of those slices (``slice_share``: sizes differ by at
most one; a rank with none contributes zeros) and one all-reduce sums the partial sums, so every rank
returns the whole contraction, bit for bit the same on every rank. Unsliced plans run whole on every rank,
with no collective. It is the same option family as ``spread_classes`` (``engines/lightcone/spread.py``),
whose validation, parameter check and collectives it shares: every rank must make the same device calls,
call for call, with the same circuits and parameters (a replicated model), and a small all-gather of each
contraction's structure and a bitwise fingerprint of its operands first refuses ranks that disagree.

Gradients: the contraction ``C = sum_s C_s(operands)`` is linear in its slices, and every rank's backward
brings the same cotangent ``dy`` of ``C`` (the same loss of the same full result). Each rank forms the
operands' cotangents of its own slices (their graph recorded in the forward on leaves of its own, each
slice checkpointed so its backward recomputes it within the memory target through ``tree_grad``'s one
node per contraction) and one all-reduce per dtype sums them: every rank holds the whole gradient. Each
backward through a spread contraction is that one collective, and the autograd nodes outside it are the
same on every rank, so every rank meets the collectives in the same order. A second derivative is refused.

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
from torch.utils.checkpoint import checkpoint

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
    if not shared.sliced:
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
        """The sum of this rank's slices (zeros where it has none); recorded for autograd where the operands
        need gradients, one checkpointed slice at a time."""
        inner = self.plan._inner
        if torch.is_grad_enabled() and any(o.requires_grad for o in operands):
            run = lambda ops: checkpoint(_contract_tree_of(inner), *ops, use_reentrant=False)  # noqa: E731
        else:
            run = inner.contract
        part = self.plan.contract_slices(operands, run, self.share)
        if part is None:
            return torch.zeros(self.shape, dtype=self.dtype, device=self.device)
        if tuple(part.shape) != self.shape:
            raise RuntimeError(f"a slice share gave a contraction shaped {tuple(part.shape)}, not {self.shape}")
        return part

    def reduce(self, part: torch.Tensor) -> torch.Tensor:
        return all_reduce_sum([part.detach()], self.group, self.comm)[0]


def _contract_tree_of(plan):
    return lambda *operands: contract_tree(plan, operands)


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
    def forward(ctx, step: _SliceStep, *operands):
        ctx.step = step
        ctx.leaves = [o.detach().requires_grad_(o.requires_grad) for o in operands]
        with torch.enable_grad():  # this rank's slices' graph, on leaves of its own (see the module note)
            ctx.part = step.local(ctx.leaves)
        return step.reduce(ctx.part)

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled():
            raise GradientError(
                "spread_slices differentiates once: a second derivative (create_graph=True, Hessians) of a "
                "contraction whose slices are spread over ranks is not supported. Use a device with "
                "spread_slices=False for it."
            )
        wanted = [k for k, leaf in enumerate(ctx.leaves) if leaf.requires_grad]
        got: Sequence = [None] * len(wanted)
        if ctx.part.requires_grad:  # (a rank with no slices recorded nothing)
            # retain_graph: a Jacobian is one backward per output element through the same forward
            got = torch.autograd.grad(
                ctx.part, [ctx.leaves[k] for k in wanted], dy, retain_graph=True, allow_unused=True
            )
        grads = [g if g is not None else torch.zeros_like(ctx.leaves[k]) for k, g in zip(wanted, got)]
        summed = dict(zip(wanted, all_reduce_sum(grads, ctx.step.group, ctx.step.comm)))
        return (None, *(summed.get(k) for k in range(len(ctx.leaves))))


__all__ = ["contract_spread", "agreed_plan", "slice_share", "OPTION"]

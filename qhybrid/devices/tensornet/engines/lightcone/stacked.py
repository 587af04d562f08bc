"""Which state-vector cone classes of a step run stacked (``stacked_plan``, ``stacked_node``), and running them.

A class joins a stack where its bound program (``bound_class``) has only a product state, diagonal runs and
single-gate local steps, where which of its members read equal parameters is known from the plan (``sources``,
``shared.member_groups``), and where the step has one parameter row without a batch. Classes with the same
sequence of steps are packed, widest first, while the stack stays within ``STACK_MAX_AMPLITUDES`` and pads its
classes' own amplitudes at most ``STACK_MAX_WASTE`` times; a pack of one class runs as before.

>>> import torch
>>> from qhybrid.devices.tensornet.engines.lightcone.stacked import pack
>>> pack([(14, 1), (13, 1), (10, 1)])  # (width, rows) per class, widest first; 10 wires padded to 14: apart
[[0, 1], [2]]
"""

from __future__ import annotations

import torch

from . import bound_class
from .shared import member_groups
from .stacked_node import StackedNode
from .stacked_plan import STACK_MAX_AMPLITUDES, STACK_MAX_WASTE, Member, StackPlan, kinds_of, skeleton

ENABLED = True
"""Set False to run every class through its own node (A/B measurements)."""

MIN_CLASSES = 1
"""A stack runs from this many classes (one: a lone class too, in fewer ops than its own bound node)."""


def pack(classes: list[tuple[int, int]]) -> list[list[int]]:
    """Stacks of ``classes`` ((width, rows) each, widest first) as lists of their indices; a class whose rows alone
    exceed ``STACK_MAX_AMPLITUDES`` is in none (it runs as before)."""
    out, rows, own, width = [], 0, 0, 0
    for i, (n, k) in enumerate(classes):
        if k << n > STACK_MAX_AMPLITUDES:
            continue
        if out:
            padded = (rows + k) << width
            if padded <= STACK_MAX_AMPLITUDES and padded <= STACK_MAX_WASTE * (own + (k << n)):
                out[-1].append(i)
                rows, own = rows + k, own + (k << n)
                continue
        out.append([i])
        rows, own, width = k, k << n, n
    return out


def _plans(cp, params, dtype, device, sources, done) -> list:
    """The step's stacks (built once per parameter sources, dtype and device)."""
    per = cp._stacks.get(sources)
    if per is None:
        per = cp._stacks[sources] = {}
    key = (dtype, str(device), frozenset(done))
    hit = per.get(key)
    if hit is None:
        by_kinds: dict = {}
        order = {id(c): i for i, c in enumerate(cp.classes)}
        for c in cp.classes:
            if id(c) in done or cp._closed_class[id(c)] or c.structure.batch_size is not None or not c.table.shape[1]:
                continue  # (a class of no parameter, an X past commuting RXs, runs as it is: nothing to stack)
            program = cp._program(c, 1, closed=False)
            memo_key = (id(program), dtype, str(device))
            bp = cp._bound.get(memo_key)
            if bp is None:
                bp = cp._bound[memo_key] = bound_class._bind(program, c)
            if bp is bound_class._UNBOUND:
                continue
            sk = skeleton(bp)
            if sk is None:
                continue
            groups = member_groups(sources, c.table, "cpu")
            m = c.table.shape[0]
            first, inverse = (list(range(m)), list(range(m))) if groups is None else (groups[0].tolist(), groups[1].tolist())
            by_kinds.setdefault(kinds_of(sk), []).append(Member(c, bp, sk, first, inverse))
        hit = []
        for members in by_kinds.values():
            members.sort(key=lambda cm: -cm.bp.n)
            for stack in pack([(cm.bp.n, len(cm.first)) for cm in members]):
                if len(stack) >= MIN_CLASSES:  # its members' values in class order: one stack of all, no cat
                    chosen = sorted((members[i] for i in stack), key=lambda cm: order[id(cm.c)])
                    hit.append(StackPlan(chosen, params.shape[-1], sources))
        per[key] = hit
    return hit


def run_stacked(cp, params: torch.Tensor, values, sources, done: dict) -> dict:
    """``{id(class): [1, members, 1] values}`` of the classes this step runs stacked (none where it cannot)."""
    if (not ENABLED or not bound_class.ENABLED or sources is None or params.ndim != 2 or params.shape[0] != 1
            or params.is_complex() or cp.structure.batch_size is not None):
        return {}
    dtype, device = values.dtype, values.device
    out = {}
    for plan in _plans(cp, params, dtype, device, sources, done):
        classes = [cm.c for cm in plan.classes]

        def fallback(p, classes=classes):  # the per-class path, differentiable by torch (higher derivatives)
            return torch.cat([cp._class_values(c, p, values, sources).reshape(-1) for c in classes])

        got = StackedNode.apply(plan, fallback, dtype, device, params)
        cp.executions += len(classes)
        for c, part in zip(classes, got.split(plan.sizes)):
            out[id(c)] = part.view(1, -1, 1)
    return out


def joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """``[rows, T, B']``: the classes' ``[rows, members, B']`` values side by side; where they are the consecutive
    pieces of one stack's output (every class in one stack) that output itself, else one ``cat``."""
    base = parts[0]._base
    if (base is not None and base.ndim == 1 and base.dtype == parts[0].dtype and base.is_contiguous()
            and base.numel() == sum(p.numel() for p in parts)
            and all(p._base is base and p.shape[0] == 1 and p.shape[-1] == 1 and p.is_contiguous() for p in parts)):
        at = 0
        for p in parts:
            if p.storage_offset() != base.storage_offset() + at:
                break
            at += p.numel()
        else:
            return base.view(1, -1, 1)
    batch = max(p.shape[-1] for p in parts)
    return torch.cat([p.expand(-1, -1, batch) for p in parts], 1)


__all__ = ["ENABLED", "joined", "pack", "run_stacked"]

"""What cuTensorNet is given for a plan (``_Layout``), and the same network contracted by torch.

The plan's operands lose their extent-1 axes (cuTensorNet's gradients refuse "singleton modes"),
modes only one operand carries and the output lacks are summed beforehand, operands left without any
mode are multiplied in afterwards, and the plan's path is renumbered over the operands that remain.
``_torch_contract`` / ``_torch_gradients`` contract that reduced network in torch: the fallback where
cuTensorNet answers NOT_SUPPORTED.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class _Layout:
    """How a plan's operands become cuTensorNet's network, and its result the plan's output."""

    squeeze: tuple[tuple[int, ...], ...]  # per operand: extent-1 axes to drop
    presum: tuple[tuple[int, ...], ...]  # per operand: axes (after squeezing) summed beforehand
    kept: tuple[int, ...]  # operands that reach cuTensorNet
    kept_modes: tuple[tuple[int, ...], ...]  # their mode labels
    scalars: tuple[int, ...]  # operands with no mode left: multiplied in afterwards
    out_modes: tuple[int, ...]  # the output modes cuTensorNet produces (plan.output order)
    out_view: tuple[int, ...]  # plan.output extents, 1 where cuTensorNet produces no axis
    out_shape: tuple[int, ...]  # the plan's output shape
    path: tuple[tuple[int, int], ...]  # the plan's path, renumbered over the kept operands
    unsupported: str | None  # why this network stays with torch, if it does

    def prepare(self, operands: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for t, sq, ps in zip(operands, self.squeeze, self.presum):
            if sq:
                t = t.squeeze(sq)
            if ps:
                t = t.sum(dim=ps)
            out.append(t)
        return out

    def finish(self, core: torch.Tensor, prepared: Sequence[torch.Tensor]) -> torch.Tensor:
        if tuple(core.shape) != self.out_view:
            core = core.reshape(self.out_view)
        if self.out_view != self.out_shape:
            core = core.expand(self.out_shape)
        for i in self.scalars:
            core = core * prepared[i]
        return core


def _layout(plan, shapes: Sequence[tuple[int, ...]]) -> _Layout:
    ext: dict[int, int] = {}
    for i, (ix, shape) in enumerate(zip(plan.inputs, shapes)):
        if len(ix) != len(shape):
            raise ValueError(
                f"Operand {i} has shape {tuple(shape)} but the plan gives it the indices {ix} "
                f"({len(ix)} axes); build the operands from the same network as the plan."
            )
        for label, e in zip(ix, shape):
            have = ext.get(label, 1)
            if e != 1 and have not in (1, e):
                raise ValueError(
                    f"Index {label} has extent {have} in one operand and {e} in operand {i}; extents of one "
                    "index must agree (or be 1, to broadcast)."
                )
            ext[label] = max(have, e)
    squeeze, modes0 = [], []
    for ix, shape in zip(plan.inputs, shapes):
        squeeze.append(tuple(a for a, e in enumerate(shape) if e == 1))
        modes0.append(tuple(label for label, e in zip(ix, shape) if e != 1))
    unsupported = None
    if any(len(set(m)) != len(m) for m in modes0):
        unsupported = "an operand carries one index twice (a diagonal)"
    count = Counter(label for m in modes0 for label in set(m))
    out_set = {label for label in plan.output if ext.get(label, 1) != 1}
    presum, modes = [], []
    for m in modes0:
        drop = tuple(a for a, label in enumerate(m) if count[label] == 1 and label not in out_set)
        presum.append(drop)
        modes.append(tuple(label for a, label in enumerate(m) if a not in drop))
    kept = tuple(i for i, m in enumerate(modes) if m)
    scalars = tuple(i for i, m in enumerate(modes) if not m)
    present = {label for i in kept for label in modes[i]}
    out_modes = tuple(label for label in plan.output if label in out_set and label in present)
    out_view = tuple(ext.get(label, 1) if label in out_modes else 1 for label in plan.output)
    out_shape = tuple(ext.get(label, 1) for label in plan.output)
    if len(kept) < 2 and unsupported is None:
        unsupported = "fewer than two tensors are left to contract"
    path = _renumber([step.operands for step in plan.steps], len(plan.inputs), kept) if unsupported is None else ()
    return _Layout(
        tuple(squeeze), tuple(presum), kept, tuple(modes[i] for i in kept), scalars,
        out_modes, out_view, out_shape, path, unsupported,
    )


def _renumber(steps: Sequence[tuple[int, ...]], n: int, kept: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The plan's linear path (opt_einsum format) over only the kept operands.

    A step that meets a dropped (scalar) operand contracts nothing, so the kept partner simply moves
    on; positions are recomputed on the shorter working list.
    """
    node_of = {op: k for k, op in enumerate(kept)}
    full: list[int | None] = [node_of.get(i) for i in range(n)]
    reduced = list(range(len(kept)))
    next_node = len(kept)
    path = []
    for positions in steps:
        items = [full.pop(p) for p in sorted(positions, reverse=True)]
        real = [x for x in items if x is not None]
        if not real:
            full.append(None)
            continue
        current = real[0]
        for other in real[1:]:
            pair = (reduced.index(current), reduced.index(other))
            path.append(pair)
            for p in sorted(pair, reverse=True):
                reduced.pop(p)
            reduced.append(next_node)
            current, next_node = next_node, next_node + 1
        full.append(current)
    return tuple(path)


def _torch_contract(layout: _Layout, operands: Sequence[torch.Tensor]) -> torch.Tensor:
    """The kept network contracted by torch along the renumbered path (the gradient fallback)."""
    working = list(zip(operands, layout.kept_modes))
    for k, pair in enumerate(layout.path):
        (tb, mb), (ta, ma) = [working.pop(p) for p in sorted(pair, reverse=True)]
        if k == len(layout.path) - 1:
            result = layout.out_modes
        else:
            elsewhere = {label for _, m in working for label in m} | set(layout.out_modes)
            result = tuple(dict.fromkeys(label for label in ma + mb if label in elsewhere))
        local = {label: j for j, label in enumerate(dict.fromkeys(ma + mb + result))}
        t = torch.einsum(ta, [local[x] for x in ma], tb, [local[x] for x in mb], [local[x] for x in result])
        working.append((t, result))
    return working[0][0]



def _torch_gradients(layout: _Layout, operands, grad_out, needs) -> list[torch.Tensor | None]:
    with torch.enable_grad():
        leaves = [o.detach().requires_grad_(bool(n)) for o, n in zip(operands, needs)]
        out = _torch_contract(layout, leaves)
        wanted = [x for x in leaves if x.requires_grad]
        got = iter(torch.autograd.grad(out, wanted, grad_out, allow_unused=True) if wanted else ())
    grads = []
    for x in leaves:
        g = next(got) if x.requires_grad else None
        grads.append(torch.zeros_like(x) if g is None and x.requires_grad else g)
    return grads

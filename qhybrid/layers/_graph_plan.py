"""What one graph structure runs: the full template, or its light-cone classes; and how to run it.

A plan depends on the structure only (kind, depth, nodes, edges, outputs), so it is built once per
structure and reused for every batch and step. :func:`run_groups` sends every structure group of a batch to
the device in one ``qhybrid.execute`` call (each group one broadcast tape per template), or, deterministic,
one call per sample: a sample then runs exactly as it would alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..interfaces.torch import execute
from ._graph_circuits import Template, build_tape
from ._graph_lightcone import ConeClass, cone_classes, max_cone_width
from ._graph_ordered import occurrences, share_columns, take

LIGHT_CONE_AUTO_MIN_NODES = 17
"""``light_cone="auto"`` cuts light cones on graphs of at least this many nodes when the widest cone is
narrower than the graph. Below it the whole state vector (at most 2**16 amplitudes) is cheaper than
simulating a cone per edge."""


@dataclass
class GraphPlan:
    """The full ``template``; with light cones also its ``classes``, the order their outputs come out in
    (``order``) and the inverse permutation that puts them back in root order."""

    template: Template
    classes: list[ConeClass] | None = None
    inverse: torch.Tensor | None = None
    index: list | None = None
    """Per class, per block: (index tensor, occurrences table) for the deterministic gather."""

    @property
    def n_wires(self) -> int:
        if self.classes is None:
            return self.template.n_wires
        return max(c.template.n_wires for c in self.classes)


def make_plan(template: Template, light_cone) -> GraphPlan:
    use = light_cone
    if light_cone == "auto":
        use = template.n_wires >= LIGHT_CONE_AUTO_MIN_NODES and max_cone_width(template) < template.n_wires
    if not use:
        return GraphPlan(template)
    classes = cone_classes(template)
    order = [r for c in classes for r in c.members]
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    index = []
    for c in classes:
        per_block = []
        for b, block in enumerate(template.blocks):
            flat = torch.as_tensor(c.index[b].reshape(-1))
            per_block.append((flat, occurrences(flat, len(block.wires)) if block.parametric else None))
        index.append(per_block)
    return GraphPlan(template, classes, inverse, index)


def _tapes(plan: GraphPlan, angles: Sequence[torch.Tensor | None], batch: int, deterministic: bool):
    """The tapes of one group (angles as :func:`build_tape` takes them, for ``batch`` samples), and per tape
    whether its broadcast axis runs over (sample, cone member) pairs."""
    if plan.classes is None:
        return [build_tape(plan.template, angles)], [False]
    # cones of one class differ only in which gates' angles they read: where every angle is uniform over a
    # block's gates, all members give the same value and one (unbroadcast) run of the class serves them all
    per_gate = any(a is not None and a.ndim == 2 for a in angles)
    tapes = []
    for c, per_block in zip(plan.classes, plan.index):
        m = len(c.members)
        sub = []
        for block, a, (flat, occ) in zip(plan.template.blocks, angles, per_block):
            if not block.parametric:
                sub.append(None)
            elif a.ndim == 2:
                sub.append(take(a, flat, occ, deterministic).reshape(batch * m, -1))  # (B * M, Gc)
            elif a.ndim == 1 and per_gate:
                sub.append(share_columns(a, m, deterministic).reshape(batch * m))
            else:
                sub.append(a)
        tapes.append(build_tape(c.template, sub))
    return tapes, [per_gate] * len(tapes)


def _collect(plan: GraphPlan, results, flags, batch: int, deterministic: bool) -> torch.Tensor:
    """``(batch, n_roots)`` expectation values from the tapes' results."""
    if plan.classes is None:
        (res,) = results
        res = (res,) if isinstance(res, torch.Tensor) else res
        return torch.stack([r.reshape(-1).expand(batch) for r in res], -1)
    parts = []
    for r, c, per_gate in zip(results, plan.classes, flags):
        m = len(c.members)
        if per_gate:
            parts.append(r.reshape(batch, m))
        else:
            parts.append(share_columns(r.reshape(-1).expand(batch), m, deterministic))
    out = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
    return out.index_select(1, plan.inverse.to(out.device))


def run_groups(groups, device, diff_method, deterministic: bool) -> list[torch.Tensor]:
    """``groups``: ``(plan, angles, batch)`` triples; one ``(batch, n_roots)`` tensor each."""
    if not deterministic:
        tapes, spans = [], []
        for plan, angles, batch in groups:
            t, flags = _tapes(plan, angles, batch, False)
            spans.append((len(tapes), len(t), flags))
            tapes.extend(t)
        results = execute(tapes, device, diff_method)
        return [
            _collect(plan, results[s : s + n], flags, batch, False)
            for (plan, angles, batch), (s, n, flags) in zip(groups, spans)
        ]
    outs = []
    for plan, angles, batch in groups:
        rows = []
        for i in range(batch):  # each sample runs alone: the same bits whatever batch it came in
            one = [None if a is None else a if a.ndim == 0 else a[i : i + 1] for a in angles]
            tapes, flags = _tapes(plan, one, 1, True)
            rows.append(_collect(plan, execute(tapes, device, diff_method), flags, 1, True))
        outs.append(torch.cat(rows, 0))
    return outs


__all__ = ["GraphPlan", "make_plan", "run_groups", "LIGHT_CONE_AUTO_MIN_NODES"]

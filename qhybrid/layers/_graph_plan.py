"""What one graph structure runs, and how: its template as ONE device-ready tape whose gate angles are
gathered from a single flat tensor, handed to the device as a :class:`~qhybrid._variant.Variant`.

The device does everything else: on a graph wider than its state-vector limit the tensornet device
measures each output on its reverse light cone, runs isomorphic cones as one stacked program and runs
equal angle rows once (``devices/tensornet/engines/lightcone``); on a narrower one it simulates the state.

A plan depends on the structure only (kind, depth, nodes, edges, outputs), so it is built once per structure
and reused for every batch and step. Per *angle signature* (which blocks carry one angle, one per sample or
one per gate and sample) it keeps the tape and the index of every gate angle in the flat tensor: a call then
concatenates its blocks' angles (one ``cat``) and the device reads every gate's angle with one indexing op,
instead of PennyLane recording and preprocessing hundreds of operators per step.
:func:`run_groups` sends every structure group of a batch to the device in one call, or, deterministic, one
call per sample: a sample then runs exactly as it would alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..devices.tensornet.engines.lightcone.choice import WHOLE_STATE_SURE_WIRES
from ..devices.tensornet.engines.lightcone.classes import tape_classes
from .._variant import Gather, Variant, tape_parameters
from ..interfaces.torch import execute, run_variants
from ._graph_circuits import Template, build_tape, xx_order


@dataclass
class _Circuit:
    """The device-ready tape of one angle signature, its postprocessing and its gather (None: the device's
    preprocessing changed the tape, so it is built and preprocessed every call)."""

    tape: object
    post: object
    gather: Gather | None


@dataclass
class GraphPlan:
    """The structure's ``template`` and its device-ready circuits by angle signature."""

    template: Template
    circuits: dict = field(default_factory=dict)
    _classes: list | None = field(default=None, repr=False)

    @property
    def n_wires(self) -> int:
        return self.template.n_wires

    @property
    def classes(self) -> list | None:
        """The light-cone classes the tensornet device runs this circuit as (``ConeClass``: ``width``,
        ``terms``), or None where it surely simulates the whole state (``WHOLE_STATE_SURE_WIRES`` wires or
        fewer; wider graphs run as these classes or as one state vector, whichever costs less)."""
        if self.n_wires <= WHOLE_STATE_SURE_WIRES:
            return None
        if self._classes is None:
            angles = [torch.zeros(()) if block.parametric else None for block in self.template.blocks]
            self._classes = tape_classes(build_tape(self.template, angles))
        return self._classes

    @property
    def cone_wires(self) -> int:
        """The widest circuit the device simulates for this structure (a cone's, or the whole graph's)."""
        classes = self.classes
        return self.n_wires if classes is None else max(c.width for c in classes)

    def circuit(self, angles: Sequence[torch.Tensor | None], device, summed: bool) -> _Circuit:
        key = (id(device), summed, tuple(None if a is None else (tuple(a.shape), a.requires_grad) for a in angles))
        found = self.circuits.get(key)
        if found is None:
            found = self.circuits[key] = _make_circuit(self.template, angles, device, summed)
        return found


def _sources(template: Template) -> list[tuple[int, int]]:
    """``(block, gate)`` of every gate angle in the order ``build_tape`` puts them on the tape."""
    out = []
    for b, block in enumerate(template.blocks):
        if not block.parametric:
            continue
        out.extend((b, g) for g in xx_order(template, block))
    return out


def _inputs(angles) -> tuple[torch.Tensor, ...]:
    """The gather's inputs: the blocks' angles flattened and concatenated, those that need a gradient
    apart from those that do not (a gradient method then differentiates only the first)."""
    parts = ([a.reshape(-1) for a in angles if a is not None and a.requires_grad],
             [a.reshape(-1) for a in angles if a is not None and not a.requires_grad])
    return tuple(torch.cat(p) if len(p) > 1 else p[0] for p in parts if p)


def _maps(template: Template, angles) -> list[tuple[int, torch.Tensor]]:
    """Per gate angle: (input, its flat indices) in :func:`_inputs`."""
    grads = [a is not None and a.requires_grad for a in angles]
    source = {True: 0, False: int(any(grads))}
    offsets, start = [], {True: 0, False: 0}
    for a, g in zip(angles, grads):
        offsets.append(start[g])
        start[g] += 0 if a is None else a.numel()
    maps = []
    for b, g in _sources(template):
        a, at, src = angles[b], offsets[b], source[grads[b]]
        if a.ndim == 0:  # one angle for the whole block: an unbroadcast gate
            maps.append((src, torch.tensor(at)))
        elif a.ndim == 1:  # (B,): one angle per sample for every gate of the block
            maps.append((src, at + torch.arange(a.shape[0])))
        else:  # (B, G): gate g's column
            maps.append((src, at + g + a.shape[1] * torch.arange(a.shape[0])))
    return maps


def _make_circuit(template: Template, angles, device, summed: bool) -> _Circuit:
    tape = build_tape(template, [None if a is None else a.detach() for a in angles], summed)
    new_tapes, post = device.preprocess_transforms()([tape])
    ready = new_tapes[0] if len(new_tapes) == 1 else None
    if ready is None or not all(p is q for p, q in zip(tape_parameters(ready), tape_parameters(tape))):
        return _Circuit(None, None, None)
    n_gate = sum(len(op.data) for op in ready.operations)
    maps = _maps(template, angles)
    assert len(maps) == n_gate, "GraphQLayer: build_tape and _sources disagree on the angle order"
    maps += [("const", p) for p in tape_parameters(ready)[n_gate:]]
    return _Circuit(ready, post, Gather((), tuple(maps)))


def _execute(items, device, diff_method) -> list:
    """The device's results for every ``(plan, angles, summed)`` of ``items``, in one device call."""
    circuits = [plan.circuit(angles, device, summed) for plan, angles, summed in items]
    if any(c.gather is None for c in circuits):
        tapes = [build_tape(plan.template, angles, summed) for plan, angles, summed in items]
        return list(execute(tapes, device, diff_method))
    variants = [Variant(c.tape, None, c.gather.rebound(_inputs(angles))) for c, (_, angles, _) in zip(circuits, items)]
    return [c.post((r,))[0] for c, r in zip(circuits, run_variants(variants, device, diff_method))]


def _collect(result, batch: int, summed: bool) -> torch.Tensor:
    """``(batch, n_roots)`` expectation values (``(batch,)`` their sum) from one tape's results."""
    if summed:
        return result.reshape(-1).expand(batch)
    res = (result,) if isinstance(result, torch.Tensor) else result
    return torch.stack([r.reshape(-1).expand(batch) for r in res], -1)


def run_groups(groups, device, diff_method, deterministic: bool) -> list[torch.Tensor]:
    """``groups``: ``(plan, angles, batch, summed)``; one ``(batch, n_roots)`` tensor each, or ``(batch,)``
    with ``summed`` (the sum over the roots, measured as one observable)."""
    if not deterministic:
        results = _execute([(plan, angles, summed) for plan, angles, _, summed in groups], device, diff_method)
        return [_collect(r, batch, summed) for r, (_, _, batch, summed) in zip(results, groups)]
    outs = []
    for plan, angles, batch, summed in groups:
        rows = []
        for i in range(batch):  # each sample runs alone: the same bits whatever batch it came in
            one = [None if a is None else a if a.ndim == 0 else a[i : i + 1] for a in angles]
            (result,) = _execute([(plan, one, summed)], device, diff_method)
            rows.append(_collect(result, 1, summed))
        outs.append(torch.cat(rows, 0))
    return outs


__all__ = ["GraphPlan", "run_groups"]

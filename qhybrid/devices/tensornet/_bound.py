"""The one-node path of the tensornet device: a single gathered variant of a narrow circuit runs as one
``BoundNode`` (gate matrices built inside the node, backward chained to the inputs by hand) instead of a
recorded graph of gate-building ops around the program's adjoint node.

``run_bound(device, variants)`` returns None where the general path must run (see ``BoundProgram.bind``).
The bound program is kept in the gather's memo, which every later call of the same preprocessed
structure shares, so a repeat call does: gather the angle columns, build the matrices, run the program.
"""

from __future__ import annotations

import weakref
from typing import Sequence

import torch

from ..._variant import Variant
from ._values import _Values
from . import _simulate
from ._simulate import VectorProgram, _cached_structure
from .engines.statevector.adjoint import BoundNode
from .engines.statevector.allocator import tune_allocator
from .engines.statevector.bound import BoundProgram

_UNBOUND = object()

ENABLED = True
"""Set False to run every circuit through the general path (A/B measurements, bisecting a suspected bug)."""


def _bind(device, variant: Variant, opts):
    tape, gather = variant.tape, variant.gather
    structure = _cached_structure(tape, device.wires)
    if len(gather.maps) != structure.n_op_params:
        return _UNBOUND  # observables with data
    if any(slot.kind in ("prep", "channel") for slot in structure.slots):
        return _UNBOUND
    key = _simulate.plan_key(structure, frozenset(), 0, opts)
    program = device._cache.get(key, lambda: _simulate.build_program(structure, frozenset(), 0, opts, tape))
    if not isinstance(program, VectorProgram):
        return _UNBOUND  # a circuit measured by light cones or closed networks
    bound = BoundProgram.bind(program.program, structure, gather.maps, tape)
    if bound is None:
        return _UNBOUND
    bound.plan = (key, program)
    bound.owner = weakref.ref(device)
    return bound


def run_bound(device, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]] | None:
    """Results of ``variants`` through the one-node path, or None where it does not apply."""
    if not ENABLED or len(variants) != 1 or not hasattr(device, "_cache"):
        return None
    v = variants[0]
    gather = v.gather
    if gather is None or v.tape.shots or v.tape.batch_size == 0:  # (an empty batch: ``_empty_batch``'s answer)
        return None
    inputs = gather.inputs
    if not inputs or not all(isinstance(x, torch.Tensor) and not x.is_complex() for x in inputs):
        return None
    opts = device._options(inputs)
    memo_key = ("bound", id(device), opts.dtype, str(opts.device), tuple(device.wires) if device.wires is not None else None)
    bound = gather.memo.get(memo_key)
    if bound is None or bound is not _UNBOUND and bound.owner() is not device:  # a new device at an old id
        bound = gather.memo[memo_key] = _bind(device, v, opts)
    elif bound is not _UNBOUND:
        key, program = bound.plan
        device._cache.get(key, lambda: program)  # the plan cache's bookkeeping (hits, recency) as on the general path
    if bound is _UNBOUND:
        return None
    structure = bound.structure
    lead = (structure.batch_size,) if structure.batch_size is not None else ()
    itemsize = opts.dtype.itemsize
    tune_allocator((1 << bound.n) * (structure.batch_size or 1) * itemsize)  # as the general path does

    def fallback(xs):  # the same program, differentiable by torch (for higher derivatives)
        values = _Values(structure, [v.regathered(xs)], frozenset(), opts)
        values.prefetch(bound.program.matrix_slots)
        if bound.signs is not None:
            return tuple(bound.program.run_expvals(values).unbind(0))
        return (bound.program.run(values, lead),)

    outs = BoundNode.apply(bound, fallback, opts.dtype, opts.device, *inputs)
    if bound.signs is not None:
        return [tuple(outs)]
    return [tuple(_simulate.measure_state(outs, lead, structure, v.tape.measurements))]

"""Variants with an empty batch (a broadcast axis of size 0, e.g. inputs of shape ``(0, n)``): there is no
circuit to run, but each still gets results of the right shape and dtype, connected to its parameters so
that a backward pass gives them zero gradients of their own shapes (every entry point and diff_method
reaches the device through ``simulate_variants``, so this one place serves them all)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pennylane as qml
import torch

from ..._variant import Variant, parameter_owners

Run = Callable[[Sequence[Variant]], list]


def with_empty_batches(variants: Sequence[Variant], run: Run) -> list | None:
    """``run(variants)``, with the empty-batch variants answered by empty results; None where there are none.

    The shapes come from a stand-in of each empty variant with a batch of one (run without gradients): its
    results with 0 in place of the leading 1.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> tape = qml.tape.QuantumScript([qml.RX(torch.zeros(0), 0)], [qml.probs()])
    >>> dev.simulate_variants([Variant.of(tape)])[0][0].shape
    torch.Size([0, 2])
    """
    tapes = {id(v.tape): v.tape for v in variants}  # parameter-shift: hundreds of variants of a few tapes
    if all(t.batch_size != 0 for t in tapes.values()):
        return None
    empty = [i for i, v in enumerate(variants) if v.tape.batch_size == 0]
    results: list = [None] * len(variants)
    skip = set(empty)
    rest = [i for i in range(len(variants)) if i not in skip]
    if rest:
        for i, r in zip(rest, run([variants[i] for i in rest])):
            results[i] = r
    # (gathered under the caller's grad mode first: a stand-in's read without gradients would keep them gathered so,
    # and backprop's empty results were left out of the graph)
    links = [_zero_link(variants[i].params) for i in empty]
    with torch.no_grad():
        probes = run([_stand_in(variants[i]) for i in empty])
    for i, probe, link in zip(empty, probes, links):
        results[i] = tuple(_empty_like(r, link) for r in probe)
    return results


def _stand_in(v: Variant) -> Variant:
    """``v`` with every empty broadcast parameter replaced by a batch of one harmless value."""
    tape, params = v.tape, list(v.params)
    owners = parameter_owners(tape)
    new = []
    for p, (op_index, _) in zip(params, owners):
        op = tape.operations[op_index] if op_index >= 0 else None
        new.append(_one_of(p, op) if qml.math.ndim(p) > 0 and qml.math.shape(p)[0] == 0 else _detached(p))
    return Variant(tape.bind_new_parameters(new, list(range(len(new)))), new)


def _one_of(p, op) -> torch.Tensor | np.ndarray:
    """A batch of one value shaped like an element of ``p``: a basis state for a state preparation, the
    identity for a square matrix, zeros (angles) otherwise."""
    shape = tuple(qml.math.shape(p)[1:])
    value = np.zeros(shape)
    if isinstance(op, qml.operation.StatePrepBase) and len(shape) == 1 and op.name != "BasisState":
        value[0] = 1.0
    elif len(shape) == 2 and shape[0] == shape[1]:
        value = np.eye(shape[0])
    if isinstance(p, torch.Tensor):
        return torch.as_tensor(value, dtype=p.dtype, device=p.device)[None]
    return value.astype(np.asarray(qml.math.unwrap(p)).dtype)[None]


def _detached(p):
    return p.detach() if isinstance(p, torch.Tensor) else p


def _zero_link(params: Sequence) -> torch.Tensor | None:
    """0 as a function of every parameter that needs a gradient (its gradient: zeros of their shapes)."""
    link = None
    for p in params:
        if isinstance(p, torch.Tensor) and p.requires_grad:
            term = (p.real if p.is_complex() else p).sum() * 0
            link = term if link is None else link + term
    return link


def _empty_like(r: torch.Tensor, link: torch.Tensor | None) -> torch.Tensor:
    out = r.new_zeros((0, *r.shape[1:]))
    return out if link is None else out + link.to(out.dtype.to_real())

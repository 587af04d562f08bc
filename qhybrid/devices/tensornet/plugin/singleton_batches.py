"""A batch of one beside a batch of N broadcast as numpy broadcasts it (``x`` of shape ``(3, 2)`` beside ``w`` of
``(1, 2)``): default.qubit runs such circuits, where PennyLane's ``tape.batch_size`` refused them ("The batch sizes
of the quantum script operations do not match, they include 3 and 1").

>>> import torch
>>> tape = qml.tape.QuantumScript([qml.RY(torch.rand(3), 0), qml.RX(torch.rand(1), 1)], [qml.expval(qml.Z(1))])
>>> (new,), _ = broadcast_singletons(tape)
>>> new.batch_size
3
"""

from __future__ import annotations

import pennylane as qml
from pennylane.tape import QuantumScript

from ....errors import BroadcastError
from .._rebound import rebound
from .._structure import checked_batch_size


@qml.transform
def broadcast_singletons(tape: QuantumScript):
    """``tape`` with its operators' batches of one expanded to the tape's other batch size (the same tape where
    there is nothing to do); two sizes above one are refused naming the gates that hold them."""
    per_op = [_batch_size(op) for op in tape.operations]
    sizes = set(per_op) - {None}
    if len(sizes - {1}) > 1:
        raise BroadcastError(_disagreeing(tape.operations, per_op))
    if not sizes and tape.batch_size is not None:  # (its operators' stale batch size: ``checked_batch_size``)
        fresh = QuantumScript(tape.operations, tape.measurements, shots=tape.shots, trainable_params=tape.trainable_params)
        return (fresh,), _first
    if 1 not in sizes or len(sizes) != 2:
        return (tape,), _first
    n = max(sizes)
    with qml.QueuingManager.stop_recording():
        ops = [_expanded(op, n) if size == 1 else op for op, size in zip(tape.operations, per_op)]
    return (tape.copy(operations=ops),), _first


def _disagreeing(ops, per_op) -> str:
    """Which operators hold which batch sizes (PennyLane's refusal named the sizes alone)."""
    first: dict = {}
    for op, size in zip(ops, per_op):
        if size not in (None, 1):
            first.setdefault(size, f"{op.name} on wires {op.wires.tolist()} has a batch of {size}")
    return (
        f"Broadcast gate parameters disagree on their batch size: {'; '.join(first.values())}. Give every batched "
        "argument the same leading size (a size of 1 is repeated), or run the batches as separate calls."
    )


def _batch_size(op):
    try:
        return checked_batch_size(op)  # (wrong dimensions refused by name, not left None for a later read)
    except (IndexError, TypeError):  # (an operator whose own parameters disagree: left to PennyLane)
        return None


def _expanded(op, n: int):
    ndims = op.ndim_params
    data = [
        qml.math.concatenate([p] * n, axis=0) if qml.math.ndim(p) > nd else p for p, nd in zip(op.data, ndims)
    ]  # fmt: skip
    return rebound(op, data)


def _first(results):
    return results[0]


__all__ = ["broadcast_singletons"]

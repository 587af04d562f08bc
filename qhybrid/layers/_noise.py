"""The ``noise=`` option of the variational layers: channels queued after the encoding and after every ansatz
layer, so a model trains under noise on the tensornet device's mixed-state engine (docs/NOISE.md)."""

from __future__ import annotations

from typing import Callable, Sequence, Union

import pennylane as qml

LayerNoise = Union[float, Callable[[Sequence], None], None]
"""A depolarizing probability for every wire, a function ``noise(wires)`` queuing channels, or None."""


def layer_noise(noise: LayerNoise) -> Callable[[Sequence], None] | None:
    """The option as a function of the wires that queues the channels (None: a noiseless circuit).

    >>> with qml.queuing.AnnotatedQueue() as q:
    ...     layer_noise(0.01)([0, 1])
    >>> [op.name for op in q.queue]
    ['DepolarizingChannel', 'DepolarizingChannel']
    """
    if noise is None or callable(noise):
        return noise
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0.0 <= float(noise) <= 1.0:
        raise ValueError(
            f"noise must be a depolarizing probability in [0, 1], a function noise(wires) that queues channels, "
            f"or None; got {noise!r}."
        )
    p = float(noise)

    def depolarize(wires: Sequence) -> None:
        for w in wires:
            qml.DepolarizingChannel(p, wires=w)

    return depolarize

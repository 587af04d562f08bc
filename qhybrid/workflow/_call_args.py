"""A qnode call's arguments as one flat list (positional, then keywords by name) with its tensors found:
what a static trace gathers from and probes with, and what a CUDA graph takes as inputs."""

from __future__ import annotations

import torch


class CallArgs:
    """``args`` and ``kwargs`` flattened; ``tensors`` are the tensor arguments in that order.

    >>> call = CallArgs((torch.zeros(2), 3), {"w": torch.ones(1)})
    >>> len(call.tensors), call.static
    (2, ((1, 3),))
    >>> args, kwargs = call.with_tensors([torch.ones(2), torch.zeros(1)])
    >>> args[1], kwargs["w"]
    (3, tensor([0.]))
    """

    __slots__ = ("flat", "names", "n_args", "slots")

    def __init__(self, args, kwargs):
        self.names = tuple(sorted(kwargs))
        self.n_args = len(args)
        self.flat = list(args) + [kwargs[k] for k in self.names]
        self.slots = [i for i, a in enumerate(self.flat) if isinstance(a, torch.Tensor)]

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [self.flat[i] for i in self.slots]

    @property
    def static(self) -> tuple:
        """(position, value) of every argument that is not a tensor."""
        return tuple((i, a) for i, a in enumerate(self.flat) if not isinstance(a, torch.Tensor))

    def with_tensors(self, tensors) -> tuple[list, dict]:
        """(args, kwargs) of the same call with ``tensors`` in place of its tensor arguments."""
        values = list(self.flat)
        for i, t in zip(self.slots, tensors):
            values[i] = t
        return values[: self.n_args], dict(zip(self.names, values[self.n_args :]))


def shaped_like(result, out):
    """A one-tape ``result`` in the container the quantum function returned (``out``): a tuple or list of
    measurements, or the single measurement's value."""
    if isinstance(out, (list, tuple)):
        return type(out)((result,) if len(out) == 1 else result)
    return result

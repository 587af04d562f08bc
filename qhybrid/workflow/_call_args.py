"""A qnode call's arguments flattened once (positional, then keywords by name), with what every part of the
call path reads from them: the lookup key of a static trace (``signature``), the tensors a trace gathers
from and a CUDA graph takes as inputs, and the device the results go to."""

from __future__ import annotations

import torch

from ..interfaces._placement import call_device


def _arg_signature(a):
    if isinstance(a, torch.Tensor):
        if not a.is_floating_point():
            return None
        return ("T", tuple(a.shape), a.dtype, a.device, a.requires_grad)
    try:
        hash(a)
    except TypeError:
        return None
    return ("V", type(a), a)


class CallArgs:
    """``args`` and ``kwargs`` flattened; ``tensors`` are the tensor arguments in that order.

    >>> call = CallArgs((torch.zeros(2), 3), {"w": torch.ones(1)})
    >>> len(call.tensors), call.static
    (2, ((1, 3),))
    >>> args, kwargs = call.with_tensors([torch.ones(2), torch.zeros(1)])
    >>> args[1], kwargs["w"]
    (3, tensor([0.]))
    """

    __slots__ = ("args", "kwargs", "flat", "names", "n_args", "slots")

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs
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

    @property
    def signature(self) -> tuple | None:
        """The lookup key of a static trace: every tensor's shape, dtype, device and ``requires_grad``, every
        other argument by value, and which arguments are one tensor passed twice (``f(a, a)``: a trace reads
        each gate's parameter from one of the two, which ``f(b, c)`` must not replay); None where the call
        cannot be cached (an unhashable argument, a non-floating tensor).

        >>> CallArgs((torch.zeros(2),), {"n": 3}).signature == CallArgs((torch.ones(2),), {"n": 3}).signature
        True
        >>> a, b = torch.zeros(2), torch.zeros(2)
        >>> CallArgs((a, a), {}).signature == CallArgs((a, b), {}).signature
        False
        """
        parts = []
        for a in self.flat:
            s = _arg_signature(a)
            if s is None:
                return None
            parts.append(s)
        slots = self.slots
        if len(slots) > 1 and len({id(self.flat[i]) for i in slots}) < len(slots):
            first: dict = {}
            parts.append(("aliases", tuple(first.setdefault(id(self.flat[i]), k) for k, i in enumerate(slots))))
        return self.n_args, self.names, tuple(parts)

    @property
    def device(self) -> torch.device | None:
        """Where the call's results go: the device of its tensors (``interfaces._placement.call_device``)."""
        return call_device(self.flat)

    def with_tensors(self, tensors) -> tuple[list, dict]:
        """(args, kwargs) of the same call with ``tensors`` in place of its tensor arguments."""
        values = list(self.flat)
        for i, t in zip(self.slots, tensors):
            values[i] = t
        return values[: self.n_args], dict(zip(self.names, values[self.n_args :]))


"""The recording's side of lazy gate parameters (``_lazy``): which arguments a plain qnode hands its function as
``LazyParam`` s, and the ``Session`` of one recording (the proxies it made, whether an in-place write froze them,
how often a value was used).

>>> import torch
>>> w = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True)
>>> (p, n), _, session = proxied((w, 3), {})
>>> type(p).__name__, n, len(session.made)
('LazyParam', 3, 1)
"""

from __future__ import annotations

import numpy as np
import torch

from ._lazy import LazyParam

_LAZY_DTYPES = (torch.float64, torch.float32)


class Session:
    """One recording: the proxies made (an in-place write freezes them all), whether that happened, and how often
    a proxy's value was used."""

    def __init__(self):
        self.made: list = []
        self.eager = False
        self.real_uses = 0
        """Ops that ran on a proxy's value (``torch.sin(x[0])``, ``x[0] > 0``, ``float(x[0])``)."""

    def roots(self) -> list:
        """The argument tensors behind the proxies made (each once)."""
        return list({id(p._root): p._root for p in self.made if p._parent is None}.values())

    def close(self) -> None:
        """Break the proxies' reference cycles once the recording is resolved: each proxy holds its session and its
        parent its children, ~70 objects a Q100 p=2 step left to the cyclic collector (and a recording made with
        the collector paused, as ``QNode.construct`` makes it, moves them to its oldest generation, whose full
        passes are rare). A proxy kept past the recording still gives its value."""
        for p in self.made:
            p._children = {}
        self.made = []


LAZY_MAX_ELEMENTS = 1 << 20
"""Arguments with more elements are handed over as they are (their position table would cost more than it saves)."""

_ARANGES: dict = {}


def _arange(shape) -> np.ndarray:
    found = _ARANGES.get(shape)
    if found is None:
        found = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        found.flags.writeable = False
        if len(_ARANGES) < 64 and found.size <= 1 << 16:
            _ARANGES[shape] = found
    return found


def _lazy_argument(x, session):
    if type(x) not in (torch.Tensor, torch.nn.Parameter) or x.dtype not in _LAZY_DTYPES or x.layout != torch.strided:
        return x
    if x.numel() > LAZY_MAX_ELEMENTS or x.is_meta:  # (a meta tensor: refused by name where the device reads it)
        return x
    return LazyParam(session, x, _arange(tuple(x.shape)), (), None, None)


def proxied(args, kwargs):
    """``(args, kwargs, session)`` with every floating tensor argument (top level) a ``LazyParam``."""
    session = Session()
    a = tuple(_lazy_argument(x, session) for x in args)
    k = {n: _lazy_argument(v, session) for n, v in kwargs.items()}
    return a, k, session


__all__ = ["Session", "proxied", "LAZY_MAX_ELEMENTS"]

"""Where results go: the device of the tensors a call was made with.

A result that depends on no parameter (a constant observable, a circuit with no tensor in it, a value
computed from a CPU-built matrix) would otherwise come back wherever it happened to be computed, and the
user's next op would fail with torch's "Expected all tensors to be on the same device".
"""

from __future__ import annotations

from typing import Any, Iterable

import torch


def _tensors(obj: Any, depth: int = 0) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x, depth + 1)
    elif depth < 4 and isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x, depth + 1)


def call_device(*objs: Any) -> torch.device | None:
    """The device of the tensors in ``objs`` (nested lists, tuples and dicts are searched); an accelerator
    wins over the CPU, since a CPU tensor beside CUDA ones is a constant built without thought of placement.

    >>> call_device(1.0, [torch.zeros(2)], {"w": torch.ones(1)})
    device(type='cpu')
    >>> call_device(0.5) is None
    True
    """
    found = None
    for obj in objs:
        for t in _tensors(obj):
            if t.device.type != "cpu":
                return t.device
            found = found or t.device
    return found


def place(result: Any, device: torch.device | None) -> Any:
    """``result`` (a tensor, or nested tuples / lists of them) with every tensor on ``device``.

    >>> place((torch.zeros(1), [torch.ones(1)]), torch.device("meta"))[1][0].device
    device(type='meta')
    """
    if device is None:
        return result
    if isinstance(result, torch.Tensor):
        return result if result.device == device else result.to(device)
    if isinstance(result, (list, tuple)) and not hasattr(result, "_fields"):
        return type(result)(place(r, device) for r in result)
    return result

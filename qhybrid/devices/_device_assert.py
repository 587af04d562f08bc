"""A check of tensor values where they live: ``torch._assert_async`` of a boolean tensor, so a steady step reads
nothing back to the host for it (no CUDA-graph capture stops there). On a CPU tensor it raises at once (as the
given error type); on a GPU the device's assert fails the next synchronisation. Inside torch.func transforms
(vmap) torch has no batching rule for the assert: nothing is checked there.

>>> import torch
>>> assert_on_device(torch.tensor([1.0, 2.0]) > 0, "values must be positive")
>>> assert_on_device(torch.tensor([1.0, -2.0]) > 0, "values must be positive")
Traceback (most recent call last):
...
ValueError: values must be positive
"""

from __future__ import annotations

import torch


def assert_on_device(holds: torch.Tensor, message: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error(message)`` unless every element of ``holds`` is true, without a host read."""
    if torch._C._functorch.is_functorch_wrapped_tensor(holds):
        return
    if holds.numel() != 1:
        holds = holds.all()
    try:
        torch._assert_async(holds, message)
    except RuntimeError as e:  # (a CPU tensor: torch raises here, as its RuntimeError)
        if message in str(e):
            raise error(message) from None
        raise


__all__ = ["assert_on_device"]

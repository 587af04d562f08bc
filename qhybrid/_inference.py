"""Calls under ``torch.inference_mode`` run as under ``torch.no_grad``: what a call makes and keeps (plans' tables
and buffers, a static trace's constants, index tables cached per process) must serve later calls that differentiate.

Made under inference mode, they were inference tensors, which autograd refuses to save: one validation pass under
``torch.inference_mode()`` before training made every later differentiated call fail ("Inference tensors cannot be
saved for backward"), of that qnode and of any other on the same structure. Results are then ordinary tensors
without a graph, as under ``torch.no_grad``.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable)


def outside_inference_mode(fn: F) -> F:
    """``fn`` run with inference mode off and gradients off where it is called in inference mode.

    >>> import torch
    >>> made = outside_inference_mode(lambda: torch.zeros(1))
    >>> with torch.inference_mode():
    ...     made().is_inference()
    False
    """

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if torch.is_inference_mode_enabled():
            with torch.inference_mode(False), torch.no_grad():
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return call


__all__ = ["outside_inference_mode"]

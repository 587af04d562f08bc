"""MPS splits differentiate once: a backward asked to build its own graph (``create_graph=True``) is refused.

The split and QR backwards (``svd``, ``qr``) are written by hand from the factors the forward kept, with the
gauge and truncation terms dropped or broadened; their own derivatives are not written. Run under a
recording backward, they would hand back cotangents with no history through the factors, and the Hessian
would silently miss every term through the bond updates (issue 41: -1.316 where -1.700 is right, with
nothing truncated). So the second derivative is refused by name, with the two ways to get one.
"""

from __future__ import annotations

import functools

import torch

from .....errors import GradientError

SECOND_DERIVATIVE_REFUSED = (
    "method='mps' has no second derivatives: a backward pass that builds a graph (create_graph=True: "
    "torch.autograd.functional.hessian, gradients of gradients, a gradient penalty) reached the MPS "
    "truncated split, whose backward is first order only. For Hessians use the exact engine (a device "
    "without method='mps'), or diff_method='parameter-shift' on the MPS device (second derivatives by "
    "shifting the shifted runs, within the MPS's truncation)."
)


def first_order_only(backward):
    """Decorator of an ``autograd.Function.backward`` (in place of ``once_differentiable``): raises
    :class:`GradientError` (``SECOND_DERIVATIVE_REFUSED``) when the backward runs with grad mode on (a
    backward with ``create_graph=True``), else runs it without recording.

    >>> class Twice(torch.autograd.Function):
    ...     forward = staticmethod(lambda ctx, x: 2 * x)
    ...     backward = staticmethod(first_order_only(lambda ctx, g: 2 * g))
    >>> x = torch.tensor(1.0, requires_grad=True)
    >>> torch.autograd.grad(Twice.apply(x), x)
    (tensor(2.),)
    """

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        if torch.is_grad_enabled():
            raise GradientError(SECOND_DERIVATIVE_REFUSED)
        return backward(ctx, *grads)

    return wrapper


__all__ = ["SECOND_DERIVATIVE_REFUSED", "first_order_only"]

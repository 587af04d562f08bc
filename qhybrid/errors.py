"""Exceptions qhybrid raises for bad input, each naming the offending thing and the fix."""

from __future__ import annotations

from pennylane.exceptions import DeviceError, QuantumFunctionError


class QhybridError(Exception):
    """Base class of every qhybrid error."""


class UnsupportedOperationError(QhybridError, DeviceError, ValueError):
    """An operation or measurement the device cannot simulate, even after decomposition.

    Also a PennyLane ``DeviceError``, so PennyLane's own tooling treats it as a device limitation."""


class WireError(QhybridError, ValueError):
    """A tape uses wires the device does not have."""


class BroadcastError(QhybridError, ValueError):
    """Parameters broadcast with sizes that do not agree."""


class ContractionTooLargeError(QhybridError, MemoryError):
    """A contraction whose largest intermediate would exceed the device's ``max_memory``."""


class GradientError(QhybridError, QuantumFunctionError, ValueError):
    """A gradient request the chosen method cannot serve (e.g. adjoint with shots).

    Also a PennyLane ``QuantumFunctionError``, the type PennyLane raises for the same request."""


class CaptureError(QhybridError, RuntimeError):
    """A step that cannot be captured as a CUDA graph (no GPU, host tensors, host read-backs)."""


class QhybridWarning(UserWarning):
    """A request served another way than asked (the numbers are the same), e.g. a PennyLane option the
    device does not use; each is said once per process."""


def refuse_function_transforms(tapes=()) -> None:
    """torch.func transforms reaching the device or ``execute`` directly (a plain ``qml.qnode`` on a qhybrid
    device, ``qhybrid.execute`` on tapes) would hand it functorch's wrapper tensors, which its device code cannot
    see through: say so, and what does the same job. ``qhybrid.qnode`` and the layers run under ``torch.func``
    (``grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``; ``qhybrid.workflow._functorch``) and never
    reach this. Likewise forward-mode AD's dual tensors among the parameters of ``tapes``.

    >>> refuse_function_transforms()  # outside any transform: nothing to refuse
    """
    import torch

    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    if active is not None and active():
        raise GradientError(
            "A plain qml.qnode on a qhybrid device (or qhybrid's execute on tapes) does not run inside torch.func "
            "transforms (vmap, grad, jacrev, jacfwd). Decorate the function with qhybrid.qnode(dev, ...) instead: "
            "it supports torch.func.grad, vjp, jacrev, jacfwd, hessian and vmap. Or, without torch.func: give the inputs a leading "
            "batch axis (one broadcast execution) and use torch.autograd.functional.jacobian for Jacobians."
        )
    from torch.autograd import forward_ad

    dual = forward_ad._current_level >= 0  # (a dual level is open)
    params = [p for t in tapes for p in t.get_parameters(trainable_only=False)] if dual else []
    if any(isinstance(p, torch.Tensor) and forward_ad.unpack_dual(p).tangent is not None for p in params):
        raise GradientError(
            "Forward-mode AD (torch.autograd.forward_ad's dual tensors) does not run through a plain qml.qnode on a "
            "qhybrid device or qhybrid's execute on tapes. Decorate the function with qhybrid.qnode(dev, ...) "
            "instead: it takes dual tensors and torch.func.jvp / jacfwd. Or use reverse mode (torch.autograd.grad)."
        )


__all__ = [
    "QhybridError",
    "UnsupportedOperationError",
    "WireError",
    "BroadcastError",
    "ContractionTooLargeError",
    "GradientError",
    "CaptureError",
    "QhybridWarning",
    "refuse_function_transforms",
]

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


def refuse_function_transforms() -> None:
    """torch.func transforms (vmap, grad, jacrev, jacfwd) would wrap the parameters in tensors qhybrid's device
    code cannot see through: say so, and what does the same job, instead of torch's own message.

    >>> refuse_function_transforms()  # outside any transform: nothing to refuse
    """
    import torch

    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    if active is not None and active():
        raise GradientError(
            "qhybrid circuits do not run inside torch.func transforms (vmap, grad, jacrev, jacfwd). For a "
            "batch, give the inputs a leading batch axis: the whole batch runs as one broadcast execution. "
            "For Jacobians, use torch.autograd.functional.jacobian (or backward with grad_tensors)."
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

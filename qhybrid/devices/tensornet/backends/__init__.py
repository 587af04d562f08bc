"""Contraction backends: what turns a :class:`ContractionPlan` and its operands into one torch tensor.

The tensornet device plans a network once per structure (``_plan.ContractionPlan``); a backend only
executes that plan. Backends are chosen by name, like opt_einsum's path optimisers:

>>> from qhybrid.devices.tensornet.backends import get_backend
>>> get_backend("torch", "cpu")
TorchBackend(device='cpu')
>>> get_backend("auto", "cpu").name  # no CUDA device asked for: torch on the CPU
'torch'

``"torch"``        pairwise ``torch.einsum`` along the plan's path, on CPU or CUDA tensors.
``"cutensornet"``  NVIDIA cuTensorNet through cuquantum-python (CUDA only; ``pip install 'qhybrid[gpu]'``).
``"auto"``         on a CUDA device where cuquantum-python runs: cutensornet for large trees only
                   (``backends.auto``), torch for the rest; torch elsewhere.
"""

from __future__ import annotations

import torch

from ._base import Backend
from .torch_backend import TorchBackend

BACKEND_NAMES = ("torch", "cutensornet", "auto")
"""Names :func:`get_backend` accepts."""


_INSTANCES: dict[tuple[str, str], Backend] = {}


def get_backend(name: str = "auto", device: torch.device | str | None = None) -> Backend:
    """The backend called ``name`` for tensors on ``device`` (default CPU), shared per (name, device).

    ``"auto"`` is, on a CUDA device where cuquantum-python imports and a small contraction runs, torch
    with cuTensorNet for the trees large enough to win there (:mod:`.auto`), else ``"torch"`` (torch-CUDA on
    a GPU without cuquantum, torch-CPU elsewhere). Asking for ``"cutensornet"`` where it cannot run raises a ``RuntimeError`` that says
    what is missing.
    """
    device = _normalise(device)
    if name not in BACKEND_NAMES:
        raise ValueError(f"Unknown contraction backend {name!r}; choose one of {BACKEND_NAMES}.")
    if name == "auto" and available_backends(device)["cutensornet"] is not None:
        name = "torch"
    key = (name, str(device))
    backend = _INSTANCES.get(key)
    if backend is not None:
        return backend
    if name == "torch":
        from .torch_backend import TorchBackend

        backend = TorchBackend(device)
    elif name == "auto":
        from .auto import AutoBackend

        backend = AutoBackend(device, get_backend("cutensornet", device))
    else:
        from .cutensornet import CuTensorNetBackend, unavailable_reason

        reason = unavailable_reason(device)
        if reason is not None:
            raise RuntimeError(f"backend='cutensornet' cannot run on {device}: {reason}")
        backend = CuTensorNetBackend(device)
    _INSTANCES[key] = backend
    return backend


def available_backends(device: torch.device | str | None = None) -> dict[str, str | None]:
    """For each concrete backend, ``None`` if it can run on ``device``, else the reason it cannot.

    >>> available_backends("cpu")["torch"] is None
    True
    """
    device = _normalise(device)
    from .cutensornet import unavailable_reason

    torch_reason = None
    if device.type == "cuda" and not torch.cuda.is_available():
        torch_reason = "no CUDA GPU is visible to torch (torch.cuda.is_available() is False)"
    return {"torch": torch_reason, "cutensornet": unavailable_reason(device)}


def _normalise(device) -> torch.device:
    """``"cuda"`` means the current CUDA device: name it, so "cuda" and "cuda:0" share one backend."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda" and device.index is None:
        try:
            if torch.cuda.is_available():
                device = torch.device("cuda", torch.cuda.current_device())
        except (RuntimeError, AssertionError):  # torch without CUDA: leave the name as it is
            pass
    return device


def clear_backend_cache() -> None:
    """Forget the shared backend instances and the cached cuTensorNet availability probes."""
    from .cutensornet import clear_probe_cache

    for backend in _INSTANCES.values():
        backend.clear()
    _INSTANCES.clear()
    clear_probe_cache()


__all__ = ["Backend", "TorchBackend", "get_backend", "available_backends", "clear_backend_cache", "BACKEND_NAMES"]

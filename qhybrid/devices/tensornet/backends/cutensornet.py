"""The cuTensorNet backend: NVIDIA cuTensorNet (cuquantum-python) executes OUR contraction path.

One ``cuquantum.tensornet.Network`` per plan (and operand shapes / dtype / which operands need
gradients), built the first time the plan is contracted: its path is set from the plan
(``contract_path(optimize={"path": ...})``, so cuTensorNet does no planning of its own and no
slicing), autotuned once, and afterwards only pointed at new operand values
(``reset_operands``) and contracted. Gradients come from ``Network.gradients`` (cuTensorNet's
``compute_gradients_backward``), which reuses the intermediates the forward left in the network's
CACHE workspace, wrapped in a ``torch.autograd.Function``.

Memory (``_workspace``): each network's workspace is sized within the device's ``max_memory`` (and a
share of the GPU's free memory), a network that cannot fit is refused before anything is allocated,
and workspaces go back to torch's caching allocator after each call (the CACHE after the backward), so
a structure's many networks share one scratch workspace instead of each holding its own. Networks are
autotuned only where their cost makes it pay.

What cuTensorNet is given differs from the plan in ways that keep the result identical:

* extent-1 axes are squeezed (cuTensorNet's gradients refuse "singleton modes"; an extent-1 axis is
  also how ``torch.einsum`` broadcasts, e.g. an unbatched gate against a batch index);
* a mode that only one operand carries and the output lacks is summed beforehand in torch;
* operands left without any mode (global phases) are multiplied in afterwards in torch;
* operands are made contiguous with conjugation resolved (a lazily conjugated torch view would be
  read unconjugated through its data pointer).

Torch autograd differentiates those wrappers; only the core contraction is cuTensorNet's. Where the
library answers NOT_SUPPORTED (building the network, or its experimental gradients — cf.
NVIDIA/cuQuantum#145), that network falls back to torch for good, without a warning; the reasons
are kept in ``CuTensorNetBackend.fallbacks``.

cuquantum-python is imported at first use, and its shared libraries (libcutensornet, libcutensor)
load only when the first network runs, so availability is probed with a real 2x2 contraction.
"""

from __future__ import annotations

import functools
import importlib
import weakref
from typing import Sequence

import torch

from ....errors import ContractionTooLargeError
from ._base import Backend
from ._layout import _layout
from ._workspace import (
    autotune_iterations,
    check_workspace,
    estimated_workspace,
    network_workspace_limit,
    workspace_limit,
)
from ._cutn_network import _CONVENTIONS, _Contract, _NetworkEntry, _current_stream, _device_ctx, _is_not_supported

AUTOTUNE_ITERATIONS = 3
"""Autotuning iterations spent once per network (0: no autotuning). Pays off over a training run."""

INSTALL_HINT = (
    "pip install 'qhybrid[gpu]' (cuquantum-python-cu13==26.9.0, which brings cutensornet-cu13 and cutensor-cu13)"
)


_PROBES: dict[str, str | None] = {}


# --- library loading and availability ------------------------------------------------------------


def _load():
    """``(cuquantum.tensornet, cuquantum.bindings.cutensornet)``, imported now (first use)."""
    try:
        tn = importlib.import_module("cuquantum.tensornet")
        cutn = importlib.import_module("cuquantum.bindings.cutensornet")
    except (ImportError, OSError) as exc:
        raise RuntimeError(
            f"backend='cutensornet' needs cuquantum-python, which is not installed or does not import "
            f"({type(exc).__name__}: {exc}). Install the GPU extra: {INSTALL_HINT}; or use backend='torch'."
        ) from exc
    return tn, cutn


def unavailable_reason(device: torch.device | str) -> str | None:
    """``None`` if cuTensorNet can contract on ``device``, else what is missing (cached per device)."""
    device = torch.device(device)
    if device.type != "cuda":
        return (
            f"cuTensorNet contracts CUDA tensors only and {device} is not a CUDA device; create the device "
            "with torch_device='cuda', or use backend='torch'"
        )
    if not torch.cuda.is_available():
        return (
            "no CUDA GPU is visible to torch (torch.cuda.is_available() is False); use backend='torch' on "
            "this machine"
        )
    key = str(device)
    if key not in _PROBES:
        try:
            tn, _ = _load()
        except RuntimeError as exc:
            _PROBES[key] = str(exc)
        else:
            _PROBES[key] = _probe(tn, device)
    return _PROBES[key]


def _probe(tn, device: torch.device) -> str | None:
    """Run one tiny contraction: the shared libraries load (or fail to) only now."""
    try:
        with torch.cuda.device(device):
            a = torch.eye(2, dtype=torch.complex128, device=device)
            with tn.Network(a, [0, 1], a, [1, 2], [0, 2]) as network:
                network.contract_path()
                network.contract()
    except Exception as exc:  # noqa: BLE001 - any failure here means "not usable", with its message
        return (
            f"cuquantum-python imports, but cuTensorNet failed to run on {device} ({type(exc).__name__}: {exc}). "
            f"Its libraries (libcutensornet, libcutensor) load at first use; install matching CUDA 13 wheels: "
            f"{INSTALL_HINT}"
        )
    return None


def clear_probe_cache() -> None:
    _PROBES.clear()
    _CONVENTIONS.clear()


# --- one cuTensorNet network -----------------------------------------------------------------------


def _free_memory(device: torch.device) -> tuple[int, int]:
    """(free device memory, memory torch's caching allocator holds unused) in bytes."""
    if device.type != "cuda":  # only the CPU stand-in of the tests gets here
        import psutil

        return int(psutil.virtual_memory().available), 0
    free, _ = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(free), int(cached)


def _numel(shape) -> int:
    n = 1
    for e in shape:
        n *= int(e)
    return n


def _free_entries(entries: dict) -> None:
    for entry in entries.values():
        if isinstance(entry, _NetworkEntry):
            entry.free()


# --- the backend ----------------------------------------------------------------------------------


class CuTensorNetBackend(Backend):
    """Contracts plans with cuTensorNet on one CUDA device; gradients by its backward propagation.

    Args:
        device: the CUDA device whose tensors it contracts.

    Keyword Args:
        autotune_iterations: cuTensorNet autotuning iterations per network (once, when it is built), for
            networks whose plan costs at least ``_workspace.AUTOTUNE_MIN_FLOPS`` (cheaper ones gain nothing).

    ``contract(plan, operands, max_memory=...)`` keeps cuTensorNet's workspace within ``max_memory``
    bytes and 80% of the GPU's free memory, or raises ``ContractionTooLargeError`` before allocating.
    The first call for a plan builds (and, if costly, autotunes) its network; later calls with new
    operand values only rebind them. Results and gradients stay on the device, queued on the current
    CUDA stream. Gradients are first order (``once_differentiable``); use ``backend="torch"`` for
    higher derivatives.
    """

    name = "cutensornet"

    def __init__(self, device: torch.device | str = "cuda", *, autotune_iterations: int = AUTOTUNE_ITERATIONS,
                 _library=None):
        super().__init__(device)
        self.autotune_iterations = int(autotune_iterations)
        self._library = _library  # (tensornet module, bindings module); None: import at first use
        self._networks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.fallbacks: list[str] = []
        """Distinct reasons a network went (wholly or for its gradients) to torch instead."""

    def _lib(self):
        if self._library is None:
            reason = unavailable_reason(self.device)
            if reason is not None:
                raise RuntimeError(f"backend='cutensornet' cannot run on {self.device}: {reason}")
            self._library = _load()
        return self._library

    def _per_plan(self, plan) -> dict:
        entries = self._networks.get(plan)
        if entries is None:
            entries = self._networks[plan] = {}
            weakref.finalize(plan, _free_entries, entries)  # free the networks when the plan goes
        return entries

    def _note(self, reason: str) -> None:
        if reason not in self.fallbacks:
            self.fallbacks.append(reason)

    def contract(
        self, plan, operands: Sequence[torch.Tensor], *, max_memory: float | None = None, keep: bool = True
    ) -> torch.Tensor:
        if len(operands) != len(plan.inputs):
            raise ValueError(
                f"The plan contracts {len(plan.inputs)} tensors but {len(operands)} operands were given; "
                "pass one operand per network tensor, in the plan's order."
            )
        lib = self._lib()
        for i, t in enumerate(operands):
            if t.device.type != self.device.type or (
                self.device.index is not None and t.device.index != self.device.index
            ):
                raise ValueError(
                    f"Operand {i} is on {t.device}, but this cutensornet backend contracts on {self.device}; "
                    "create the device with torch_device set to that GPU (or use backend='torch')."
                )
        entries = self._per_plan(plan)
        shapes = tuple(tuple(t.shape) for t in operands)
        layout = entries.get(("layout", shapes))
        if layout is None:
            layout = entries[("layout", shapes)] = _layout(plan, shapes)
        if layout.unsupported is not None:
            self._note(f"{layout.unsupported}: contracted by torch")
            return plan.contract(operands)
        dtype = functools.reduce(torch.promote_types, (t.dtype for t in operands))
        prepared = layout.prepare(operands)
        kept = [prepared[i].to(dtype).resolve_conj().contiguous() for i in layout.kept]
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in kept)
        mask = tuple(grad and t.requires_grad for t in kept)
        device = kept[0].device
        key = ("network", shapes, dtype, device, mask)
        with _device_ctx(device):
            stream = _current_stream(device)
            entry = entries.get(key)
            if entry is None:
                what = f"a network of {len(kept)} tensors"
                limit = workspace_limit(max_memory, *_free_memory(device))
                itemsize = dtype.itemsize
                need = estimated_workspace(plan.largest_intermediate, _numel(layout.out_shape), itemsize)
                check_workspace(need, limit, what, max_memory)
                tune = autotune_iterations(plan.flops, self.autotune_iterations)
                try:
                    entry = self._entry(lib, layout, kept, mask, stream, tune, limit, need, what, max_memory)
                except Exception as exc:
                    if not (isinstance(exc, lib[1].cuTensorNetError) and _is_not_supported(exc)):
                        raise
                    entry = f"cuTensorNet answered NOT_SUPPORTED for this network ({exc}): contracted by torch"
                entries[key] = entry
            if isinstance(entry, str):
                self._note(entry)
                return plan.contract(operands)
            if grad:
                core = _Contract.apply(plan, entry, stream, *kept)
            else:
                core = entry.contract(kept, stream)
        return layout.finish(core, prepared)

    def _entry(self, lib, layout, kept, mask, stream, tune, limit, need, what, max_memory):
        """A network built within the workspace its size calls for, else within cuTensorNet's own minimum (its
        refusal names it), else refused within ``limit``."""
        small = network_workspace_limit(limit, need)
        try:
            return _NetworkEntry(lib, layout, kept, mask, stream, tune, self.fallbacks, small, what, max_memory)
        except ContractionTooLargeError as exc:
            if small >= limit:
                raise
            minimum = int(getattr(exc.__cause__, "requirement", 0) or 0)
        within = minimum if 0 < minimum <= limit else limit  # above the limit: refused, naming the limit
        return _NetworkEntry(lib, layout, kept, mask, stream, tune, self.fallbacks, within, what, max_memory)

    def clear(self) -> None:
        for entries in list(self._networks.values()):
            _free_entries(entries)
            entries.clear()
        self._networks = weakref.WeakKeyDictionary()


__all__ = ["CuTensorNetBackend", "unavailable_reason", "AUTOTUNE_ITERATIONS", "INSTALL_HINT"]

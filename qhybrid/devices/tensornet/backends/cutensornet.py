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
import warnings
import weakref
from contextlib import nullcontext
from typing import Sequence

import numpy as np
import torch

from . import Backend
from ._layout import _Layout, _layout, _renumber, _torch_contract, _torch_gradients  # noqa: F401 (re-exported)
from ._workspace import autotune_iterations, check_workspace, estimated_workspace, refuse_from_library, workspace_limit

AUTOTUNE_ITERATIONS = 3
"""Autotuning iterations spent once per network (0: no autotuning). Pays off over a training run."""

INSTALL_HINT = (
    "pip install 'qhybrid[gpu]' (cuquantum-python-cu13==26.9.0, which brings cutensornet-cu13 and cutensor-cu13)"
)

_EXPERIMENTAL_GRADIENTS = r"Network\.gradients\(\) is an experimental API"

NETWORK_OPTIONS = {"blocking": "auto"}
"""``NetworkOptions`` for every network: cuquantum-python blocks (synchronises) after each call by default;
"auto" only queues the work on the stream when the operands are on the GPU."""

_PROBES: dict[str, str | None] = {}
_CONVENTIONS: dict[tuple[str, torch.dtype], str] = {}


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


def _gradient_convention(lib, device: torch.device, dtype: torch.dtype, stream) -> str:
    """How cuTensorNet's complex gradients relate to torch's, found once per device and dtype.

    torch's backward of ``y = f(x)`` returns ``J^H g`` for the output gradient ``g``; a library following
    the holomorphic convention returns ``J^T g`` instead (then torch's is ``conj(J^T conj(g))``). One
    2x3 @ 3x2 product tells which: ``"torch"``, ``"holomorphic"`` or ``"unknown"`` (torch does the backward).
    """
    if not dtype.is_complex:
        return "torch"
    key = (str(device), dtype)
    if key not in _CONVENTIONS:
        tn, cutn = lib
        gen = torch.Generator().manual_seed(0)
        a, b, seed = (torch.randn(shape, dtype=dtype, generator=gen).to(device) for shape in ((2, 3), (3, 2), (2, 2)))
        qualifiers = np.zeros(2, dtype=cutn.tensor_qualifiers_dtype)
        qualifiers["requires_gradient"] = 1
        network = tn.Network(a, [0, 1], b, [1, 2], [0, 2], qualifiers=qualifiers, options=dict(NETWORK_OPTIONS),
                             stream=stream)
        try:
            network.contract_path(optimize={"path": [(0, 1)]})
            network.contract(stream=stream, release_workspace=True)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_EXPERIMENTAL_GRADIENTS)
                ga, gb = network.gradients(seed, stream=stream, release_workspace=True)
        finally:
            network.free()
        tol = 1e-4 if dtype == torch.complex64 else 1e-10

        def close(x, y):
            return x is not None and torch.allclose(x, y, atol=tol, rtol=tol)

        if close(ga, seed @ b.conj().T) and close(gb, a.conj().T @ seed):
            _CONVENTIONS[key] = "torch"
        elif close(ga, seed @ b.T) and close(gb, a.T @ seed):
            _CONVENTIONS[key] = "holomorphic"
        else:
            _CONVENTIONS[key] = "unknown"
    return _CONVENTIONS[key]


def _is_not_supported(exc: Exception) -> bool:
    return "NOT_SUPPORTED" in str(exc) or "NOT SUPPORTED" in str(exc).upper()


# --- one cuTensorNet network -----------------------------------------------------------------------


class _NetworkEntry:
    """A cuTensorNet ``Network`` for one plan, operand layout and gradient mask: planned once."""

    def __init__(self, lib, layout: _Layout, operands, grad_mask, stream, autotune_iterations: int,
                 notes: list[str], memory_limit: int | None = None, what: str = "a network",
                 max_memory: float | None = None):
        tn, cutn = lib
        self.lib, self.layout, self.notes = lib, layout, notes
        qualifiers = np.zeros(len(operands), dtype=cutn.tensor_qualifiers_dtype)
        qualifiers["requires_gradient"] = [int(m) for m in grad_mask]
        args: list = []
        for t, modes in zip(operands, layout.kept_modes):
            args += [t, list(modes)]
        args.append(list(layout.out_modes))
        options = dict(NETWORK_OPTIONS)
        if memory_limit is not None:
            options["memory_limit"] = int(memory_limit)
        self.network = tn.Network(*args, qualifiers=qualifiers, options=options, stream=stream)
        try:
            # our path and no slicing (a path given without sliced modes is contracted as one slice,
            # which cuTensorNet's gradients require); the workspace is sized here, within memory_limit
            self.network.contract_path(optimize={"path": [tuple(p) for p in layout.path]})
            if autotune_iterations:
                self.network.autotune(iterations=autotune_iterations, stream=stream, release_workspace=True)
        except MemoryError as exc:  # cuquantum's MemoryLimitExceeded: the minimum workspace does not fit
            self.free()
            if not hasattr(exc, "requirement"):
                raise
            raise refuse_from_library(exc, what, max_memory) from exc
        except Exception:
            self.free()
            raise
        self.fresh = True  # the network still points at the operands it was built with
        self.token: object | None = None  # identifies the contraction whose intermediates the CACHE holds
        self.out_stride: tuple[int, ...] | None = None
        self.grad_fallback: str | None = None

    def _fall_back(self, reason: str) -> None:
        self.grad_fallback = reason
        if reason not in self.notes:
            self.notes.append(reason)

    def contract(self, operands, stream) -> torch.Tensor:
        if not self.fresh:
            self.network.reset_operands(*operands, stream=stream)
        self.fresh = False
        # the scratch workspace goes back to torch's pool at once (the next network reuses it); the CACHE
        # (intermediates for the gradients) stays until the backward
        out = self.network.contract(stream=stream, release_workspace=True)
        self.token = object()
        self.out_stride = tuple(out.stride())
        return out

    def gradients(self, token, operands, grad_out, needs, stream) -> list[torch.Tensor | None]:
        if self.grad_fallback is None:
            try:
                return self._library_gradients(token, operands, grad_out, needs, stream)
            except Exception as exc:
                if not (isinstance(exc, self.lib[1].cuTensorNetError) and _is_not_supported(exc)):
                    raise
                self._fall_back(
                    f"cuTensorNet's gradients answered NOT_SUPPORTED for a network of {len(operands)} tensors "
                    f"({exc}); its backward runs in torch."
                )
        return _torch_gradients(self.layout, operands, grad_out, needs)

    def _library_gradients(self, token, operands, grad_out, needs, stream):
        network = self.network
        if not getattr(network, "valid_state", True):  # freed (backend.clear()) while a graph held it
            return _torch_gradients(self.layout, operands, grad_out, needs)
        if getattr(network, "num_slices", 1) != 1:  # cuTensorNet's gradients need a single slice
            self._fall_back(f"the network was sliced ({network.num_slices} slices); its backward runs in torch.")
            return _torch_gradients(self.layout, operands, grad_out, needs)
        if self.token is not token or not getattr(network, "contracted", True):
            # another contraction of this plan ran since: restore this one's intermediates first
            network.reset_operands(*operands, stream=stream)
            network.contract(stream=stream, release_workspace=True)
            self.token = token
        convention = _gradient_convention(self.lib, grad_out.device, grad_out.dtype, stream)
        if convention == "unknown":
            self._fall_back(
                "cuTensorNet's complex gradients matched neither torch's convention nor the holomorphic one "
                "on a test product; backward runs in torch."
            )
            return _torch_gradients(self.layout, operands, grad_out, needs)
        seed = grad_out.conj() if convention == "holomorphic" else grad_out
        seed = seed.resolve_conj()
        if self.out_stride is not None and tuple(seed.stride()) != self.out_stride:
            buf = torch.empty_strided(seed.shape, self.out_stride, dtype=seed.dtype, device=seed.device)
            seed = buf.copy_(seed)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_EXPERIMENTAL_GRADIENTS)
            grads = network.gradients(seed, stream=stream, release_workspace=True)  # scratch and CACHE
        if convention == "holomorphic":
            grads = [None if g is None else g.conj().resolve_conj() for g in grads]
        return [g if need else None for g, need in zip(grads, needs)]

    def free(self) -> None:
        try:
            self.network.free()
        except Exception:  # noqa: BLE001 - freeing is best effort (e.g. at interpreter exit)
            pass


class _Contract(torch.autograd.Function):
    """cuTensorNet contraction of prepared operands; backward by ``Network.gradients``."""

    @staticmethod
    def forward(plan, entry: _NetworkEntry, stream, *operands: torch.Tensor) -> torch.Tensor:
        return entry.contract(operands, stream)

    @staticmethod
    def setup_context(ctx, inputs, output):
        plan, entry, stream, *operands = inputs
        # the plan rides along so that its networks (freed when it is collected) outlive this graph
        ctx.plan, ctx.entry, ctx.token = plan, entry, entry.token
        ctx.save_for_backward(*operands)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        operands = ctx.saved_tensors
        device = operands[0].device
        with _device_ctx(device):
            stream = _current_stream(device)
            grads = ctx.entry.gradients(ctx.token, operands, grad_out, ctx.needs_input_grad[3:], stream)
        return (None, None, None, *grads)


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


def _device_ctx(device: torch.device):
    return torch.cuda.device(device) if device.type == "cuda" else nullcontext()


def _current_stream(device: torch.device):
    return torch.cuda.current_stream(device) if device.type == "cuda" else None


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

    def contract(self, plan, operands: Sequence[torch.Tensor], *, max_memory: float | None = None) -> torch.Tensor:
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
                itemsize = torch.empty((), dtype=dtype).element_size()
                need = estimated_workspace(plan.largest_intermediate, _numel(layout.out_shape), itemsize)
                check_workspace(need, limit, what, max_memory)
                tune = autotune_iterations(plan.flops, self.autotune_iterations)
                try:
                    entry = _NetworkEntry(lib, layout, kept, mask, stream, tune, self.fallbacks, limit, what, max_memory)
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

    def clear(self) -> None:
        for entries in list(self._networks.values()):
            _free_entries(entries)
            entries.clear()
        self._networks = weakref.WeakKeyDictionary()


__all__ = ["CuTensorNetBackend", "unavailable_reason", "AUTOTUNE_ITERATIONS", "INSTALL_HINT"]

"""One cuTensorNet network per plan and operand layout: built once, autotuned where it pays, rebound and\ncontracted per call; its gradients from cuTensorNet's backward (or torch where the library answers\nNOT_SUPPORTED), wrapped as a torch autograd Function."""

from __future__ import annotations

import warnings
from contextlib import nullcontext
import numpy as np
import torch
from ._layout import _Layout, _torch_gradients
from ._workspace import autotune_iterations, refuse_from_library


_EXPERIMENTAL_GRADIENTS = r"Network\.gradients\(\) is an experimental API"


NETWORK_OPTIONS = {"blocking": "auto"}
"""``NetworkOptions`` for every network: cuquantum-python blocks (synchronises) after each call by default;
"auto" only queues the work on the stream when the operands are on the GPU."""


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


_CONVENTIONS: dict[tuple[str, torch.dtype], str] = {}


def _device_ctx(device: torch.device):
    return torch.cuda.device(device) if device.type == "cuda" else nullcontext()


def _current_stream(device: torch.device):
    return torch.cuda.current_stream(device) if device.type == "cuda" else None

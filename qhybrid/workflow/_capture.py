"""``capture="cuda-graph"`` on layers and qnodes: each call shape captured once (forward and backward as
CUDA graphs, through :func:`qhybrid.cuda_graph`), later calls of that shape replayed.

A call's key is every tensor argument's shape, dtype, device and ``requires_grad``, the other arguments
(they decide the circuit's structure, so they must be hashable) and the grad mode; a new key is a new
capture (warm-up calls, then capture), up to ``MAX_GRAPHS`` kept per object. Captured graphs read their
inputs from static buffers: the arguments are copied in on every call, so the caller's tensors are never
written. Validation that reads values back to the host (and the circuit's construction) runs only in the
warm-up calls of a new key, never on replays.

>>> check_capture(None, "ExpQLayer") is None
True
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import torch

from ._call_args import CallArgs
from ..errors import CaptureError

CAPTURE_MODES = ("cuda-graph",)
"""The values ``capture=`` takes besides None."""

MAX_GRAPHS = 8
"""Captured call shapes kept per layer or qnode (least recently used dropped); each holds its own memory."""

WARMUP_CALLS = 3
"""Eager calls before each capture (they plan the circuit and fill qhybrid's caches)."""

_HOW_TO_RUN_UNCAPTURED = "leave capture unset (capture=None) to run uncaptured"


def check_capture(capture, owner: str, *, torch_device=None, diff_method=None) -> str | None:
    """Validate ``capture=`` where it is given; refuse at once what is known never to capture.

    Known at construction: a value other than None / ``"cuda-graph"``, no CUDA in this torch, a device
    pinned to the CPU, ``diff_method="parameter-shift"`` (its shifted tapes are built on the host).
    Inputs on the CPU are refused at the first call (a layer follows its inputs' device).
    """
    if capture is None:
        return None
    if capture not in CAPTURE_MODES:
        raise ValueError(f"{owner}: capture must be None or 'cuda-graph', got {capture!r}.")
    if not torch.cuda.is_available():
        raise CaptureError(
            f"{owner}: capture='cuda-graph' needs a CUDA GPU, and torch.cuda.is_available() is False here; "
            f"{_HOW_TO_RUN_UNCAPTURED}."
        )
    if torch_device is not None and torch.device(torch_device).type != "cuda":
        raise CaptureError(
            f"{owner}: capture='cuda-graph' needs CUDA, but its device runs on {torch_device}; create the device "
            f"with torch_device='cuda' (or None to follow the inputs), or {_HOW_TO_RUN_UNCAPTURED}."
        )
    if diff_method == "parameter-shift":
        raise CaptureError(
            f"{owner}: diff_method='parameter-shift' builds its shifted circuits on the host and cannot be "
            f"captured; use diff_method='adjoint' or 'best', or {_HOW_TO_RUN_UNCAPTURED}."
        )
    return capture


def capture_graphs(capture, owner: str, *, torch_device=None, diff_method=None) -> "Graphs | None":
    """The graphs ``capture=`` asks for (validated by :func:`check_capture`), or None to run uncaptured:
    the set-up every layer and qnode that takes ``capture=`` makes.

    >>> capture_graphs(None, "TorchLayer") is None
    True
    """
    if check_capture(capture, owner, torch_device=torch_device, diff_method=diff_method) is None:
        return None
    return Graphs(owner)


def replaying(graphs: "Graphs | None") -> bool:
    """Whether a call should go through ``graphs`` (captured and not already inside one of its captures,
    where the owner runs its eager code)."""
    return graphs is not None and not graphs.running


def _meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.dtype, t.device, t.requires_grad


class Graphs:
    """The captured graphs of one layer or qnode, by call key; ``running`` while a capture calls the
    owner's eager code (the owner then runs eagerly instead of asking for a graph)."""

    def __init__(self, owner: str, max_graphs: int = MAX_GRAPHS):
        self.owner = owner
        self.max_graphs = max_graphs
        self.running = False
        self.captures = 0  # how many captures were made (a new shape or structure each)
        self._graphs: OrderedDict = OrderedDict()

    def call(self, fn: Callable, tensors: tuple, static=()):
        """``fn(*tensors)``, replayed from the graph for this key (captured first if new). ``static``:
        the non-tensor arguments that decide the circuit (hashable)."""
        self._check_tensors(tensors)
        try:
            key = (tuple(_meta(t) for t in tensors), static, torch.is_grad_enabled())
            hash(key)
        except TypeError as exc:
            raise CaptureError(
                f"{self.owner}: capture='cuda-graph' keys its graphs on the non-tensor arguments, which must be "
                f"hashable ({exc}); pass such values as tensors or {_HOW_TO_RUN_UNCAPTURED}."
            ) from exc
        graphed = self._graphs.get(key)
        if graphed is None:
            graphed = self._capture(fn, tensors)
            self._graphs[key] = graphed
            if len(self._graphs) > self.max_graphs:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return graphed(*tensors)

    def _check_tensors(self, tensors: tuple) -> None:
        for k, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor) or not t.is_cuda:
                where = t.device if isinstance(t, torch.Tensor) else type(t).__name__
                raise CaptureError(
                    f"{self.owner}: capture='cuda-graph' needs CUDA tensors, but tensor argument {k} is on {where}; "
                    f"move the inputs and the module to the GPU (.cuda()), or {_HOW_TO_RUN_UNCAPTURED}."
                )

    def _capture(self, fn: Callable, tensors: tuple):
        from .cuda_graph import cuda_graph

        # the graphs read from these buffers; the caller's tensors are copied in on every call, never written
        buffers = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in tensors)
        self.running = True
        try:
            graphed = cuda_graph(fn, buffers, warmup=WARMUP_CALLS)
        finally:
            self.running = False
        self.captures += 1
        return graphed

    def clear(self) -> None:
        self._graphs.clear()

    def fresh(self) -> "Graphs":
        """Empty graphs for the same owner (a copy of the owner captures its own)."""
        return Graphs(self.owner, self.max_graphs)

    def __getstate__(self):  # a copied or pickled owner captures afresh (graphs live in one process's GPU)
        return {"owner": self.owner, "max_graphs": self.max_graphs, "running": False, "captures": 0,
                "_graphs": OrderedDict()}


def module_call(module: torch.nn.Module, graphs: Graphs, inputs: tuple):
    """A module's forward on ``inputs`` through its graphs: its parameters become graph inputs too (their
    gradients reach ``.grad`` as usual; an optimiser's in-place update is seen by the next replay)."""
    from torch.func import functional_call

    names, params = zip(*module.named_parameters()) if any(True for _ in module.parameters()) else ((), ())
    n = len(inputs)

    def forward(*tensors):
        return functional_call(module, dict(zip(names, tensors[n:])), tensors[:n])

    return graphs.call(forward, tuple(inputs) + tuple(params), static=names)


def qnode_call(qnode, graphs: Graphs, args: tuple, kwargs: dict):
    """A qnode call through its graphs: tensor arguments are graph inputs, the others part of the key."""
    call = CallArgs(args, kwargs)

    def run(*tensors):
        a, k = call.with_tensors(tensors)
        return qnode(*a, **k)

    return graphs.call(run, tuple(call.tensors), static=(call.static, call.names))


__all__ = ["check_capture", "capture_graphs", "replaying", "Graphs", "module_call", "qnode_call", "CAPTURE_MODES", "MAX_GRAPHS"]

"""A training step's quantum part captured once as CUDA graphs and replayed.

On a GPU a qhybrid step is a few hundred small kernels whose launch cost from Python is many times their
run time (W1 on an H100: 0.9 ms of kernels, 17 ms of host work). Captured, the forward and the backward
are each one graph launch; the inputs are copied into static buffers on every call.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Callable, Sequence

import torch
from torch import nn

from ..devices.tensornet.engines.mixed.trajectories import cuda_generators
from ..errors import CaptureError


def cuda_graph(fn: Callable | nn.Module, sample_args: Sequence[torch.Tensor], *, warmup: int = 3):
    """``fn`` (a QNode, a layer, or any function of tensors built from them) captured as CUDA graphs.

    Args:
        fn: called as ``fn(*args)``; returns a tensor or a tuple of tensors. An ``nn.Module``'s parameters
            are captured too (train them as usual; the optimiser updates them in place).
        sample_args: CUDA tensors with the shapes, dtypes and ``requires_grad`` of every later call.
        warmup: eager calls before capture (they plan the circuit and fill qhybrid's caches).

    The returned callable replays the captured kernels: Python, qhybrid's preprocessing and the checks
    run only during warm-up and capture, so later calls must keep the shapes of ``sample_args`` and the
    circuit's structure (anything else is a new structure: capture it separately). Circuits with finite
    shots, non-unitary user matrices or ``create_graph`` are not capturable (they read values back to the
    host), nor MPS steps (torch's CUDA ``eigh`` reads cuSOLVER's status back to the host); use them uncaptured.
    Noise trajectories are: their generators are registered with the graphs, so every replay draws anew.

    >>> import torch, qhybrid
    >>> layer = qhybrid.ExpQLayer(4, 2).double().cuda()          # doctest: +SKIP
    >>> x = torch.rand(256, 4, dtype=torch.float64, device="cuda")  # doctest: +SKIP
    >>> step = qhybrid.cuda_graph(layer, (x,))                     # doctest: +SKIP
    >>> step(x).sum().backward()                                   # doctest: +SKIP
    """
    if not torch.cuda.is_available():
        raise CaptureError("qhybrid.cuda_graph needs a CUDA GPU (torch.cuda.is_available() is False); call fn directly.")
    args = tuple(sample_args)
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) or not a.is_cuda:
            where = a.device if isinstance(a, torch.Tensor) else type(a).__name__
            raise ValueError(
                f"qhybrid.cuda_graph: sample_args[{i}] is on {where}; every argument must be a CUDA tensor "
                "(captured graphs take tensors only: close over other values in fn)."
            )
    # Python's cyclic collector may run mid-capture and free an earlier capture's graphs (a graph destroyed
    # while a stream captures invalidates that capture): collect first, and not again until capture is done.
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _draws_registered():
            return torch.cuda.make_graphed_callables(fn, args, num_warmup_iters=max(1, int(warmup)))
    except RuntimeError as exc:
        raise CaptureError(
            f"qhybrid.cuda_graph could not capture this step ({exc}). Capture needs a step that never reads a "
            "value back to the host nor copies host data to the GPU: adjoint or backprop, exact results "
            "(no shots), unitary gates. Run it uncaptured instead."
        ) from exc
    finally:
        if collecting:
            gc.enable()


@contextmanager
def _draws_registered():
    """``torch.cuda.CUDAGraph`` as a class whose graphs register the live CUDA generators of qhybrid's noise draws
    as each capture begins (torch's graphs own only the default generator; a draw from any other is refused
    during capture). The warm-up calls before the captures make the generators; a replay then advances them by
    what the captured draws took, as an uncaptured step would."""
    base = torch.cuda.CUDAGraph
    if not hasattr(base, "register_generator_state"):  # a torch without it: capture refuses such draws by name
        yield
        return

    class _Graph(base):
        def capture_begin(self, *args, **kwargs):
            here = torch.cuda.current_device()
            for generator in cuda_generators():
                if generator.device.index in (None, here):
                    self.register_generator_state(generator)
            return super().capture_begin(*args, **kwargs)

    torch.cuda.CUDAGraph = _Graph
    try:
        yield
    finally:
        torch.cuda.CUDAGraph = base

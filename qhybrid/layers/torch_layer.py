"""TorchLayer: any qhybrid qnode ``f(inputs, **weights)`` as an ``nn.Module`` (like ``qml.qnn.TorchLayer``)."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Callable, Mapping, Sequence, Union

import torch
from torch import nn

from ..workflow._capture import capture_graphs, module_call, replaying
from ..workflow.qnode import QNode

InitMethod = Union[Callable[[torch.Tensor], torch.Tensor], Mapping[str, Union[Callable, torch.Tensor]]]
"""A ``torch.nn.init``-style function for every weight, or one function or tensor per weight name."""

DEFAULT_INIT = functools.partial(nn.init.uniform_, a=0.0, b=2 * math.pi)
"""Weights start uniform in ``[0, 2*pi)``, as in ``qml.qnn.TorchLayer``."""


def _normalise_shape(size) -> tuple[int, ...]:
    # qml.qnn.TorchLayer's convention: an int n is (n,), except 1, which is a scalar.
    if isinstance(size, Sequence):
        return tuple(int(s) for s in size)
    return () if int(size) == 1 else (int(size),)


class TorchLayer(nn.Module):
    """Wrap a qnode whose first data argument is called ``inputs`` and whose other arguments are weights.

    Args:
        qnode: a ``@qhybrid.qnode`` (or any callable qnode) with signature ``(inputs, **weights)``.
        weight_shapes: the shape of every weight argument, by name (an int ``n`` means ``(n,)``; ``1`` a scalar).
        init_method: a ``torch.nn.init`` function applied to every weight, or a dict giving a function or an
            initial tensor per weight; default uniform in ``[0, 2*pi)``.

    Keyword Args:
        input_arg: the name of the data argument (``"inputs"``, as PennyLane's).
        static_structure: reuse a trace for repeat calls of the same input shape (a qhybrid qnode only: the
            qnode's own traces where it was built with ``static_structure``, else those of a traced copy,
            ``qnode.traced()``): the new inputs and weights are gathered into the cached circuit without
            running the qnode's Python again; a changed structure is detected and re-traced (``qhybrid.workflow._static``
            says what is checked, and when). False records the circuit on every call.
        capture: ``"cuda-graph"`` to capture each input shape's forward and backward as CUDA graphs and
            replay them (GPU only; see docs/GPU.md); None (default) runs uncaptured.

    Each weight becomes an ``nn.Parameter`` registered under its own name (``layer.w``, state_dict key
    ``"w"``), cast to the dtype and device of the inputs when called.

    >>> import torch, qhybrid, pennylane as qml
    >>> dev = qhybrid.device("tensornet", wires=4)
    >>> @qhybrid.qnode(dev)
    ... def circuit(inputs, w):
    ...     qml.AngleEmbedding(inputs, wires=range(4))
    ...     qml.StronglyEntanglingLayers(w, wires=range(4))
    ...     return [qml.expval(qml.Z(i)) for i in range(4)]
    >>> layer = qhybrid.TorchLayer(circuit, weight_shapes={"w": (2, 4, 3)})
    >>> layer(torch.rand(10, 4)).shape
    torch.Size([10, 4])
    """

    def __init__(
        self,
        qnode: Callable,
        weight_shapes: Mapping[str, Sequence[int] | int],
        init_method: InitMethod | None = None,
        *,
        input_arg: str = "inputs",
        static_structure: bool = True,
        capture: str | None = None,
    ) -> None:
        super().__init__()
        tdev = getattr(getattr(qnode, "device", None), "torch_device", None)
        diff = getattr(qnode, "diff_method", None)
        self._graphs = capture_graphs(capture, "TorchLayer", torch_device=tdev, diff_method=diff)
        shapes = {name: _normalise_shape(size) for name, size in weight_shapes.items()}
        _check_signature(qnode, shapes, input_arg)
        self.qnode = qnode
        self.input_arg = input_arg
        self.weight_shapes = shapes
        self.static_structure = bool(static_structure)
        self._run = qnode.traced() if self.static_structure and isinstance(qnode, QNode) else qnode
        """What a call runs: the qnode, or its traced copy (its own static cache; the qnode's transforms and
        ``capture``, so a qnode's CUDA graphs are kept here too)."""
        for name, shape in shapes.items():
            self.register_parameter(name, nn.Parameter(_initial_weight(name, shape, init_method)))

    @property
    def qnode_weights(self) -> dict[str, nn.Parameter]:
        """The weights by argument name (the same objects as the registered parameters)."""
        return {name: getattr(self, name) for name in self.weight_shapes}

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """Run the qnode on ``inputs`` with the layer's weights.

        Args:
            inputs: ``(batch, n)`` or ``(n,)``; further leading axes are flattened into one batch and
                restored afterwards.

        Returns:
            ``(batch, n_out)`` or ``(n_out,)`` in the dtype of ``inputs``: the qnode's result, with several
            measurements concatenated on the last axis (``[expval, expval]`` gives ``n_out = 2``).

        >>> import torch, qhybrid, pennylane as qml
        >>> @qhybrid.qnode(qhybrid.device("tensornet", wires=2))
        ... def circuit(inputs, w):
        ...     qml.AngleEmbedding(inputs, wires=range(2))
        ...     qml.BasicEntanglerLayers(w, wires=range(2))
        ...     return qml.expval(qml.Z(0)), qml.probs(wires=[0, 1])
        >>> layer = qhybrid.TorchLayer(circuit, {"w": (3, 2)})
        >>> layer(torch.rand(10, 2)).shape, layer(torch.rand(2)).shape
        (torch.Size([10, 5]), torch.Size([5]))
        """
        if replaying(self._graphs):  # capture="cuda-graph": replay
            return module_call(self, self._graphs, (inputs,))
        if not inputs.is_floating_point():
            inputs = inputs.to(torch.get_default_dtype())
        batch_shape = inputs.shape[:-1] if inputs.ndim > 1 else None
        x = inputs.reshape(-1, inputs.shape[-1]) if inputs.ndim > 2 else inputs
        weights = {name: w.to(x) for name, w in self.qnode_weights.items()}
        result = self._run(**{self.input_arg: x}, **weights)
        out = _combine(result, batched=x.ndim > 1, batch=x.shape[0] if x.ndim > 1 else 0)
        if inputs.ndim > 2:
            out = out.reshape(*batch_shape, *out.shape[1:])
        return out.to(inputs.dtype)

    def extra_repr(self) -> str:
        name = getattr(self.qnode, "__name__", type(self.qnode).__name__)
        return f"qnode={name}, weight_shapes={self.weight_shapes}"


def _combine(result, *, batched: bool, batch: int) -> torch.Tensor:
    if isinstance(result, torch.Tensor):
        return result
    if isinstance(result, (list, tuple)) and all(isinstance(r, torch.Tensor) for r in result):
        if batched:
            return torch.cat([r.reshape(batch, math.prod(r.shape[1:])) for r in result], dim=-1)  # batch may be 0
        return torch.cat([r.reshape(-1) for r in result])
    raise TypeError(
        f"TorchLayer needs the qnode to return a tensor or a list/tuple of tensors, got {type(result).__name__}."
    )


def _check_signature(qnode: Callable, shapes: Mapping[str, tuple], input_arg: str) -> None:
    func = getattr(qnode, "func", qnode)
    params = inspect.signature(func).parameters
    if input_arg not in params:
        raise TypeError(
            f"The qnode needs an argument named {input_arg!r} for the data; its arguments are {list(params)}."
        )
    if input_arg in shapes:
        raise ValueError(f"{input_arg!r} is the data argument; leave it out of weight_shapes.")
    kinds = {p.kind for p in params.values()}
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        raise TypeError("The qnode cannot take *args; name every weight argument.")
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        missing = set(params) - set(shapes) - {input_arg}
        extra = set(shapes) - set(params)
        if missing or extra:
            raise ValueError(
                f"weight_shapes must name every non-input argument of the qnode: missing {sorted(missing)}, "
                f"not arguments of the qnode {sorted(extra)}."
            )


def _initial_weight(name: str, shape: tuple, init_method: InitMethod | None) -> torch.Tensor:
    init = DEFAULT_INIT if init_method is None else init_method
    if isinstance(init, Mapping):
        if name not in init:
            raise ValueError(f"init_method has no entry for weight {name!r}.")
        init = init[name]
        if isinstance(init, torch.Tensor):
            if tuple(init.shape) != shape:
                raise ValueError(
                    f"init_method[{name!r}] has shape {tuple(init.shape)}, but weight_shapes says {shape}."
                )
            return init.detach().clone()
    if not callable(init):
        raise TypeError(f"init_method for {name!r} must be callable or a tensor, got {type(init).__name__}.")
    return init(torch.empty(shape))


__all__ = ["TorchLayer", "InitMethod", "DEFAULT_INIT"]

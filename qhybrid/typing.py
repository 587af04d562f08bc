"""Option types and shared aliases used across qhybrid."""

from __future__ import annotations

from typing import Literal, Sequence, Union

import numpy as np
import torch

DiffMethod = Literal["adjoint", "parameter-shift", "best", None]
"""How gradients are computed: reverse mode through the contraction, shift rules, or the device's pick."""

Backend = Literal["torch", "cutensornet", "auto"]
"""Which engine contracts the tensor network."""

Optimizer = Literal["auto", "greedy", "optimal", "cotengra"]
"""Which contraction-path finder plans a network."""

TensorLike = Union[torch.Tensor, np.ndarray, float, complex, int]
"""Anything a gate parameter may be."""

WireLabels = Union[int, Sequence]
"""A wire count or a sequence of wire labels."""

__all__ = ["DiffMethod", "Backend", "Optimizer", "TensorLike", "WireLabels"]

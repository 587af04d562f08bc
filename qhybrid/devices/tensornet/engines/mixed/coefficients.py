"""A Hermitian observable's Pauli coefficients as real numbers or tensors, for the real arithmetic of the
mixed-state engine's readouts.

A Hermitian observable's Pauli coefficients are real, but PennyLane's products of sums carry complex-typed ones
(``qml.prod(H, H)``: the cross term ``Z0 Y1`` with ``0j``, cancelled), and parameter-shift's variance rule measures
such a product. Observables that are not Hermitian never reach an engine (``readout.hermitian`` refuses them).

>>> real_coefficient(0j), real_coefficient(2.5)
(0.0, 2.5)
"""

from __future__ import annotations

import numpy as np
import torch


def real_coefficient(c):
    """``c`` (a Pauli sentence's coefficient) without its imaginary type: a real number, array or tensor."""
    if isinstance(c, torch.Tensor):
        return c.real if c.is_complex() else c
    if isinstance(c, (complex, np.complexfloating)):
        return float(c.real)
    if isinstance(c, np.ndarray) and np.iscomplexobj(c):
        return c.real
    return c


__all__ = ["real_coefficient"]

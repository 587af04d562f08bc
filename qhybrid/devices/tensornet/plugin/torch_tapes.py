"""Tapes that reach the PennyLane face with torch parameters (backprop, or a gradient transform's shifted tapes
at max_diff=1, see ``config.resolve_config``), including gates whose matrix only NumPy builds.

A gate whose ``compute_matrix`` calls NumPy on its parameter (``np.diag([z, z])``: PennyLane's qnn suite,
Strawberry Fields' Kerr) cannot take a torch tensor that requires a gradient. PennyLane's own devices get numpy
tapes there and never see it. Here such tapes run on detached values (right numbers: a first derivative
asked with ``create_graph=True`` is answered), and their results carry a node that refuses, by name, the
derivative they do not have, where a silent zero would otherwise be taken for a second derivative.
"""

from __future__ import annotations

import torch

from ....errors import GradientError

NUMPY_MATRIX_REFUSED = (
    "A second derivative was asked for through a circuit with a gate whose matrix is built with NumPy (its "
    "compute_matrix does not take torch tensors), run as a gradient transform's shifted circuit inside a "
    "backward with create_graph=True: those runs have values but no derivative of their own. Write the gate's "
    "compute_matrix with qml.math (torch-differentiable), or use max_diff=2 in qml.qnode (PennyLane then "
    "shifts the shifted circuits for every order)."
)


def _numpy_only(error: Exception) -> bool:
    return isinstance(error, RuntimeError) and "Can't call numpy() on Tensor that requires grad" in str(error)


def run_torch_tapes(run, plans, params) -> list[tuple]:
    """``run(plans, params)``, torch results per tape; where a gate's matrix needs NumPy, the results of the
    same runs on detached parameters, whose derivative raises :class:`GradientError` (see the module)."""
    try:
        return run(plans, params)
    except RuntimeError as error:
        if not _numpy_only(error):
            raise
    detached = [[p.detach() if isinstance(p, torch.Tensor) else p for p in per] for per in params]
    raw = run(plans, detached)
    wrt = [p for per in params for p in per if isinstance(p, torch.Tensor) and p.requires_grad]
    if not (torch.is_grad_enabled() and wrt):
        return raw
    return [tuple(_NoDerivative.apply(x, *wrt) for x in r) for r in raw]


class _NoDerivative(torch.autograd.Function):
    """``x`` unchanged, tied to the parameters it was computed from; its backward refuses."""

    @staticmethod
    def forward(ctx, x, *params):
        return x.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise GradientError(NUMPY_MATRIX_REFUSED)


__all__ = ["NUMPY_MATRIX_REFUSED", "run_torch_tapes"]

"""The contract every contraction backend keeps (its own module, so the backends and the lookup by name in
the package both import it, and neither imports the other back)."""

from __future__ import annotations

from typing import Sequence

import torch


class Backend:
    """Executes contraction plans on one torch device.

    The contract every backend keeps (the device and ``_simulate`` rely on nothing else):

    * ``contract(plan, operands)`` returns the tensor ``plan.contract(operands)`` returns: the network
      ``plan.inputs -> plan.output`` contracted, with axes in ``plan.output`` order, the operands'
      dtype and the backend's device. ``operands[i]`` carries the indices ``plan.inputs[i]``; an
      extent-1 axis may stand for a larger index (broadcasting), as in ``torch.einsum``.
    * The result is differentiable by torch autograd with respect to every operand that requires
      grad (first order at least), and the gradients live on the operands' device.
    * No host round trip and no device synchronisation on the hot path: work is queued on the current
      CUDA stream and the call returns.
    * Plans are immutable and compared by identity (one plan per network structure). A backend may
      keep state per plan (a cuTensorNet network, an autotuned kernel choice) but must not keep plans
      alive: the device's plan cache decides their lifetime.
    * Failures name the offending thing and the fix (a missing library, an operand on the wrong
      device, a wrong operand count).
    * ``max_memory`` (bytes, the device option; None: the backend's own default) bounds what one
      contraction may allocate beyond its operands and result. The plan's largest intermediate was
      checked against it already; a backend that allocates more (cuTensorNet's workspace) keeps that
      within it too, or refuses with ``ContractionTooLargeError`` before allocating.

    Subclasses set ``name`` and implement :meth:`contract`; :meth:`clear` drops per-plan state.
    """

    name: str = ""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)

    def contract(
        self, plan, operands: Sequence[torch.Tensor], *, max_memory: float | None = None, keep: bool = True
    ) -> torch.Tensor:
        """The contraction of ``operands`` along ``plan``; differentiable w.r.t. the operands; ``keep``: whether
        intermediates may be kept for the backward (else recomputed there, where the backend can)."""
        raise NotImplementedError

    def clear(self) -> None:
        """Forget per-plan state (cached networks, tuning). The next call rebuilds what it needs."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={str(self.device)!r})"

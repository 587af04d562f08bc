"""The torch backend: the plan's pairwise ``torch.einsum`` steps, on whatever device the operands are.

One autograd node per contraction (``tree_grad``): its backward walks the contraction tree in reverse with
the forward's intermediates (the adjoint JPC relies on this), one einsum per operand that needs a cotangent. Nothing leaves the device and nothing
synchronises: on CUDA each step is queued on the current stream.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ._base import Backend
from ..engines.network.tree_grad import contract_tree
from ..engines.statevector import allocator


class TorchBackend(Backend):
    """Replays ``plan.contract`` (pairwise ``torch.einsum``) on CPU or CUDA tensors.

    >>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
    >>> plan = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
    >>> TorchBackend("cpu").contract(plan, [torch.ones(2, 3), torch.ones(3, 4)])[0, 0]
    tensor(3.)
    """

    name = "torch"

    def contract(
        self, plan, operands: Sequence[torch.Tensor], *, max_memory: float | None = None, keep: bool = True
    ) -> torch.Tensor:
        # max_memory: the plan's largest intermediate was checked against it when the plan was made
        if len(operands) != len(plan.inputs):
            raise ValueError(
                f"The plan contracts {len(plan.inputs)} tensors but {len(operands)} operands were given; "
                "pass one operand per network tensor, in the plan's order."
            )
        if plan.largest_intermediate * 16 > allocator.MALLOC_MMAP_THRESHOLD and operands[0].device.type == "cpu":
            # intermediates of hundreds of MiB: reuse the heap's pages (bounded by complex128's 16 bytes first,
            # so the many small contractions of a step pass by with one comparison)
            allocator.tune_for_intermediates(plan.largest_intermediate * max(o.element_size() for o in operands))
        return contract_tree(plan, operands, keep, max_memory)


__all__ = ["TorchBackend"]

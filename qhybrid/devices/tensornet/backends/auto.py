"""``backend="auto"`` on a GPU: cuTensorNet for the contractions large enough to win there, torch for the rest.

cuTensorNet pays a fixed cost per network (building it, its workspace, one library call per contraction) that
the many small networks of a light-cone or cone-class step never earn back: on an H200 (2026-11-27) Q100p3's
and L8p3's steps ran 15x and 4x slower through it than through torch-CUDA on the same plans. So ``auto`` keeps
everything torch batches together (it is a :class:`TorchBackend` to the engines that batch networks) and sends
one plan to cuTensorNet only where its tree costs at least ``CUTENSORNET_MIN_FLOPS`` (deep trees such as L8p4's
classes).

>>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
>>> plan = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
>>> uses_cutensornet(plan)   # a tiny tree stays in torch
False
"""

from __future__ import annotations

from typing import Sequence

import torch

from .torch_backend import TorchBackend

CUTENSORNET_MIN_FLOPS = 2**30
"""A plan whose tree costs fewer flops than this is contracted by torch under ``backend="auto"``: about 1e9
flops, tens of microseconds of H200 arithmetic, where cuTensorNet's per-call cost is of the same order."""


def uses_cutensornet(plan) -> bool:
    """Whether ``auto`` sends ``plan`` to cuTensorNet (where it can run)."""
    return plan.flops >= CUTENSORNET_MIN_FLOPS


class AutoBackend(TorchBackend):
    """torch for small plans and for the networks engines batch together; cuTensorNet for large trees."""

    name = "auto"

    def __init__(self, device: torch.device | str, cutensornet):
        super().__init__(device)
        self.cutensornet = cutensornet

    def contract(
        self, plan, operands: Sequence[torch.Tensor], *, max_memory: float | None = None, keep: bool = True
    ) -> torch.Tensor:
        if uses_cutensornet(plan):
            return self.cutensornet.contract(plan, operands, max_memory=max_memory, keep=keep)
        return super().contract(plan, operands, max_memory=max_memory, keep=keep)

    def clear(self) -> None:
        self.cutensornet.clear()


__all__ = ["AutoBackend", "CUTENSORNET_MIN_FLOPS", "uses_cutensornet"]

"""Errors particular to the Aer device (both are qhybrid errors, so ``except QhybridError`` catches them)."""

from __future__ import annotations

from ...errors import QhybridError


class GPUUnavailableError(QhybridError, RuntimeError):
    """``device="GPU"`` was asked for, but qiskit-aer-gpu or a CUDA GPU is missing."""


class AerSimulationError(QhybridError, RuntimeError):
    """Aer reported a failed job or experiment; the message carries Aer's own status."""


__all__ = ["GPUUnavailableError", "AerSimulationError"]

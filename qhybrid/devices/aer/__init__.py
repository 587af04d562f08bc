"""The Qiskit Aer device ``qhybrid.aer`` (qiskit-aer on CPU, qiskit-aer-gpu on GPU)."""

from ._errors import AerSimulationError, GPUUnavailableError
from .device import AerDevice

__all__ = ["AerDevice", "GPUUnavailableError", "AerSimulationError"]

"""The Qiskit Aer device ``qhybrid.aer`` (qiskit-aer on CPU, qiskit-aer-gpu on GPU)."""

from ._errors import AerSimulationError, GPUUnavailableError
from ._noise import channel_error
from .device import AerDevice

__all__ = ["AerDevice", "GPUUnavailableError", "AerSimulationError", "channel_error"]

"""The tensor-network simulator device ``qhybrid.tensornet``."""

from .device import TensorNetworkDevice

__all__ = ["TensorNetworkDevice"]

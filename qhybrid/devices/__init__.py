"""qhybrid devices (also PennyLane plugins)."""

from .tensornet import TensorNetworkDevice

__all__ = ["TensorNetworkDevice"]

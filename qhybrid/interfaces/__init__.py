"""Machine-learning framework boundaries (torch)."""

from . import torch
from .torch import ExecuteTapes, execute

__all__ = ["torch", "ExecuteTapes", "execute"]

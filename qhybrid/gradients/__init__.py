"""Jacobian-product calculators (adjoint through the contraction, parameter-shift) and launchers."""

from .adjoint_tn import AdjointTN, Backprop
from .jpc import JacobianProductCalculator, get_jpc
from .launcher import Launcher, MultiDeviceLauncher
from .parameter_shift import ParameterShift, shift_rule

__all__ = ["JacobianProductCalculator", "AdjointTN", "Backprop", "ParameterShift", "Launcher", "MultiDeviceLauncher", "get_jpc", "shift_rule"]

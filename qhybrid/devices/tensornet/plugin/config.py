"""How qhybrid.tensornet answers PennyLane's execution config: which gradient method runs, device VJPs for
adjoint, deferred mid-circuit measurements; and the notes and refusals where a request is served another
way or cannot be served (a second derivative PennyLane's workflow would silently make zero)."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Sequence

import torch
from pennylane.devices import ExecutionConfig
from pennylane.exceptions import DeviceError
from pennylane.math import Interface

from ....errors import GradientError, QhybridWarning
from .autograd import is_traced

BACKPROP_INTERFACES = frozenset({Interface.TORCH, Interface.AUTOGRAD, Interface.AUTO})
"""Interfaces where backprop through this device is differentiable to every order, so ``"best"`` picks it
(``"auto"`` reaches the device only from ``qml.workflow.construct_execution_config``; a QNode call resolves
it first, to one of these for torch or autograd arguments).
It is also the faster first derivative there: on up to 20 wires it runs the same adjoint program as one
autograd node, without the second forward pass a device VJP costs; and a device VJP, which PennyLane runs
on numpy tapes, has no derivative of its own (a Hessian through it would be zero)."""

MCM_METHODS = frozenset({None, "device", "deferred"})
"""Mid-circuit measurements run deferred: as controlled gates on extra wires (qml.defer_measurements)."""

_WARNED: set[str] = set()


def gives_torch(config: ExecutionConfig | None) -> bool:
    """Whether the device hands PennyLane torch results: under the torch interface, except for a gradient transform's
    numpy tapes (its results are joined with numpy's ``+``, as default.qubit's numpy ones)."""
    if config is None or config.interface != Interface.TORCH:
        return False
    transform = config.gradient_method is not None and not isinstance(config.gradient_method, str)
    return not (transform and config.convert_to_numpy)


def _finite_difference_fallback(circuit) -> bool:
    """Whether some operator of ``circuit`` is differentiated by finite differences under parameter-shift beside
    several measurements (where PennyLane joins the two kinds of results per measurement; one measurement's join
    takes torch results, and keeps their derivatives for create_graph=True)."""
    if circuit is None or len(circuit.measurements) < 2:
        return False
    return any(getattr(op, "grad_method", None) == "F" and op.num_params for op in circuit.operations)


def warn_once(key: str, message: str) -> None:
    """``message`` as a :class:`QhybridWarning`, the first time ``key`` is seen in this process."""
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, QhybridWarning, stacklevel=4)


def resolve_config(device, config: ExecutionConfig | None, circuit=None) -> ExecutionConfig:
    """``config`` with the gradient method this device runs and the settings that go with it.

    ``"best"``/``"device"``: backprop where the interface can differentiate it to every order (torch,
    autograd) or more than one order is asked for, else adjoint. ``"adjoint"``: device VJPs, one reverse
    pass through the simulation per backward call; for higher orders (``max_diff > 1``) backprop, whose
    first derivative is itself differentiable.
    """
    config = config or ExecutionConfig()
    updates = {}
    requested = method = config.gradient_method
    higher = config.derivative_order > 1
    if method in ("best", "device"):
        method = "backprop" if config.interface in BACKPROP_INTERFACES or higher else "adjoint"
    elif method == "adjoint" and higher and config.interface in BACKPROP_INTERFACES:
        method = "backprop"
    if method != requested:
        updates["gradient_method"] = method
    if config.use_device_gradient is None or method != requested:
        updates["use_device_gradient"] = method in {"adjoint", "backprop"}
    if method == "adjoint":
        _note_ignored_options(config, explicit=requested == "adjoint")
        updates["use_device_jacobian_product"] = True
        updates["grad_on_execution"] = False
    elif method == "backprop":
        updates["use_device_jacobian_product"] = False
        updates["convert_to_numpy"] = False
    else:  # a gradient transform: at max_diff=1 its shifted tapes reach the device with torch parameters, so a
        # backward pass with create_graph=True differentiates them (numpy tapes there have no derivative of their
        # own). From max_diff=2 PennyLane nests its torch boundary for every order and caches results by tape
        # hash (cache="auto"): torch tapes there got cached results with another graph, or none, back
        # (finite-diff Hessians with -g/h on the diagonal, issue 41); numpy tapes are what that nesting expects
        # (where a parameter falls back to finite differences (an operator's grad_method "F", a qml.cond),
        # PennyLane's parameter-shift joins the two kinds of results with numpy's ``+`` and failed on torch ones)
        if config.interface == Interface.TORCH and not higher and not _finite_difference_fallback(circuit):
            updates["convert_to_numpy"] = False
        if config.use_device_jacobian_product is None:
            updates["use_device_jacobian_product"] = False
    if config.grad_on_execution is None:
        updates.setdefault("grad_on_execution", False)
    mcm = config.mcm_config
    if mcm.mcm_method not in MCM_METHODS:
        raise DeviceError(
            f"mcm_method={mcm.mcm_method!r} is not supported by {device.name}; use mcm_method='deferred' "
            "(mid-circuit measurements become controlled gates on extra wires)."
        )
    updates["mcm_config"] = replace(mcm, mcm_method="deferred")
    return replace(config, **updates)


def _note_ignored_options(config: ExecutionConfig, *, explicit: bool) -> None:
    """Adjoint always answers with device VJPs in the backward pass: say so, once, where asked otherwise."""
    if config.grad_on_execution is True:
        warn_once(
            "grad_on_execution",
            "qhybrid.tensornet computes diff_method='adjoint' derivatives as device VJPs in the backward "
            "pass; grad_on_execution=True (Jacobians computed with the forward pass) is not used. The "
            "derivatives are the same.",
        )
    if explicit and config.use_device_jacobian_product is False:
        warn_once(
            "device_vjp",
            "qhybrid.tensornet answers diff_method='adjoint' with device VJPs (one reverse pass per backward "
            "call, where a Jacobian costs one per output element), so device_vjp=False is not used; the "
            "derivatives are the same. PennyLane's default device_vjp=False cannot be told from an explicit "
            "one: pass device_vjp=True to say it and silence this note.",
        )


def _in_recording_backward() -> bool:
    """Whether this runs inside a backward pass that records a graph (``create_graph=True``: torch runs
    backward functions with grad mode on only then)."""
    return torch.is_grad_enabled() and torch._C._current_graph_task_id() != -1


_SECOND_DERIVATIVE = (
    "A second derivative was asked for (a backward pass with create_graph=True, e.g. "
    "torch.autograd.functional.hessian), but "
)
_FIXES = (
    " Use max_diff=2 in qml.qnode (qhybrid.tensornet then runs backprop, differentiable to any order), "
    "diff_method='backprop' (or the default 'best'), or qhybrid.qnode."
)


def refuse_second_derivative_of_vjp() -> None:
    """Called by the device's VJP: inside a recording backward pass its answer would need a derivative."""
    if _in_recording_backward():
        raise GradientError(
            _SECOND_DERIVATIVE + "PennyLane gives diff_method='adjoint' device VJPs numpy tapes, so the first "
            "derivative has no derivative of its own: the answer would silently be zero." + _FIXES
        )


def refuse_second_derivative_of_numpy_tapes(tapes: Sequence) -> None:
    """Called by ``execute``: numpy tapes run inside a recording backward pass are a gradient transform's
    shifted circuits at max_diff=1, whose results PennyLane does not differentiate."""
    if not _in_recording_backward():
        return
    if any(isinstance(p, torch.Tensor) or is_traced(p) for t in tapes for p in t.get_parameters(trainable_only=False)):
        return
    raise GradientError(
        _SECOND_DERIVATIVE + "PennyLane runs a gradient transform's shifted circuits (diff_method="
        "'parameter-shift' and the like, at max_diff=1) without derivatives: the answer would silently be "
        "zero." + _FIXES
    )

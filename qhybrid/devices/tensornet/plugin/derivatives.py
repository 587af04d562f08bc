"""PennyLane's derivative API for the tensornet device (compute_vjp, compute_derivatives): tapes planned for\nreadout, one forward through the registered VJP calculator, cotangents mapped to the core tape's results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
import numpy as np
import pennylane as qml
import torch
from pennylane.tape import QuantumScript
from ....errors import GradientError
from ...._variant import Variant, tape_parameters
from ..._protocol import vjp_calculator
from ..readout.readout import ReadoutPlan, plan_readout
from .conversions import _to_numpy, _to_tensor


@dataclass
class _DerivativeTape:
    """A tape set up for AdjointTN: its readout plan, its core variant, and which of its trainable
    parameters (``positions``, among ``tape.trainable_params``) are differentiated as ``trainable``
    (indices into the variant's parameters); the others are integers, whose derivatives are zero."""

    plan: ReadoutPlan
    variant: Variant
    trainable: list
    positions: list
    zeros: list

    def per_parameter(self, values: list, fill: list | None = None) -> list:
        """One entry per trainable parameter of the tape: ``values`` where differentiated, else zeros."""
        out = list(self.zeros if fill is None else fill)
        for k, v in zip(self.positions, values):
            out[k] = v
        return out


class _ParameterVJPs(tuple):
    """One tape's VJPs, one array per trainable parameter (shapes may differ: broadcast and scalar).

    PennyLane's torch interface tests each tape's VJPs for emptiness with ``np.squeeze(vjps)``, which
    fails on arrays of different shapes; this tuple answers it with one entry per parameter.
    """

    def squeeze(self, axis=None):
        return np.zeros(len(self))



def _core_params(plan: ReadoutPlan, params: Sequence) -> list:
    return [p for p, j in zip(params, plan.param_map) if j is not None]


def _per_measurement(cotangent, n_meas: int) -> list:
    return [cotangent] if n_meas == 1 else list(cotangent)


def _core_cotangents(plan: ReadoutPlan, core: Sequence[torch.Tensor], cots: Sequence, *, torch_convention=False):
    """Cotangents of the core tape's results from those of the tape's measurements.

    PennyLane's cotangent of a complex result is dL/dz; torch's backward wants dL/dz* (its conjugate).
    Measurements read off the state pass their cotangents back through that read-out.
    """
    dy = [torch.zeros_like(c) for c in core]
    for i, cot in zip(plan.core_index, cots):
        if i is not None:
            dy[i] = dy[i] + _as_cotangent(cot, core[i], torch_convention)
    if plan.needs_state:
        psi = core[0].detach().requires_grad_(True)
        with torch.enable_grad():
            outs = plan.assemble([psi] + [c.detach() for c in core[1:]])
        pairs = [
            (outs[m], _as_cotangent(cot, outs[m], torch_convention))
            for m, (i, cot) in enumerate(zip(plan.core_index, cots))
            if i is None and outs[m].requires_grad
        ]
        if pairs:
            (g,) = torch.autograd.grad([p[0] for p in pairs], [psi], [p[1] for p in pairs], allow_unused=True)
            if g is not None:
                dy[0] = dy[0] + g
    return dy


def _as_cotangent(cot, like: torch.Tensor, torch_convention: bool) -> torch.Tensor:
    """``cot`` as a tensor of ``like``'s shape, dtype and device (conjugated for torch if complex)."""
    t = cot if isinstance(cot, torch.Tensor) else torch.as_tensor(np.asarray(qml.math.unwrap(cot)))
    if t.is_complex() and not like.is_complex():
        t = t.real
    t = t.to(device=like.device, dtype=like.dtype)
    t = t.reshape(like.shape) if t.numel() == like.numel() else t.expand(like.shape)
    return t.conj() if like.is_complex() and not torch_convention else t
def derivative_tape(device, tape: QuantumScript) -> _DerivativeTape:
    """The tape's readout plan, its core variant and which core parameters are trainable."""
    plan = plan_readout(tape, device.wires)
    params = [_to_tensor(p) for p in _core_params(plan, tape_parameters(tape))]
    trainable, positions = [], []
    for k, i in enumerate(tape.trainable_params):
        j = plan.param_map[i]
        if j is None:
            raise GradientError(
                f"Parameter {i} of the tape belongs to the observable of a measurement that "
                f"{device.name} reads off the state; it cannot be trainable with adjoint. Use backprop."
            )
        if params[j].is_floating_point() or params[j].is_complex():  # integers (basis states): 0
            trainable.append(j)
            positions.append(k)
    zeros = [np.zeros(np.shape(params[plan.param_map[i]])) for i in tape.trainable_params]
    core = plan.core_tape
    if trainable and max(trainable) >= sum(len(op.data) for op in core.operations):
        # PennyLane hands the device NumPy data: an observable's coefficient read as a number is a constant of
        # the readout, whose derivative was 0; bound as the tensor the reverse pass differentiates, it is read
        # from the parameters
        core = core.bind_new_parameters(params, list(range(len(params))))
    return _DerivativeTape(plan, Variant(core, params), trainable, positions, zeros)


def jacobian(device, tape: QuantumScript):
    """PennyLane's Jacobian structure for one tape, from one VJP per output element (one forward)."""
    d = derivative_tape(device, tape)
    plan, variant, trainable = d.plan, d.variant, d.trainable
    n_meas, n_params = len(tape.measurements), len(tape.trainable_params)
    jpc = vjp_calculator(device)
    with torch.no_grad():
        (core,), saved = jpc.forward([variant], [trainable])
        outputs = plan.assemble(core)
        per_meas = []
        for m, out in enumerate(outputs):
            rows = [[] for _ in trainable]
            units = (1.0, 1j) if out.is_complex() else (1.0,)
            for e in range(out.numel()):
                parts = []
                for unit in units:
                    cot = [torch.zeros_like(o) for o in outputs]
                    cot[m].view(-1)[e] = unit
                    dy = _core_cotangents(plan, core, cot, torch_convention=True)
                    parts.append(jpc.compute_vjp([variant], [trainable], [dy], saved)[0])
                for k in range(len(trainable)):
                    rows[k].append(parts[0][k] if len(parts) == 1 else parts[0][k] + 1j * parts[1][k])
            jac = [
                _to_numpy(torch.stack(rows[k]).reshape(tuple(out.shape) + tuple(variant.params[j].shape)))
                if rows[k]
                else np.zeros(tuple(out.shape) + tuple(variant.params[j].shape))  # an empty batch
                for k, j in enumerate(trainable)
            ]
            full = [np.zeros(tuple(out.shape) + z.shape) for z in d.zeros]
            jac = d.per_parameter(jac, full)
            per_meas.append(jac[0] if n_params == 1 else tuple(jac))
    if not n_params:
        per_meas = [() for _ in range(n_meas)]
    return per_meas[0] if n_meas == 1 else tuple(per_meas)


def device_vjps(device, circuits, cotangents) -> tuple:
    """PennyLane's ``compute_vjp`` for ``device``: one forward and one reverse pass per tape through the
    registered VJP calculator; per tape a tuple with one array per trainable parameter."""
    prepared = [derivative_tape(device, t) for t in circuits]
    jpc = vjp_calculator(device)
    variants, trainable = [d.variant for d in prepared], [d.trainable for d in prepared]
    with torch.no_grad():
        results, saved = jpc.forward(variants, trainable)
        dy = [
            _core_cotangents(d.plan, res, _per_measurement(cot, len(d.plan.tape.measurements)))
            for d, res, cot in zip(prepared, results, cotangents)
        ]
        vjps = jpc.compute_vjp(variants, trainable, dy, saved)
    return tuple(_ParameterVJPs(d.per_parameter([_to_numpy(g) for g in per])) for d, per in zip(prepared, vjps))

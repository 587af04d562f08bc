"""ParameterShift: exact gradients from shifted executions, on any device, shots included.

See parameter_shift.md for the rules. Every shifted copy of every tape is a variant (no operator is
copied) and all of them go to the device in one launcher call; a tensornet device then stacks the
shifted gates along one shift index and contracts them together. Broadcast tapes are shifted as a
whole: each batch element's result depends only on its own data, so one shifted execution gives the
derivative for every element, and trainable broadcast inputs get per-element gradients (PennyLane
raises NotImplementedError there, issues #4462 / #6078).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pennylane as qml
import torch

from .._variant import Variant, parameter_owners
from ..errors import GradientError
from .jpc import JacobianProductCalculator, Results
from .launcher import Launcher


def shift_rule(op: qml.operation.Operator, k: int) -> np.ndarray:
    """Rows ``[coefficient, multiplier, shift]`` such that d f/d p_k = sum c * f(m * p_k + s).

    >>> shift_rule(qml.RX(0.1, 0), 0)
    array([[ 0.5       ,  1.        ,  1.57079633],
           [-0.5       ,  1.        , -1.57079633]])
    """
    return _cached_rule(type(op), op.name, k, len(op.wires), repr(op.hyperparameters), op)


_RULES: dict[tuple, np.ndarray] = {}


def _cached_rule(cls, name, k, n_wires, hyper, op) -> np.ndarray:
    key = (cls, name, k, n_wires, hyper)
    rule = _RULES.get(key)
    if rule is None:
        rule = _make_rule(op, k)
        _RULES[key] = rule
    return rule


def _make_rule(op, k: int) -> np.ndarray:
    if op.grad_method != "A":
        raise GradientError(
            f"{op.name} parameter {k} has no parameter-shift rule (grad_method={op.grad_method!r}). "
            "Use diff_method='adjoint', make that parameter non-trainable, or decompose the operator."
        )
    recipe = op.grad_recipe[k] if op.grad_recipe is not None else None
    if recipe is not None:
        return np.asarray(recipe, dtype=float).reshape(-1, 3)
    try:
        freqs = op.parameter_frequencies[k]
    except Exception as exc:  # PennyLane raises several kinds here
        raise GradientError(
            f"{op.name} parameter {k}: no shift rule could be derived ({exc}). Use diff_method='adjoint'."
        ) from exc
    rows = np.asarray(qml.gradients.generate_shift_rule(freqs), dtype=float).reshape(-1, 2)  # [c, s]
    return np.stack([rows[:, 0], np.ones(len(rows)), rows[:, 1]], axis=1)


class ParameterShift(JacobianProductCalculator):
    """VJPs from parameter-shift rules; forward and shifted runs each go through a launcher.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    >>> tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])
    >>> ps = ParameterShift(Launcher(dev))
    >>> ps.compute_vjp([Variant.of(tape)], [[0]], [[torch.tensor(1.0, dtype=torch.float64)]])
    [(tensor(-0.2955, dtype=torch.float64),)]
    """

    name = "parameter-shift"

    def __init__(self, launcher: Launcher, gradient_launcher: Launcher | None = None):
        self.launcher = launcher
        self.gradient_launcher = gradient_launcher or launcher

    def forward(self, variants: Sequence[Variant], trainable) -> tuple[Results, Any]:
        with torch.no_grad():
            return self.launcher.run(variants), None

    def _shifted(self, variants, trainable):
        """All shifted variants, and for each (variant, trainable position) its rows in that list."""
        shifted: list[Variant] = []
        layout: list[list[tuple[list[float], range, bool]]] = []
        owners_memo: dict[int, list] = {}
        for v, tr in zip(variants, trainable):
            owners = owners_memo.get(id(v.tape))
            if owners is None:
                owners = owners_memo[id(v.tape)] = parameter_owners(v.tape)
            entries = []
            for j in tr:
                op_index, k = owners[j]
                if op_index < 0:
                    raise GradientError(
                        "Trainable observable parameters (e.g. Hamiltonian coefficients) have no "
                        "parameter-shift rule; use diff_method='adjoint' or make them non-trainable."
                    )
                op = v.tape.operations[op_index]
                p = v.params[j]
                batched = _is_batched(op, k, p)
                if not batched and torch.as_tensor(p).ndim > 0:
                    raise GradientError(
                        f"{op.name} parameter {k} has shape {tuple(torch.as_tensor(p).shape)}; parameter-shift "
                        "differentiates scalar (or broadcast) parameters only. Use diff_method='adjoint'."
                    )
                rule = shift_rule(op, k)
                start = len(shifted)
                for _, mult, shift in rule:
                    params = list(v.params)
                    params[j] = p * mult + shift if mult != 1 else p + shift
                    shifted.append(Variant(v.tape, params))
                entries.append((rule[:, 0].tolist(), range(start, len(shifted)), batched))
            layout.append(entries)
        return shifted, layout

    def compute_vjp(self, variants, trainable, dy, saved=None):
        shifted, layout = self._shifted(variants, trainable)
        if torch.is_grad_enabled():
            from ..interfaces.torch import execute_variants

            # create_graph: the shifted runs are themselves differentiable, by the same rule
            results = execute_variants(shifted, ParameterShift(self.gradient_launcher))
        else:
            results = self.gradient_launcher.run(shifted)
        out = []
        for v, tr, entries, dys in zip(variants, trainable, layout, dy):
            grads = []
            for j, (coeffs, rows, batched) in zip(tr, entries):
                total = None
                for m, d in enumerate(dys):
                    jac = sum(c * results[r][m] for c, r in zip(coeffs, rows))
                    prod = _contract(d, jac, batched)
                    total = prod if total is None else total + prod
                p = v.params[j]
                grads.append(total.reshape(torch.as_tensor(p).shape).to(p.dtype))
            out.append(tuple(grads))
        return out


def _is_batched(op, k: int, p) -> bool:
    if op.batch_size is None:
        return False
    return torch.as_tensor(p).ndim > op.ndim_params[k]


def _contract(dy: torch.Tensor, jac: torch.Tensor, batched: bool) -> torch.Tensor:
    """<dy, jac>, summed over every axis except the leading batch axis of a broadcast parameter."""
    prod = dy.conj() * jac if jac.is_complex() else dy * jac
    prod = prod.real if prod.is_complex() else prod
    if batched:
        return prod.reshape(prod.shape[0], -1).sum(-1)
    return prod.sum()

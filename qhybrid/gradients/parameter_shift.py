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

from pennylane.measurements import DensityMatrixMP, StateMP, VarianceMP

from .._variant import Variant, parameter_owners
from ..devices.tensornet._gates import rebound
from ..devices.tensornet._structure import may_be_non_unitary, settings_repr
from ..devices._constants import literal
from ..errors import GradientError
from ._execute import execute_variants
from .jpc import JacobianProductCalculator, Results, register_jpc
from .launcher import Launcher
from .frequencies import distinct_frequencies, generator_frequencies
from .observable_shift import coefficient_rule


def shift_rule(op: qml.operation.Operator, k: int) -> np.ndarray:
    """Rows ``[coefficient, multiplier, shift]`` such that d f/d p_k = sum c * f(m * p_k + s).

    >>> shift_rule(qml.RX(0.1, 0), 0)
    array([[ 0.5       ,  1.        ,  1.57079633],
           [-0.5       ,  1.        , -1.57079633]])
    """
    held = op.hyperparameters  # (a property: read once)
    key = settings_repr(op)  # (a held operator by kind and settings: its repr would print its values)
    if held and any(isinstance(v, qml.operation.Operator) for v in held.values()):
        # an operator-valued hyperparameter (an Evolution's generator) prints its coefficients rounded: the
        # rule is keyed by their exact values
        key = (key, _held_data(op, held))
    return _cached_rule(type(op), op.name, k, len(op.wires), key, op)


def _held_data(op, held: dict) -> tuple:
    """The exact values of the data of the operators ``op`` holds that are not its own parameters (a controlled
    gate's base reads the gate's own angle, which no rule depends on: nothing read; an Evolution's generator's
    coefficients, which its rule does)."""
    own = {id(d) for d in op.data}
    return tuple(
        tuple(np.asarray(qml.math.unwrap(qml.math.detach(d)), dtype=complex).ravel().tolist())
        for v in held.values() if isinstance(v, qml.operation.Operator)
        for d in v.data if id(d) not in own
    )


_ANALYTIC = "Use diff_method='adjoint' or 'backprop' on qhybrid.tensornet with exact results (shots=None)"
"""The way to a derivative that no shift rule gives: the differentiated simulation, which neither finite shots nor
qhybrid.aer offers (a bare "use adjoint" sent users with shots back here)."""

_RULES: dict[tuple, np.ndarray] = {}


def _cached_rule(cls, name, k, n_wires, hyper, op) -> np.ndarray:
    key = (cls, name, k, n_wires, hyper)
    rule = _RULES.get(key)
    if rule is None:
        rule = _make_rule(op, k)
        _RULES[key] = rule
    return rule


def _one_element(p):
    """The first element of a batched parameter; of an empty batch, a zero of its element's shape (the rule is the
    same for every value: an empty batch crashed here)."""
    if len(p):
        return p[0]
    return p.new_zeros(p.shape[1:]) if isinstance(p, torch.Tensor) else np.zeros(np.shape(p)[1:])


def _make_rule(op, k: int) -> np.ndarray:
    if op.batch_size is not None:  # the rule of one element (PennyLane asks a broadcast Evolution's generator a bool)
        op = rebound(op, [_one_element(p) if _is_batched(op, j, p) else p for j, p in enumerate(op.data)])
    if may_be_non_unitary(op):  # (a rule from a generator, or a decomposition into rotations, assumes unitarity)
        raise GradientError(
            f"{op.name} on wires {op.wires.tolist()} is not unitary for every value of its trainable parameter {k}: "
            f"parameter-shift rules hold for unitary gates only. {_ANALYTIC}"
        )
    try:
        method = getattr(op, "grad_method", None)
    except (ValueError, RuntimeError):  # (an Evolution reads its generator's eigenvalues of tensor coefficients)
        method = "A" if generator_frequencies(op) is not None else None
    if method != "A":
        raise GradientError(
            f"{op.name} parameter {k} has no parameter-shift rule (grad_method={method!r}). "
            f"{_ANALYTIC}, make that parameter non-trainable, or decompose the operator."
        )
    recipe = op.grad_recipe[k] if getattr(op, "grad_recipe", None) is not None else None
    if recipe is not None:
        return np.asarray(recipe, dtype=float).reshape(-1, 3)
    freqs = generator_frequencies(op)
    if freqs is None:
        try:
            freqs = op.parameter_frequencies[k]
        except Exception as exc:  # PennyLane raises several kinds here
            raise GradientError(
                f"{op.name} parameter {k}: no shift rule could be derived ({exc}). {_ANALYTIC}."
            ) from exc
    freqs = distinct_frequencies(freqs)
    if not freqs:  # a generator without gaps (GlobalPhase's): no expectation value depends on it
        return np.zeros((0, 3))
    rows = np.asarray(qml.gradients.generate_shift_rule(freqs), dtype=float).reshape(-1, 2)  # [c, s]
    return np.stack([rows[:, 0], np.ones(len(rows)), rows[:, 1]], axis=1)


@register_jpc
class ParameterShift(JacobianProductCalculator):
    """VJPs from parameter-shift rules; forward and shifted runs each go through a launcher.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    >>> tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])
    >>> ps = ParameterShift(Launcher(dev))
    >>> (vjp,), = ps.compute_vjp([Variant.of(tape)], [[0]], [[torch.tensor(1.0, dtype=torch.float64)]])
    >>> round(float(vjp), 4)  # -sin(0.3)
    -0.2955
    """

    name = "parameter-shift"

    def __init__(self, launcher: Launcher, gradient_launcher: Launcher | None = None):
        self.launcher = launcher
        self.gradient_launcher = gradient_launcher or launcher

    @classmethod
    def for_device(cls, device, gradient_device=None) -> "ParameterShift":
        return cls(Launcher(device), None if gradient_device is None else Launcher(gradient_device, device_shots=True))

    def forward(self, variants: Sequence[Variant], trainable) -> tuple[Results, Any]:
        with torch.no_grad():
            return self.launcher.run(variants), None

    def _shifted(self, variants, trainable):
        """All runs the VJP needs: shifted variants of each tape's linear form, plus one unshifted run
        of each tape that measures a variance; and for each variant where its rows sit in that list."""
        shifted: list[Variant] = []
        layout = []
        memo: dict[int, tuple] = {}
        real_dtype = _compute_real_dtype(self.gradient_launcher.device)  # the shifted angles' precision
        for v, tr in zip(variants, trainable):
            info = memo.get(id(v.tape))
            if info is None:
                info = memo[id(v.tape)] = (parameter_owners(v.tape), *_linear_form(v.tape))
            owners, tape, recipe, n_ops = info
            if tape is v.tape:  # the observables' values are this variant's (a cached tape holds its first call's)
                tail = list(v.params[n_ops:])
            else:  # variances rewritten as O and O @ O: those of the tape bound to this variant's observable values
                bound = v.with_observables_bound(n_ops).tape
                tape = tape if bound is v.tape else _linear_form(bound)[0]  # (the same: its form is made already)
                tail = [p for mp in tape.measurements if mp.obs is not None for p in mp.obs.data]
            mean_row = None
            if any(r[0] == "var" for r in recipe):
                mean_row = len(shifted)
                shifted.append(Variant(tape, list(v.params[:n_ops]) + tail))
            entries = []
            todo = []  # (position, multiplier, shift) of every shifted run of this variant
            base = list(v.params[:n_ops]) + tail
            for j in tr:
                op_index, k = owners[j]
                if op_index < 0:  # an observable's coefficient: its expectation is affine in it
                    rule = coefficient_rule(v.tape, tape, j, n_ops)
                    start = len(shifted) + len(todo)
                    todo.extend((j, mult, shift) for _, mult, shift in rule)
                    entries.append((rule[:, 0].tolist(), range(start, start + len(rule)), False))
                    continue
                op = v.tape.operations[op_index]
                p = v.params[j]
                batched = _is_batched(op, k, p)
                if torch.as_tensor(p).ndim > int(batched):  # (a batch of matrices too: it was "not unitary")
                    raise GradientError(
                        f"{op.name} parameter {k} has shape {tuple(torch.as_tensor(p).shape)}; parameter-shift "
                        "differentiates scalar (or broadcast) parameters only. Use diff_method='adjoint'."
                    )
                rule = shift_rule(op, k)
                start = len(shifted) + len(todo)
                todo.extend((j, mult, shift) for _, mult, shift in rule)
                entries.append((rule[:, 0].tolist(), range(start, start + len(rule)), batched))
            shifted_values = _shifted_values(v.params, todo, real_dtype)
            for j, value in zip((t[0] for t in todo), shifted_values):
                params = base.copy()
                params[j] = value
                shifted.append(Variant(tape, params))
            layout.append((entries, recipe, mean_row))
        return shifted, layout

    def compute_vjp(self, variants, trainable, dy, saved=None):
        shifted, layout = self._shifted(variants, trainable)
        if torch.is_grad_enabled():
            # create_graph: the shifted runs are themselves differentiable, by the same rule
            results = execute_variants(shifted, ParameterShift(self.gradient_launcher))
        else:
            results = self.gradient_launcher.run(shifted)
        out = []
        for v, tr, (entries, recipe, mean_row), dys in zip(variants, trainable, layout, dy):
            fast = _combine_unbatched(v, tr, entries, recipe, dys, results)
            if fast is not None:
                out.append(fast)
                continue
            grads = []
            for j, (coeffs, rows, batched) in zip(tr, entries):
                total = None
                for (kind, *where), d in zip(recipe, dys):
                    if d is None:  # no cotangent (counts or samples beside the differentiated measurements)
                        continue

                    def jac(a):  # (an empty rule, GlobalPhase's: zero)
                        if not coeffs:
                            return torch.zeros_like(d)
                        return sum(c * _tensor(results[r][a], d) for c, r in zip(coeffs, rows))

                    if kind == "same":
                        jm = jac(where[0])
                    else:  # d Var = d<O^2> - 2 <O> d<O>
                        jm = jac(where[1]) - 2 * _tensor(results[mean_row][where[0]], d) * jac(where[0])
                    prod = _contract(d, jm, batched)
                    total = prod if total is None else total + prod
                p = v.params[j]
                grads.append(total.reshape(torch.as_tensor(p).shape).to(p.dtype))
            out.append(tuple(grads))
        return out


def _tensor(x, like: torch.Tensor) -> torch.Tensor:
    """A device's result as a tensor beside ``like`` (Aer's sampled batched results come back as numpy arrays)."""
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), device=like.device)


def _compute_real_dtype(device) -> torch.dtype:
    """The real precision ``device`` computes in: float32 for a complex64 tensornet device, else float64."""
    devices = getattr(device, "devices", None) or [device]  # a MultiDeviceLauncher: its devices
    single = all(getattr(d, "dtype", None) == torch.complex64 for d in devices)
    return torch.float32 if single else torch.float64


def _shifted_values(params: Sequence, todo: Sequence[tuple], real_dtype: torch.dtype = torch.float64) -> list:
    """``m * p_j + s`` for each (j, m, s): one tensor op for all of them when the parameters are 0-dim
    tensors of one dtype and device (the usual case), else one by one.

    The shifted angles are formed in the computation's precision (``real_dtype``, or the parameter's own if
    finer): a float32 parameter shifted by pi/2 in float32 would be rounded before a float64 simulation
    sees it, and its gradient would be off by up to an ulp of float32."""
    ps = [params[j] for j, _, _ in todo]
    first = ps[0] if ps else None
    if (
        len(ps) > 1
        and isinstance(first, torch.Tensor)
        and all(isinstance(p, torch.Tensor) and p.ndim == 0 and p.dtype == first.dtype and p.device == first.device for p in ps)
        and first.is_floating_point()
    ):
        dtype = torch.promote_types(first.dtype, real_dtype)
        uniq = sorted({j for j, _, _ in todo})
        where = {j: i for i, j in enumerate(uniq)}
        stacked = torch.stack([params[j] for j in uniq]).to(dtype)
        # the rule's tables made once per device (``literal``): no host data in a steady step
        index = literal(tuple(where[j] for j, _, _ in todo), first.device, torch.long)
        mult = literal(tuple(m for _, m, _ in todo), first.device, dtype)
        shift = literal(tuple(s for _, _, s in todo), first.device, dtype)
        return list((stacked[index] * mult + shift).unbind(0))
    out = []
    for p, (_, m, s) in zip(ps, todo):
        if isinstance(p, torch.Tensor) and p.is_floating_point():
            p = p.to(torch.promote_types(p.dtype, real_dtype))
        out.append(p * m + s if m != 1 else p + s)
    return out


COMBINE_MIN_PARAMETERS = 4
"""Variants with at least this many trainable scalar parameters combine their shifted results in one
vectorised step (stack, contract with the cotangents, scatter-add the rule coefficients)."""


def _combine_unbatched(v, tr, entries, recipe, dys, results):
    """All of one variant's gradients at once, or None where the loop below must do it (broadcast
    parameters, variances, few parameters)."""
    if len(tr) < COMBINE_MIN_PARAMETERS or any(e[2] or not e[0] for e in entries) or any(r[0] != "same" for r in recipe):
        return None
    first = min(e[1].start for e in entries)
    last = max(e[1].stop for e in entries)
    if any(e[1].step != 1 for e in entries):
        return None
    per_row = None
    for (_, m), d in zip(recipe, dys):
        stacked = torch.stack([results[r][m] for r in range(first, last)])  # [rows, *shape]
        prod = d.conj() * stacked if stacked.is_complex() else d * stacked
        prod = prod.real if prod.is_complex() else prod
        prod = prod.reshape(last - first, -1).sum(-1)
        per_row = prod if per_row is None else per_row + prod
    owner, rows, coeffs = [], [], []
    for k, (c, rr, _) in enumerate(entries):
        owner.extend([k] * len(rr))
        rows.extend(r - first for r in rr)
        coeffs.extend(c)
    device = per_row.device
    weighted = per_row[literal(tuple(rows), device, torch.long)] * literal(tuple(coeffs), device, per_row.dtype)
    total = torch.zeros(len(tr), dtype=per_row.dtype, device=device).index_add(
        0, literal(tuple(owner), device, torch.long), weighted
    )
    grads = []
    for g, j in zip(total.unbind(0), tr):
        p = v.params[j]
        grads.append(g.reshape(torch.as_tensor(p).shape).to(p.dtype))
    return tuple(grads)


def _linear_form(tape):
    """The tape with every measurement linear in the state (shift rules hold only for those): each
    variance becomes the expectations of O and O^2. Returns (tape, recipe, number of operator params)."""
    n_ops = sum(len(op.data) for op in tape.operations)
    if not any(isinstance(mp, (VarianceMP, StateMP)) and not isinstance(mp, DensityMatrixMP) for mp in tape.measurements):
        return tape, [("same", m) for m in range(len(tape.measurements))], n_ops
    mps, recipe = [], []
    unnormalised = any(may_be_non_unitary(op) for op in tape.operations)
    for mp in tape.measurements:
        if isinstance(mp, StateMP) and not isinstance(mp, DensityMatrixMP):
            raise GradientError(
                "parameter-shift rules hold for expectation values, not for qml.state(); use "
                "diff_method='adjoint' to differentiate the state."
            )
        if isinstance(mp, VarianceMP):
            recipe.append(("var", len(mps), len(mps) + 1))
            square = qml.prod(mp.obs, mp.obs)
            if unnormalised:  # their identity terms are the norm, not constants (P @ P is the identity)
                mps += [qml.expval(_as_matrix(mp.obs)), qml.expval(_as_matrix(square))]
            else:
                mps += [qml.expval(mp.obs), qml.expval(square)]
        else:
            recipe.append(("same", len(mps)))
            mps.append(mp)
    return tape.copy(measurements=mps), recipe, n_ops


AS_MATRIX_MAX_WIRES = 10


def _as_matrix(obs):
    """``obs`` as a ``Hermitian`` of its matrix where it has an identity term, else itself: in a tape whose state may
    be unnormalised (a non-unitary gate) the engines would read that term as its coefficient, not times the norm."""
    ps = obs.pauli_rep
    if ps is not None and qml.pauli.PauliWord({}) not in ps:
        return obs
    if len(obs.wires) > AS_MATRIX_MAX_WIRES:
        raise GradientError(
            f"parameter-shift: the variance of {obs} on {len(obs.wires)} wires after an operator that is not unitary "
            f"needs its square as a matrix (at most {AS_MATRIX_MAX_WIRES} wires). Use diff_method='adjoint' or "
            "'backprop'."
        )
    return qml.Hermitian(qml.matrix(obs, wire_order=obs.wires), wires=obs.wires)


def _is_batched(op, k: int, p) -> bool:
    if op.batch_size is None:
        return False
    try:
        expected = op.ndim_params[k]
    except AttributeError:  # composite operators (Prod, Evolution) do not declare theirs: scalar parameters
        expected = 0
    return torch.as_tensor(p).ndim > expected


def _contract(dy: torch.Tensor, jac: torch.Tensor, batched: bool) -> torch.Tensor:
    """<dy, jac>, summed over every axis except the leading batch axis of a broadcast parameter."""
    prod = dy.conj() * jac if jac.is_complex() else dy * jac
    prod = prod.real if prod.is_complex() else prod
    if batched:
        return prod.flatten(1).sum(-1) if prod.ndim > 1 else prod  # flatten, not reshape: a batch may be empty
    return prod.sum()

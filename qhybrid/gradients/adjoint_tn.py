"""AdjointTN: reverse mode through the tensor-network contraction, chained to gate parameters.

See adjoint_tn.md for the derivation. The forward pass contracts with autograd recording on detached
copies of the trainable parameters only, so the backward pass walks the contraction tree in reverse,
reusing every intermediate of the forward (as cuTensorNet's compute_gradients_backward does with its
cache workspace), and then through dU/dtheta of each gate. Parameters that need no gradient are plain
tensors and cost nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ..devices._tracking import track_run
from .._variant import Variant
from ..devices._protocol import register_vjp_calculator, supports_reverse_mode
from ..errors import GradientError
from ._packed import pack
from .jpc import JacobianProductCalculator, Results, refuse_shots, register_jpc


def _check_analytic(device, method: str) -> None:
    refuse_shots(method, getattr(device, "shots", None))
    if not supports_reverse_mode(device):
        raise GradientError(
            f"diff_method={method!r} differentiates through the simulation in torch; {device.name} does not "
            "simulate in torch. Use diff_method='parameter-shift' on this device."
        )


@register_jpc
class AdjointTN(JacobianProductCalculator):
    """Vector-Jacobian products by reverse mode through the contraction of a tensornet device.

    >>> import qhybrid, pennylane as qml
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    >>> tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])
    >>> AdjointTN(dev).compute_vjp([Variant.of(tape)], [[0]], [[torch.tensor(1.0, dtype=torch.float64)]])
    [(tensor(-0.2955, dtype=torch.float64),)]
    """

    name = "adjoint"
    differentiates_sources = True
    """``forward`` / ``compute_vjp`` accept ``sources=``: the gather inputs of the variants' parameters, which
    are then the leaves differentiated (one per input tensor instead of one per gate parameter)."""

    def __init__(self, device):
        _check_analytic(device, self.name)
        self.device = device

    def forward(self, variants: Sequence[Variant], trainable, sources=None) -> tuple[Results, Any]:
        if sources is not None:
            packed = pack(variants, sources)
            if packed is not None:  # one leaf for many scalar sources
                leaf, graph_variants, unpack = packed
                leaves = [leaf]
            else:
                leaves, unpack = [s.detach().requires_grad_(True) for s in sources], None
                graph_variants = _regathered(variants, sources, leaves)
            with torch.enable_grad():  # the gathers are part of the recorded graph
                results = self.device.simulate_variants(graph_variants)
            return [tuple(r.detach() for r in res) for res in results], (leaves, results, unpack)
        leaves = []
        graph_variants = []
        for v, tr in zip(variants, trainable):
            params = list(v.params)
            for j in tr:
                params[j] = params[j].detach().requires_grad_(True)
                leaves.append(params[j])
            graph_variants.append(Variant(v.tape, params))
        with torch.enable_grad():
            results = self.device.simulate_variants(graph_variants)
        detached = [tuple(r.detach() for r in res) for res in results]
        return detached, (leaves, results)

    def compute_vjp(self, variants, trainable, dy, saved=None, sources=None):
        """Per variant, one product per trainable position; with ``sources``, one per source instead."""
        flat_dy = [d for per in dy for d in per]
        if sources is not None:
            if torch.is_grad_enabled() and any(x.requires_grad for x in sources):
                track_run(self.device, variants)
                with torch.enable_grad():
                    # create_graph: differentiate aliases of the caller's tensors, so the products carry their
                    # history, yet a source that is a view of another (w and w[0]) is not counted twice
                    aliases = [x.view_as(x) for x in sources]
                    results = self.device.simulate_variants(_regathered(variants, sources, aliases))
                return _grad(results, aliases, flat_dy, create_graph=True)
            if saved is None:
                saved = self.forward(variants, trainable, sources)[1]
            leaves, results, unpack = saved
            grads = _grad(results, leaves, flat_dy, create_graph=False)
            return grads if unpack is None else unpack(grads[0])
        inputs = [v.params[j] for v, tr in zip(variants, trainable) for j in tr]
        if torch.is_grad_enabled() and any(getattr(x, "requires_grad", False) for x in inputs):
            # create_graph: differentiate one alias of the caller's parameter per trainable position, so the
            # products carry the parameters' history, yet a parameter computed from another (2 * a beside a)
            # or one tensor at two positions gets the product of its own position only (ExecuteTapes' autograd
            # sums the positions; differentiating the parameters themselves counted such paths twice)
            track_run(self.device, variants)
            aliased, inputs = _aliased(variants, trainable)
            with torch.enable_grad():
                results = self.device.simulate_variants(aliased)
            grads = _grad(results, inputs, flat_dy, create_graph=True)
        else:
            if saved is None:
                saved = self.forward(variants, trainable)[1]
            leaves, results = saved
            grads = _grad(results, leaves, flat_dy, create_graph=False)
        out, k = [], 0
        for tr in trainable:
            out.append(tuple(grads[k : k + len(tr)]))
            k += len(tr)
        return out

    # --- PennyLane device API helpers (numpy in, numpy out) -------------------------------
    def vjp_of_tapes(self, tapes, cotangents):
        variants, trainable = _torch_variants(tapes)
        dy = []
        for t, cot in zip(tapes, cotangents):
            cot = (cot,) if len(t.measurements) == 1 else tuple(cot)
            dy.append([torch.as_tensor(np.asarray(c)) for c in cot])
        results, saved = self.forward(variants, trainable)
        dy = [[d.to(r.dtype) if not r.is_complex() else d.to(r.dtype) for d, r in zip(ds, res)] for ds, res in zip(dy, results)]
        vjps = self.compute_vjp(variants, trainable, dy, saved)
        return [tuple(_numpy(g) for g in per) for per in vjps]

    def jacobian_of_tapes(self, tapes):
        variants, trainable = _torch_variants(tapes)
        jacs = self.compute_jacobian(variants, trainable)
        out = []
        for t, per_meas in zip(tapes, jacs):
            per_meas = [tuple(_numpy(j) for j in per) for per in per_meas]
            per_meas = [p[0] if len(p) == 1 else p for p in per_meas]
            out.append(per_meas[0] if len(t.measurements) == 1 else tuple(per_meas))
        return out


def _numpy(t: torch.Tensor):
    """``t`` for PennyLane, as numpy (a lazy conjugate or negation resolved: torch's ``numpy()`` refuses those views)."""
    return t.detach().resolve_conj().resolve_neg().cpu().numpy()


@register_jpc
class Backprop(AdjointTN):
    """Plain torch autograd through the simulation: no custom backward, any derivative order."""

    name = "backprop"


def _regathered(variants, sources, stand_ins):
    """The variants with their parameters gathered from ``stand_ins`` in place of ``sources``."""
    swap = {id(s): t for s, t in zip(sources, stand_ins)}
    return [v.regathered([swap.get(id(x), x) for x in v.gather.inputs]) for v in variants]


def _aliased(variants, trainable) -> tuple[list, list]:
    """(the variants with each trainable parameter replaced by a fresh alias ``p.view_as(p)``, the aliases in
    trainable order): under grad mode, recorded from the caller's parameters."""
    out, aliases = [], []
    with torch.enable_grad():
        for v, tr in zip(variants, trainable):
            params = list(v.params)
            for j in tr:
                params[j] = params[j].view_as(params[j])
                aliases.append(params[j])
            out.append(Variant(v.tape, params))
    return out, aliases


def _torch_variants(tapes):
    from .._variant import tape_parameters

    variants, trainable = [], []
    for t in tapes:
        params = [p if isinstance(p, torch.Tensor) else torch.as_tensor(np.asarray(p)) for p in tape_parameters(t)]
        variants.append(Variant(t, params))
        trainable.append(list(t.trainable_params))
    return variants, trainable


def _grad(results, inputs, flat_dy, *, create_graph: bool):
    """The products of ``flat_dy`` with the results' Jacobians in ``inputs`` (one tensor per position; each a
    leaf or alias of its own, so that no position's product includes another's)."""
    outputs, grads_out = [], []
    for res_v in results:
        for r in res_v:
            outputs.append(r)
    pairs = [(o, d) for o, d in zip(outputs, flat_dy) if o.requires_grad]
    first = {id(x): n for n, x in enumerate(inputs)}
    targets = [x for x in inputs if x.requires_grad]
    if pairs and targets:
        outs, dys = _as_scalar(pairs)
        grads = torch.autograd.grad(outs, targets, dys, retain_graph=True, create_graph=create_graph, allow_unused=True)
        by_id = dict(zip((id(x) for x in targets), grads))
    else:
        by_id = {}
    for n, x in enumerate(inputs):
        g = by_id.get(id(x)) if first.get(id(x)) == n else None
        grads_out.append(torch.zeros_like(x) if g is None else g)
    return grads_out


def _as_scalar(pairs) -> tuple:
    """``autograd.grad``'s outputs and their cotangents; real ones as one scalar ``sum(o * dy)`` and no
    cotangent: torch imports ``torch.fx.experimental.symbolic_shapes`` (and sympy) to check a cotangent
    given as a tensor, ~1 s at a process's first gradient (Q100 p=4). The same gradient exactly: ``mul``'s
    backward hands each output ``1 * dy``."""
    real = all(
        not o.is_complex() and not d.is_complex() and o.dtype == d.dtype and o.shape == d.shape
        and o.device == d.device for o, d in pairs
    )
    if not real:
        return [p[0] for p in pairs], [p[1] for p in pairs]
    with torch.enable_grad():  # (a backward runs under no_grad; the product must be recorded)
        total = sum((o * d).sum() for o, d in pairs)
    return [total], None


register_vjp_calculator(AdjointTN)

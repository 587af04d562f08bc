"""ExecuteTapes: the autograd boundary every JPC answers for. A whole batch of variants goes to the device
in one call; backward asks the JacobianProductCalculator for the vector-Jacobian products.

It lives with the gradients (not in ``interfaces/``) because the parameter-shift JPC runs its shifted
variants through it too when a higher derivative is asked for; ``qhybrid.interfaces.torch`` re-exports it.
Only parameters that require a gradient enter the autograd graph; everything stays a torch tensor on its
own device. ``backward(create_graph=True)`` works because the JPCs compute differentiable products whenever
grad mode is on.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..devices._tracking import track_run
from .._variant import Variant
from .jpc import JacobianProductCalculator
from .launcher import Launcher
from ._derived import fold
from ..devices._protocol import one_node_results


class _Call:
    """What one ExecuteTapes application needs in backward (kept on ctx)."""

    def __init__(self, variants: Sequence[Variant], trainable: Sequence[Sequence[int]], jpc: JacobianProductCalculator):
        self.variants = list(variants)
        self.trainable = [list(t) for t in trainable]
        self.jpc = jpc
        self.saved: Any = None
        self.counts: list[int] = []
        self.sources: list[torch.Tensor] | None = None
        """The inputs the parameters were gathered from, when the JPC differentiates those directly."""
        self.fold = None
        """Where the sources are scalars derived from a few leaves (``_derived.fold``): those leaves are the
        node's inputs, and the sources' gradients are folded into theirs."""


class ExecuteTapes(torch.autograd.Function):
    """Forward: every variant of the call in one device execution. Backward: ``jpc.compute_vjp``.

    Inputs are ``(call, *trainable_parameters)`` or, where preprocessing found every parameter to be a gather
    of a few input tensors and the JPC can use that, ``(call, *inputs)``: then the whole circuit is one
    autograd node between the user's tensors and the results. Outputs are the flat list of all
    measurement results.
    """

    @staticmethod
    def forward(call: _Call, *parameters: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if getattr(call.jpc, "launcher", None) is None:  # a launcher records its own device calls
            track_run(call.jpc.device, call.variants)
        if call.sources is None:
            results, call.saved = call.jpc.forward(call.variants, call.trainable)
        else:
            results, call.saved = call.jpc.forward(call.variants, call.trainable, sources=call.sources)
        call.counts = [len(r) for r in results]
        # a view among several outputs could not be written in place (torch refuses views of a multi-output
        # Function: ``out[0].mul_(2)`` before the backward), and may share its storage with what the JPC keeps
        flat = (r for res in results for r in res)
        return tuple(r.clone() if isinstance(r, torch.Tensor) and r._base is not None else r for r in flat)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.call = inputs[0]
        ctx.inputs = inputs[1:]  # (held, not saved: an input written in place before the backward stays allowed)

    @staticmethod
    def backward(ctx, *dy: torch.Tensor):
        call: _Call = ctx.call
        nested, k = [], 0
        for n in call.counts:
            nested.append(list(dy[k : k + n]))
            k += n
        if call.sources is not None:
            grads = call.jpc.compute_vjp(call.variants, call.trainable, nested, call.saved, sources=call.sources)
            out = list(grads if call.fold is None else call.fold.grads(grads))
        else:
            vjps = call.jpc.compute_vjp(call.variants, call.trainable, nested, call.saved)
            out = [g for per in vjps for g in per]
        if torch.is_grad_enabled():
            out = _differentiable(out, getattr(ctx, "inputs", ()))
        return (None, *out)


def _differentiable(grads: list, inputs) -> list:
    """Under ``create_graph``, a gradient the JPC found constant (zero: a parameter the results do not depend on, such
    as a global phase under ``probs``) tied to its input by a zero product, so that differentiating it again gives
    zeros, as default.qubit does, not torch's "does not require grad" error."""
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if not (isinstance(x, torch.Tensor) and x.requires_grad):
            continue
        if g is None:
            grads[i] = 0 * x
        elif isinstance(g, torch.Tensor) and not g.requires_grad and g.shape == x.shape:
            grads[i] = g + 0 * x
    return grads


def _trainable_positions(variants: Sequence[Variant]) -> list[list[int]]:
    if not torch.is_grad_enabled():
        return [[] for _ in variants]
    return [v.trainable_positions() for v in variants]


def _sources(variants: Sequence[Variant], trainable) -> list[torch.Tensor] | None:
    """The distinct gather inputs that need a gradient, when every trainable parameter of every variant is
    gathered from an input (else None: the parameters themselves are then the autograd inputs)."""
    out: dict[int, torch.Tensor] = {}
    for v, tr in zip(variants, trainable):
        g = v.gather
        if g is None:
            return None
        for j in tr:
            if g.maps[j][0] == "const":
                return None
        for x in g.inputs:
            if isinstance(x, torch.Tensor) and x.requires_grad:
                out.setdefault(id(x), x)
    return list(out.values()) or None


def _connected(results, variants, trainable) -> list:
    """Backprop's results, each connected to its variant's trainable parameters: a result that depends on none (a
    light cone that holds no parameter) is given a zero one, so ``backward`` gives a zero gradient as the other
    methods do, not an error that nothing requires a gradient."""
    out = []
    for r, v, tr in zip(results, variants, trainable):
        if tr and any(isinstance(t, torch.Tensor) and not t.requires_grad for t in r):
            zero = sum(v.params[j].real.sum() for j in tr) * 0
            r = tuple(t + zero.to(t.dtype) if isinstance(t, torch.Tensor) and not t.requires_grad else t for t in r)
        out.append(r)
    return out


def execute_variants(
    variants: Sequence[Variant],
    jpc: JacobianProductCalculator | None,
    *,
    launcher: Launcher | None = None,
) -> list[tuple[torch.Tensor, ...]]:
    """Run variants through ``jpc`` with autograd support; a tuple of tensors per variant.

    ``launcher`` runs them when no gradient is needed (default: the JPC's own)."""
    trainable = _trainable_positions(variants)
    grad_needed = torch.is_grad_enabled() and any(trainable)
    if jpc is None or not grad_needed:
        runner = launcher or getattr(jpc, "launcher", None) or Launcher(jpc.device)
        with torch.no_grad():
            return runner.run(variants)
    if jpc.name == "backprop":
        track_run(jpc.device, variants)
        return _connected(jpc.device.simulate_variants(variants), variants, trainable)
    if jpc.name == "adjoint":
        bound = one_node_results(jpc.device, variants)  # the circuit as one node, where the device offers it
        if bound is not None:
            track_run(jpc.device, variants)
            return bound
    call = _Call(variants, trainable, jpc)
    call.sources = _sources(variants, trainable) if getattr(jpc, "differentiates_sources", False) else None
    if call.sources is not None:
        call.fold = fold(call.sources)
        flat = call.sources if call.fold is None else call.fold.roots
    else:  # gathered now, under the caller's grad mode (the JPC's backward reuses them)
        flat = [v.params[j] for v, tr in zip(variants, trainable) for j in tr]
        for v in variants:
            v.params
    out = ExecuteTapes.apply(call, *flat)
    results, k = [], 0
    for n in call.counts:
        results.append(tuple(out[k : k + n]))
        k += n
    return results

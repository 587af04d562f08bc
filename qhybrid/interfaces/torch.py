"""The torch boundary: ExecuteTapes sends a whole batch of tapes to a device in one call and asks a
JacobianProductCalculator for the vector-Jacobian products in backward.

Only parameters that require a gradient enter the autograd graph; everything stays a torch tensor on
its own device (no ``.cpu().numpy()`` round trip). ``backward(create_graph=True)`` works because the
JPCs compute differentiable products whenever grad mode is on.
"""

from __future__ import annotations

from typing import Any, Sequence

import pennylane as qml
import torch

from .._compile import quantum_boundary
from .._tracking import track_run
from .._variant import Variant
from ..gradients.jpc import JacobianProductCalculator, get_jpc
from ..gradients.launcher import Launcher
from ..errors import GradientError
from ._preprocess import preprocess


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
        return tuple(r for res in results for r in res)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.call = inputs[0]

    @staticmethod
    def backward(ctx, *dy: torch.Tensor):
        call: _Call = ctx.call
        nested, k = [], 0
        for n in call.counts:
            nested.append(list(dy[k : k + n]))
            k += n
        if call.sources is not None:
            return (None, *call.jpc.compute_vjp(call.variants, call.trainable, nested, call.saved, sources=call.sources))
        vjps = call.jpc.compute_vjp(call.variants, call.trainable, nested, call.saved)
        return (None, *(g for per in vjps for g in per))


def _trainable_positions(variants: Sequence[Variant]) -> list[list[int]]:
    return [
        [j for j, p in enumerate(v.params) if isinstance(p, torch.Tensor) and p.requires_grad] for v in variants
    ]


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
        return jpc.device.simulate_variants(variants)
    call = _Call(variants, trainable, jpc)
    call.sources = _sources(variants, trainable) if getattr(jpc, "differentiates_sources", False) else None
    if call.sources is not None:
        flat = call.sources
    else:
        flat = [v.params[j] for v, tr in zip(variants, trainable) for j in tr]
    out = ExecuteTapes.apply(call, *flat)
    results, k = [], 0
    for n in call.counts:
        results.append(tuple(out[k : k + n]))
        k += n
    return results


def _refuse_function_transforms() -> None:
    """torch.func transforms (vmap, grad, jacrev, jacfwd) would wrap the parameters in tensors our device
    code cannot see through: say so, and what does the same job, instead of torch's own message."""
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    if active is not None and active():
        raise GradientError(
            "qhybrid circuits do not run inside torch.func transforms (vmap, grad, jacrev, jacfwd). For a "
            "batch, give the inputs a leading batch axis: the whole batch runs as one broadcast execution. "
            "For Jacobians, use torch.autograd.functional.jacobian (or backward with grad_tensors)."
        )


@quantum_boundary
def execute(
    tapes: Sequence[qml.tape.QuantumScript],
    device,
    diff_method: str | None = "best",
    *,
    max_diff: int = 1,
    gradient_device=None,
) -> tuple:
    """Execute PennyLane tapes whose parameters are torch tensors, differentiably, in one device call.

    Results have the structure a PennyLane torch QNode returns for each tape: a tensor for one
    measurement, a tuple for several, with a leading batch axis for broadcast tapes.

    Args:
        tapes: the circuits.
        device: a qhybrid (or any PennyLane) device.
        diff_method: "adjoint", "parameter-shift", "backprop", "best" or None.
        max_diff: accepted for PennyLane compatibility; every order is available through
            ``create_graph=True`` whatever its value.
        gradient_device: a second device for the parameter-shift runs (the forward stays on ``device``).

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> x = torch.tensor(0.3, requires_grad=True)
    >>> (res,) = execute([qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])], dev)
    >>> res.backward(); x.grad
    tensor(-0.2955)
    """
    _refuse_function_transforms()
    tapes = list(tapes)
    shots = getattr(device, "shots", None)
    if shots:  # a device's own shots apply to tapes that set none (as PennyLane's QNode does)
        tapes = [t if t.shots else t.copy(shots=shots) for t in tapes]
    variants, postprocess = preprocess(device, tapes)  # the device's program, cached per structure
    jpc = get_jpc(diff_method, device, gradient_device)
    if jpc is None:
        with torch.no_grad():
            raw = Launcher(device).run(variants)
    else:
        raw = execute_variants(variants, jpc)
    shaped = tuple(r[0] if len(r) == 1 else tuple(r) for r in raw)
    return tuple(postprocess(shaped))


__all__ = ["ExecuteTapes", "execute", "execute_variants"]

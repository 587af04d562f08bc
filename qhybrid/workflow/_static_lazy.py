"""A static trace read off one lazy recording: no probe calls, and arithmetic on the arguments allowed.

``_static`` probes a function twice more and keeps its trace only where every gate parameter is an element of
an argument, so ``qml.IsingZZ(2 * gamma[l], ...)`` was never cached and QAOA ran its Python (600 operators
at Q100 p=2, most of a 35 ms step) on every call. A lazy recording (``_lazy``) already knows each parameter's
structure: an argument, indexed, with constant arithmetic steps (``2 * gamma[l]``, ``-w[i, j] / 3``). Where the
function used no argument's *value* (no ``torch.sin(x)``, no ``if x[0] > 0``, no ``float(x[0])``, no
in-place write; ``Session.real_uses`` counts them), the recording cannot have depended on the values, so the
structure is the trace: a later call recomputes each group of parameters from the new arguments with the same
ops (``torch.take`` and the steps, in the order written: bit for bit what the recording gave) and runs the
cached device-ready tape. Any value use, or a parameter that is not such an image of an argument, leaves the
decision to ``_static``'s probes.
"""

from __future__ import annotations

import torch

from .._variant import Gather, _ROW_OF
from ..devices._observable_key import observable_data
from ..interfaces._preprocess import preprocess
from ._call_args import CallArgs
from ._lazy import LazyParam
from ._lazy_resolve import _APPLY


class LazySources:
    """Where each input of a cached gather comes from: a call's tensor argument, or a group of parameters
    made from one (``torch.take`` of its flat positions, then the recorded arithmetic steps)."""

    __slots__ = ("sources",)

    def __init__(self, sources: tuple):
        self.sources = sources

    def inputs(self, tensors) -> list[torch.Tensor]:
        out = []
        for arg, table, steps in self.sources:
            t = tensors[arg]
            if table is not None:
                t = torch.take(t, table)
                for kind, c in steps:
                    t = _APPLY[kind](t, c)
            out.append(t)
        return out


def values_unused(session) -> bool:
    """Whether the recording used no argument's value (nor wrote one) and made every proxy in the call's grad mode:
    then it cannot have depended on the values."""
    if session.eager or session.real_uses:
        return False
    mode = torch.is_grad_enabled()
    return all(p._mode == mode for p in session.made)


def _structural(tape, session) -> bool:
    """Whether the recording is its arguments' structure alone: no value used, every tensor parameter a lazy
    image of an argument made in the call's grad mode, no tensor among the observables' data."""
    if not values_unused(session):
        return False
    for op in tape.operations:
        for d in op.data:
            if isinstance(d, torch.Tensor) and not (
                isinstance(d, LazyParam) and (d._parent is None or d._real is None)
            ):
                return False
    return not any(
        isinstance(d, torch.Tensor) for mp in tape.measurements if mp.obs is not None for d in observable_data(mp.obs)
    )


def lazy_trace(qnode, call: CallArgs):
    """``(tape, out, cached)``: the call recorded lazily and resolved (``qnode.tape``), what the function
    returned, and ``(template, post, gather, sources)`` where the recording is structural, else None (also where
    lazy recording is off: ``_lazy.ENABLED``)."""
    seen, groups = [], {}
    structural = lambda t, session, out: seen.append(_structural(t, session))  # noqa: E731
    tape, out = qnode.construct(call.args, call.kwargs, lazy=True, recorded=structural, groups=groups)
    if not seen or not seen[0]:
        return tape, out, None
    return tape, out, trace_of(qnode, call, tape, groups)


def trace_of(qnode, call: CallArgs, tape, groups: dict):
    """``(template, post, gather, sources)`` of a structural lazy recording resolved into ``tape`` (its proxies'
    ``groups``), or None where the device-ready tape's parameters are not all gathered from the call's tensors."""
    if tape.shots or getattr(qnode.device, "shots", None) or qnode._record_real:
        # (shots, the device's too, are applied where the tape is executed; recorded from the tensors after all)
        return None
    # (a gate's constants are kept in the template: equal recordings hold equal constants, and a static trace keeps
    # its first recording's, as jax.jit does)
    variants, post = preprocess(qnode.device, [tape], constants=True)
    g = variants[0].gather
    if g is None:
        return None
    args_at = {id(t): k for k, t in enumerate(call.tensors)}
    wholes = {id(getattr(grp.rows[0], _ROW_OF)[0]): grp for grp in groups.values() if grp.rows}
    # each gather input as (key of the new input, flat positions of its elements in that input or None)
    sources, slot, routes = [], {}, []
    for x in g.inputs:
        grp = wholes.get(id(x))
        if grp is None:
            if id(x) not in args_at:
                return None
            key, source, positions = ("arg", args_at[id(x)]), (args_at[id(x)], None, ()), None
        elif id(grp.root) not in args_at:
            return None
        elif not grp.steps:  # plain indexing: gathered from the argument itself (no take, no TakeBackward)
            arg = args_at[id(grp.root)]
            key, source, positions = ("arg", arg), (arg, None, ()), grp.table.reshape(-1).cpu()
        else:
            key, source, positions = ("group", id(grp)), (args_at[id(grp.root)], grp.table, grp.steps), None
        if key not in slot:
            slot[key] = len(sources)
            sources.append(source)
        routes.append((slot[key], positions))
    maps = []
    for m in g.maps:
        if m[0] == "const":
            maps.append(m)
        else:
            k, positions = routes[m[0]]
            maps.append((k, m[1] if positions is None else positions[m[1].cpu()]))
    return variants[0].tape, post, Gather((), tuple(maps)), LazySources(tuple(sources))


__all__ = ["LazySources", "lazy_trace", "trace_of", "values_unused"]

"""``static_structure=True``: a qnode traced once per argument signature, its trace reused with new values.

The contract is ``jax.jit``'s. A call is looked up by its **signature**: for every tensor argument its
shape, dtype, device and ``requires_grad``; every other argument by value (it must be hashable: a
Python number, string, tuple, ...; an unhashable one, or a non-floating tensor, makes the call run the
ordinary way). The first call of a signature records the tape, runs the device's preprocessing and
then **probes** the function: it is called four more times with every tensor element replaced by a known
value (its flat position, then an affine image of it, then a negative, fractional and decreasing one and a
positive, increasing one, both about ``10^6`` in size). The trace is kept only if

* every probe call records the same operators, wires and measurements as the real call (so Python control
  flow that depends on the *values* of the tensors, in the ways the probes exercise, is seen and the
  function is never cached),
* every gate parameter of the device-ready tape is an element of one tensor argument (an index, not
  arithmetic: ``x[i]``, ``w[l, i, k]`` and templates that index their inputs are cached; ``2 * x`` is not)
  under all the probes, and
* that element is the real call's parameter, its value and its autograd link (``abs(x[0])``, ``max(x)``,
  ``round``, a threshold or ``x[0].detach()`` read as a gather by two increasing integer probes, and the trace
  replayed another computation, silently, until the third probe and this check; ``torch.clamp(x, -50, 50)``
  passed when the last probes were small: a bound beyond ``±10^6`` is still not seen).

A later call with the same signature then runs no Python of the function: the parameters are gathered
from the new arguments (one indexing op per argument) into the cached device-ready tape. What is **not**
checked on such a call: a branch on tensor values that the probes did not take. Every
``STATIC_VERIFY_EVERY``-th reuse records the tape afresh and compares it with the trace, and
``static_structure="verify"`` does so on every call (a debugging aid that costs a recording per call);
a difference re-traces and warns (``StaticStructureWarning``). Anything else (a new shape, dtype,
``requires_grad``, Python argument, or wire count) is a new signature and traces anew. A function run
by the probes must accept arbitrary real values (it is called five times on a first call).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import torch

from ._call_args import CallArgs
from ._returns import shaped_like
from ._static_lazy import lazy_trace
from ..interfaces._compile import quantum_boundary
from .._variant import Gather, Variant, tape_parameters
from ..interfaces._preprocess import _probe_values, gather_maps, settings_key
from ..interfaces.torch import run_prepared, shift_expanded

STATIC_VERIFY_EVERY = 1000
"""A reused trace is compared with a fresh recording of the function every this many reuses (0: never)."""

STATIC_CACHE_SIZE = 32
"""Signatures whose traces one qnode keeps (least recently used dropped)."""


class StaticStructureWarning(UserWarning):
    """A static-structure qnode found that its function recorded another circuit than its trace."""


_UNCACHEABLE = object()


def fingerprint(tape) -> tuple:
    """What the structure check compares: operators (kind, wires, settings, data shapes) and measurements."""
    ops = tuple(
        (op.name, tuple(op.wires), settings_key(op), tuple(tuple(getattr(d, "shape", ())) for d in op.data))
        for op in tape.operations
    )
    return ops, tuple(repr(mp) for mp in tape.measurements), repr(tape.shots)


class _Trace:
    __slots__ = ("template", "post", "gather", "out", "print", "reuses", "sources")

    def __init__(self, template, post, gather, out, print_, sources=None):
        self.template, self.post, self.gather, self.out, self.print = template, post, gather, out, print_
        self.reuses = 0
        self.sources = sources
        """``_static_lazy.LazySources`` where the trace was read off a lazy recording (the gather's inputs are
        made from the call's tensors), else None (it gathers from the call's tensors themselves)."""


class StaticCache:
    """The traces of one qnode by call signature (see the module notes)."""

    def __init__(self, verify_always: bool = False):
        self.verify_always = verify_always
        self._traces: OrderedDict = OrderedDict()
        self.traces = 0
        """How many times a signature was traced (tests and users can watch re-traces)."""

    @quantum_boundary
    def call(self, qnode, args, kwargs):
        """``qnode(*args, **kwargs)``, from the trace of the call's signature where one is kept."""
        call = CallArgs(args, kwargs)  # the call's one flattening: its key, tensors and result device
        key = None if qnode.compile_pipeline else call.signature
        if key is None:  # transforms rewrite the recorded tapes: a qnode carrying any is recorded every call
            return qnode._call_recorded(args, kwargs)
        trace = self._traces.get(key)
        if trace is None:
            return self._trace(qnode, key, call)
        self._traces.move_to_end(key)
        if trace is _UNCACHEABLE:
            return qnode._call_recorded(args, kwargs)
        trace.reuses += 1
        if self.verify_always or (STATIC_VERIFY_EVERY and trace.reuses % STATIC_VERIFY_EVERY == 0):
            tape, _ = qnode.construct(args, kwargs)
            if fingerprint(tape) != trace.print:
                warnings.warn(
                    "A static_structure qnode recorded another circuit than its trace for the same argument "
                    f"shapes ({getattr(qnode, '__name__', 'qnode')}): its Python control flow depends on "
                    "tensor values. Re-traced; run it without static_structure=True.",
                    StaticStructureWarning,
                    stacklevel=3,
                )
                return self._trace(qnode, key, call)
        return _run(qnode, trace, call)

    def _trace(self, qnode, key, call: CallArgs):
        args, kwargs = call.args, call.kwargs
        if qnode._record_real:  # observables built from the arguments, say: recorded from the real tensors
            tape, out, cached = (*qnode.construct(args, kwargs), None)
        else:
            tape, out, cached = lazy_trace(qnode, call)
        self.traces += 1
        if shift_expanded([tape], qnode.device, qnode.diff_method, qnode.gradient_device)[0] is not tape:
            # operators without shift rules, decomposed on every call by execute: no trace of this signature
            self._traces[key] = _UNCACHEABLE
            return qnode._shaped(tape, out, args, kwargs)
        if cached is not None:
            template, post, gather, sources = cached
            trace = _Trace(template, post, gather, out, fingerprint(tape), sources)
        else:
            try:
                trace = _make_trace(qnode, tape, out, call)
            except Exception:  # a function or transform that rejects probe values: never cached
                trace = None
        self._traces[key] = _UNCACHEABLE if trace is None else trace
        if len(self._traces) > STATIC_CACHE_SIZE:
            self._traces.popitem(last=False)
        if trace is None:
            return qnode._shaped(tape, out, args, kwargs)
        return _run(qnode, trace, call)  # the first call runs as later ones will


def _make_trace(qnode, tape, out, call: CallArgs) -> _Trace | None:
    inputs = call.tensors
    if tape.shots or getattr(qnode.device, "shots", None) or not inputs:
        return None
    program = qnode.device.preprocess_transforms()
    new_tapes, post = program([tape])
    if len(new_tapes) != 1:
        return None
    template = new_tapes[0]
    real = tape_parameters(template)
    if not real or not all(isinstance(p, torch.Tensor) and not p.is_complex() for p in real):
        return None
    print_ = fingerprint(tape)
    template_print = fingerprint(template)

    def probe(values):
        a, k = call.with_tensors(values)
        probe_tape, _ = qnode.construct(a, k, record=False)
        if fingerprint(probe_tape) != print_:
            return None  # the structure depends on values
        probed, _ = program([probe_tape])
        if len(probed) != 1 or fingerprint(probed[0]) != template_print:
            return None
        return tape_parameters(probed[0])

    maps = gather_maps(probe, inputs, real)
    if maps is None or not _gathers_the_call(probe, inputs, real, maps):
        return None
    return _Trace(template, post, Gather((), tuple(maps)), out, print_)


_WIDE = 1.0e6
"""The magnitude of the last two probes: a bound the two small integer probes never reach (``torch.clamp(x, -50,
50)``, read as ``x`` and replayed for ``x = 60``) is crossed on either side; a threshold beyond ``±10^6`` is not
seen."""

_CHECKS = ((-1.618033988749895, -_WIDE - 0.3713), (1.618033988749895, _WIDE + 0.3713))
"""``(scale, offset)`` of the third and fourth probes: negative, fractional and decreasing along the inputs, then
positive and increasing, both about ``10^6`` in size. Where the function used its arguments' values (``abs``,
``max``, ``round``, ``relu``, a threshold, a clamp), the two increasing integer probes can read as a gather that the
real call is not."""


def _gathers_the_call(probe, inputs, real, maps) -> bool:
    """Whether the maps (read off two probes) hold for this call and two wide, unlike probes: each parameter is its
    input's elements, with their values and their link to autograd (``x[0].detach()`` is no gather of ``x``). Where
    not, the function is recorded every call (a trace would replay another computation silently)."""
    flat = [p.detach().reshape(-1) for p in inputs]
    for r, m in zip(real, maps):
        if m[0] == "const":
            continue
        src, idx = m
        if r.requires_grad != inputs[src].requires_grad or not torch.equal(flat[src][idx].to(r.dtype), r.detach()):
            return False
    starts = [0]
    for p in inputs[:-1]:
        starts.append(starts[-1] + p.numel())
    for scale, offset in _CHECKS:
        checked = probe(_probe_values(inputs, scale, offset))
        if checked is None or len(checked) != len(real):
            return False
        for c, m in zip(checked, maps):
            if m[0] == "const":
                continue
            src, idx = m
            expected = (idx + starts[src]).to(torch.float64) * scale + offset
            if not isinstance(c, torch.Tensor) or c.dtype != torch.float64 or not torch.equal(c, expected):
                return False
    return True


def _run(qnode, trace: _Trace, call: CallArgs):
    tensors = call.tensors
    inputs = tensors if trace.sources is None else trace.sources.inputs(tensors)
    variants = [Variant(trace.template, None, trace.gather.rebound(inputs))]
    (result,) = run_prepared(
        variants, trace.post, qnode.device, qnode.diff_method, qnode.gradient_device, result_device=call.device
    )
    return shaped_like(result, trace.out)  # (a static trace is made of analytic tapes only)


__all__ = ["StaticCache", "StaticStructureWarning", "STATIC_VERIFY_EVERY", "fingerprint"]

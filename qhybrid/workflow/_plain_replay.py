"""Plain qnodes: a recording equal to an earlier one runs the earlier one's trace.

A plain qnode runs the user's function on every call, as PennyLane's QNode does (its Python, its side effects, its
control flow). What followed the recording was the same work every call for a circuit that did not change: give
each lazy parameter its value, key the structure, gather the device's parameters from a thousand small tensors
(Q1000 p=2: ~25 ms of a 50 ms step after a 24 ms recording). Here the recording is compared with the earlier ones
of the same argument signature by its exact signature (``_replay_signature``: the operators, settings, constants and
parameter sources, the measurements, the returned structure): where one is equal, the call runs that recording's
trace (made at once; for a recording whose gates hold constants, which may change every call, at its second
sighting), a ``static_structure`` trace made from a lazy recording (``_static_lazy.trace_of``: the parameters
recomputed from the new arguments with the recorded ops, a cached device-ready tape), and the new recording's
parameters are made only if ``qnode.tape`` is read. Unlike ``static_structure=True`` nothing is assumed: the
function ran, and its recording is this one.

>>> import pennylane as qml, torch, qhybrid
>>> @qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")
... def f(g):
...     qml.Hadamard(0)
...     qml.IsingZZ(2 * g[0], wires=[0, 1])
...     return qml.expval(qml.X(0))
>>> [round(float(f(torch.tensor([t]))), 6) for t in (0.1, 0.2, 0.3)]  # later calls replay the first one's trace
[0.980067, 0.921061, 0.825336]
>>> f._replays.replayed
2
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..devices._observable_key import tape_parameters_fast
from ..interfaces._preprocess import _cacheable
from ..interfaces.torch import shift_expanded
from ._call_args import CallArgs
from ._replay_signature import signature
from ._static import _run, _Trace
from ._static_lazy import trace_of

UNRESOLVED = object()
"""What ``QNode.construct``'s ``recorded`` returns to keep the tape as recorded (not resolved)."""

REPLAY_SIGNATURES_KEPT = 16
"""Argument signatures whose recordings one qnode keeps (least recently used dropped)."""

_SEEN_ONCE = object()
"""A kept recording's trace before its second sighting (its gates hold constants)."""

RECORDINGS_KEPT = 4
"""Recordings (and traces) kept per argument signature: a function that records a few circuits in turn."""


class PlainReplays:
    """One plain qnode's traces, by argument signature and recording signature."""

    __slots__ = ("_kept", "_lock", "replayed")

    def __init__(self):
        self._kept: OrderedDict = OrderedDict()  # call signature -> [[recording signature, trace]]
        self._lock = threading.Lock()  # (threads sharing a qnode: the entries change under the recordings)
        self.replayed = 0
        """Calls that ran a kept trace (tests watch it)."""

    def __reduce__(self):  # a copied or pickled qnode keeps no traces (they hold this process's tapes)
        return (PlainReplays, ())

    def call(self, qnode, args, kwargs):
        """``qnode(*args, **kwargs)``: the function recorded, then a kept trace of an equal recording run (or the
        recording run the ordinary way, and kept to be traced when it comes again)."""
        call = CallArgs(args, kwargs)
        key = call.signature
        seen: dict = {}

        def recorded(tape, session, out):
            if key is None or getattr(qnode.device, "shots", None):
                return None
            mine = seen["signature"] = signature(tape, session, out, call.tensors)
            if mine is None:
                return None
            with self._lock:
                kept = self._kept.get(key)
                if kept is not None:
                    self._kept.move_to_end(key)
                    for entry in kept:
                        if entry[0] == mine:
                            seen["entry"] = entry
                            return UNRESOLVED if isinstance(entry[1], _Trace) else None
            return None

        groups: dict = {}
        tape, out = qnode.construct(args, kwargs, lazy=True, recorded=recorded, groups=groups)
        mine, entry = seen.get("signature"), seen.get("entry")
        if entry is not None and isinstance(entry[1], _Trace):
            self.replayed += 1
            return _run(qnode, entry[1], call)
        if mine is None or qnode._record_real or entry is not None and entry[1] is None:
            # nothing to compare, recorded from the tensors after all, or a recording known to have no trace
            return qnode._shaped(tape, out, args, kwargs)
        if entry is not None:  # its second sighting: the trace, run as later equal recordings will run it
            trace = self._trace(qnode, call, tape, out, groups)
            entry[1] = trace
            return qnode._shaped(tape, out, args, kwargs) if trace is None else _run(qnode, trace, call)
        # a first sighting: traced at once, unless its gates hold constants (which may change every call: traced from
        # their second sighting, the first runs the ordinary way)
        now = _cacheable(tape, tape_parameters_fast(tape))
        trace = self._trace(qnode, call, tape, out, groups) if now else _SEEN_ONCE
        with self._lock:
            entries = self._kept.setdefault(key, [])
            self._kept.move_to_end(key)
            entries.insert(0, [mine, trace])
            del entries[RECORDINGS_KEPT:]
            if len(self._kept) > REPLAY_SIGNATURES_KEPT:
                self._kept.popitem(last=False)
        if isinstance(trace, _Trace):
            return _run(qnode, trace, call)  # the first call runs as later ones will
        return qnode._shaped(tape, out, args, kwargs)

    @staticmethod
    def _trace(qnode, call, tape, out, groups):
        if shift_expanded([tape], qnode.device, qnode.diff_method, qnode.gradient_device)[0] is not tape:
            return None  # operators without shift rules, decomposed by every execution
        cached = trace_of(qnode, call, tape, groups)
        if cached is None:
            return None
        template, post, gather, sources = cached
        return _Trace(template, post, gather, out, None, sources)


__all__ = ["PlainReplays", "UNRESOLVED"]

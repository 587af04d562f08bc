"""What a plain qnode's lazy recording is, exactly, short of its arguments' values: two recordings with equal
signatures are the same circuit of the same arguments, so the second can run the first one's trace.

A recording qualifies where it is structural (as ``_static_lazy._structural`` asks: no argument's value was used,
every tensor parameter is a lazy image of an argument) and everything else it holds is plain data compared by value:

* each operator's kind, name and wires, its settings (numbers, strings, classes, wires, arrays, tuples of them, and
  operators among them with their own data: an ``Evolution``'s data leave out its generator's), the instance
  attributes of a user's operator class beyond PennyLane's own, and each parameter: a lazy one as (argument, flat
  positions, arithmetic steps, grad mode), a constant by type and exact value (floats by their hex digits: ``-0.0``
  is not ``0.0``);
* each measurement's kind, observable (``observable_key``: kinds, wires, settings, exact constants) and every other
  attribute by value (wires, a mutual information's wire groups, an entropy's ``log_base``, eigenvalues); no
  mid-circuit measurement values;
* the structure of what the function returned.

Anything else (a tensor made inside the function, a used value, a callable, a setting of a user's operator that no
value can stand for) makes the signature None: that recording is run the ordinary way.

>>> import torch, pennylane as qml
>>> from qhybrid.workflow._lazy_arguments import proxied
>>> from qhybrid.workflow._recording_queue import RecordingQueue
>>> def record(g):
...     (p,), _, session = proxied((g,), {})
...     with RecordingQueue() as q:
...         qml.RX(2 * p[0], 0)
...         out = qml.expval(qml.Z(0))
...     return signature(q.tape(), session, out, [g])
>>> record(torch.tensor([0.1])) == record(torch.tensor([0.7]))
True
"""

from __future__ import annotations

import pennylane as qml
import torch
from pennylane.measurements import MeasurementProcess

from ..devices._observable_key import Inexact, exact, observable_data, observable_key, own_attributes
from ..interfaces._preprocess import _PLAIN_GATES
from ._lazy import LazyParam
from ._static_lazy import values_unused

_INTERNED: dict = {}
_INTERNED_MAX = 1 << 16


class _NotPlain(Exception):
    """Something in the recording that is not compared by value."""


def _plain(v, datum=None):
    """``v`` (a setting or a constant parameter) as a value compared by ``==`` (``_observable_key.exact``: a float
    by its exact repr, ``-0.0`` is not ``0.0``); with ``datum`` (a setting), an operator among them with its own data
    (an ``Evolution``'s data leave out its generator's coefficients)."""
    t = type(v)
    if t is tuple or t is list:
        return (t, tuple(_plain(x, datum) for x in v))
    if datum is not None and isinstance(v, qml.operation.Operator):
        return _operator(v, datum)
    try:
        return exact(v)
    except Inexact:
        raise _NotPlain from None


def _settings(op, datum) -> tuple:
    hyper = op.hyperparameters
    if not hyper:
        return ()
    return tuple(sorted((k, _plain(v, datum)) for k, v in hyper.items()))


def _operator(op, datum) -> tuple:
    kind = type(op)
    data = tuple(datum(d) for d in op.data)
    if kind in _PLAIN_GATES:  # settings follow from kind and wires
        return (kind, op.name, op.wires, data)
    return (kind, op.name, op.wires, _settings(op, datum), data, _own_attributes(op))


def _own_attributes(op) -> tuple:
    try:
        return own_attributes(op)
    except Inexact:
        raise _NotPlain from None


_MEASUREMENT_HELD = frozenset(("obs", "mv", "id"))


def _measurement(mp) -> tuple:
    """Kind, observable key and every other attribute (wires, wire groups, ``log_base``, ...) by value."""
    if mp.mv is not None:
        raise _NotPlain
    held = tuple(sorted((k, _plain(v)) for k, v in vars(mp).items() if k not in _MEASUREMENT_HELD))
    if mp.obs is None:
        return (type(mp), held)
    if any(isinstance(d, torch.Tensor) for d in observable_data(mp.obs)):
        raise _NotPlain
    return (type(mp), held, observable_key(mp))


def _returned(out) -> object:
    """What the function returned, with its measurements as placeholders (their order is the tape's)."""
    if isinstance(out, MeasurementProcess):
        return MeasurementProcess
    if type(out) is list or type(out) is tuple:
        return (type(out), tuple(_returned(o) for o in out))
    if type(out) is dict:
        return (dict, tuple((k, _returned(v)) for k, v in out.items()))
    raise _NotPlain


def signature(tape, session, out, tensors) -> tuple | None:
    """The recording's signature (module notes), or None where it has none. ``tensors``: the call's tensor
    arguments, in order (a lazy parameter stands by its argument's position)."""
    if not values_unused(session):  # the recording may depend on a value
        return None
    at = {id(t): k for k, t in enumerate(tensors)}
    lazy: dict = {}  # id -> signature of each lazy parameter (alive in the tape meanwhile)

    def datum(d):
        if isinstance(d, LazyParam):
            found = lazy.get(id(d))
            if found is not None:
                return found
            position = at.get(id(d._root))
            if position is None or d._parent is not None and d._real is not None:
                raise _NotPlain  # another tensor's image, or one whose value was made (used)
            steps = tuple((kind, exact(c)) for kind, c in d._steps)
            index = d._index
            found = ("lazy", position, index.shape, index.tobytes(), steps, d._mode)
            # one object per distinct value: recordings compare by identity where they agree
            found = lazy[id(d)] = _INTERNED.setdefault(found, found)
            if len(_INTERNED) > _INTERNED_MAX:
                _INTERNED.clear()
            return found
        if isinstance(d, torch.Tensor):
            raise _NotPlain
        return _plain(d)

    plain, ops = _PLAIN_GATES, []
    append = ops.append
    try:
        # (the plain gates, most of a QAOA's 6,000, read without their properties or a generator: ~0.3 us each)
        for op in tape.operations:
            kind = type(op)
            if kind in plain:
                data = op.data
                # (``wires``, not ``_wires``: a named controlled gate keeps its target alone there)
                if len(data) == 1:
                    d = data[0]
                    found = lazy.get(id(d))
                    append((kind, op._name, op.wires, datum(d) if found is None else found))
                else:
                    append((kind, op._name, op.wires, tuple([datum(d) for d in data])))
            else:
                append(_operator(op, datum))
        measured = tuple(_measurement(mp) for mp in tape.measurements)
        returned = _returned(out)
    except _NotPlain:
        return None
    trainable = getattr(tape, "_trainable_params", None)
    return tuple(ops), measured, returned, None if trainable is None else tuple(trainable)


__all__ = ["signature"]

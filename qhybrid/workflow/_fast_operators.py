"""Common PennyLane gates made without PennyLane's constructor while a qnode records its function.

Making ``qml.IsingZZ(2 * g, wires=[u, v])`` takes 5-8 µs in PennyLane (its metaclass's call, ``Operator.__init__``
converting the wires, the interface lookup of the queue); a plain qnode runs the user's function every call, so that
is most of a plain Q100 p=2 step's recording (600 gates, ~4 ms). While a ``RecordingQueue`` is the active queue,
the gates below, called in their plain form (parameters, then wires; no ``id``), are built as the same instance
with the attributes PennyLane's constructor sets (``Wires`` of plain integer and string labels kept per label) and
queued, in ~1 µs. Anything else, and these gates called any other way, go through PennyLane.

The first fast instance of a class in a process is compared with one PennyLane builds from the same arguments
(the same attributes, equal values, the same parameter objects): a PennyLane version whose constructor sets
something else turns the class back to PennyLane's constructor, so the shortcut can only be skipped, never wrong.

>>> import pennylane as qml
>>> with fast_gates():
...     with RecordingQueue() as q:
...         op = qml.RX(0.5, wires=0)
>>> type(op).__name__, op.data, op.wires.tolist(), q.queue == [op]
('RX', (0.5,), [0], True)
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pennylane as qml
from pennylane.capture import enabled as capture_enabled
from pennylane.capture.capture_meta import CaptureMeta
from pennylane.operation import Operation, Operator
from pennylane.queuing import QueuingManager
from pennylane.wires import Wires

from ._recording_queue import RecordingQueue

_PLAIN_INIT_GATES = (
    "RX", "RY", "RZ", "PhaseShift", "Rot", "U1", "U2", "U3",
    "IsingXX", "IsingYY", "IsingZZ", "IsingXY",
    "Hadamard", "PauliX", "PauliY", "PauliZ", "S", "T", "SX", "SWAP", "ISWAP",
)  # fmt: skip
"""Gates whose ``__init__`` hands (parameters, wires, id) to ``Operation.__init__`` and does nothing else."""

try:  # PennyLane's marker of a batch size not yet read from the parameters
    from pennylane.operation import _UNSET_BATCH_SIZE as _BATCH_UNSET
except ImportError:  # another PennyLane: no shortcut
    _PLAIN_INIT_GATES = ()

_FAST: dict[type, tuple[int, int, bool, bool]] = {}
"""class -> (number of parameters, number of wires, whether an instance holds its own ``grad_recipe``, whether its
first instance was checked against PennyLane's)."""
for _name in _PLAIN_INIT_GATES:
    _cls = getattr(qml, _name, None)
    if (
        isinstance(_cls, type)
        and issubclass(_cls, Operation)
        and isinstance(_cls.num_params, int)
        and isinstance(_cls.num_wires, int)
        and _cls.queue is Operator.queue
        and _cls.__new__ is object.__new__
    ):
        _FAST[_cls] = (_cls.num_params, _cls.num_wires, _cls.grad_recipe is None, False)

_WIRES: dict = {}
"""Plain wire labels (an int or str, or a list / tuple of them) -> (their ``Wires``, how many): immutable, so
shared (``Wires.__len__`` is a Python method: counted once)."""


def _wires(arg):
    """(``Wires(arg)``, its length), or None where ``arg`` is no plain label or list of them."""
    # exact types: True == 1 and hashes alike, but a bool label is no int label (nor is numpy's int)
    kind = type(arg)
    if kind is list or kind is tuple:
        for w in arg:
            if type(w) is not int and type(w) is not str:
                return None
        key = tuple(arg)
    elif kind is int or kind is str:
        key = arg
    else:
        return None
    found = _WIRES.get(key)
    if found is None:
        wires = Wires(arg)  # raises on repeated labels, before anything is kept
        found = (wires, len(wires))
        if len(_WIRES) < 65536:
            _WIRES[key] = found
    return found


_TEMPLATES: dict = {}
"""class -> the instance ``__dict__`` PennyLane's constructor sets, with this class's constants (a copy and
three entries a gate: a dict of nine built anew took ~0.5 us)."""
_MISSING = object()


def _template(cls, num_params: int) -> dict:
    template = _TEMPLATES.get(cls)
    if template is None:
        template = _TEMPLATES[cls] = {
            "_name": cls.__name__,
            "_id": None,
            "_pauli_rep": None,
            "_num_params": num_params,
            "_wires": None,
            "_batch_size": _BATCH_UNSET,
            "_ndim_params": _BATCH_UNSET,
            "data": (),
        }
    return template


def _made(cls, args: tuple, kwargs: dict, num_params: int, num_wires: int, recipe: bool):
    """The instance PennyLane's constructor would make of ``cls(*args, **kwargs)``, or None for an unusual call."""
    if kwargs:
        if len(kwargs) != 1 or len(args) != num_params:
            return None
        wire_arg = kwargs.get("wires", _MISSING)
        if wire_arg is _MISSING:
            return None
        params = args
    else:
        if len(args) != num_params + 1:
            return None
        wire_arg = args[-1]
        params = args[:-1]
    for p in params:
        if isinstance(p, (list, tuple)):  # PennyLane makes these arrays
            return None
    found = _wires(wire_arg)
    if found is None:
        if wire_arg is None:  # PennyLane's "Must specify the wires" error
            return None
        wires = Wires(wire_arg)
        found = (wires, len(wires))
    if found[1] != num_wires:
        return None  # PennyLane's error
    attributes = _template(cls, num_params).copy()
    attributes["_wires"] = found[0]
    attributes["data"] = params
    if recipe:
        attributes["grad_recipe"] = [None] * num_params
    op = object.__new__(cls)
    op.__dict__ = attributes
    return op


def _same_as_pennylane(cls, op, args, kwargs) -> bool:
    with QueuingManager.stop_recording():
        try:
            reference = _pennylane_call(cls, *args, **kwargs)
        except Exception:  # noqa: BLE001 - PennyLane refuses the call: so must the fast path
            return False
    mine, theirs = vars(op), vars(reference)
    if mine.keys() != theirs.keys():
        return False
    for key, value in theirs.items():
        if key == "data":
            if len(value) != len(mine[key]) or any(a is not b for a, b in zip(value, mine[key])):
                return False
        elif not (type(value) is type(mine[key]) and value == mine[key]):
            return False
    return True


def _fast_call(cls, *args, **kwargs):
    entry = _FAST.get(cls)
    if entry is not None and not capture_enabled():
        queue = QueuingManager.active_context()
        if type(queue) is RecordingQueue:
            num_params, num_wires, recipe, checked = entry
            op = _made(cls, args, kwargs, num_params, num_wires, recipe)
            if op is not None:
                if not checked:
                    if not _same_as_pennylane(cls, op, args, kwargs):
                        del _FAST[cls]
                        return _pennylane_call(cls, *args, **kwargs)
                    _FAST[cls] = (num_params, num_wires, recipe, True)
                queue._entries[id(op)] = (op, {})  # ``RecordingQueue.append``
                return op
    return _pennylane_call(cls, *args, **kwargs)


_pennylane_call = CaptureMeta.__call__
"""PennyLane's call (or whatever held ``CaptureMeta.__call__`` when the outermost ``fast_gates`` began)."""
_lock = threading.Lock()
_depth = 0


@contextmanager
def fast_gates():
    """Within: the gates above are made by the shortcut while a ``RecordingQueue`` is PennyLane's active queue.

    ``CaptureMeta.__call__`` (the call of every PennyLane operator class) is replaced for the duration only, and
    put back by the outermost exit; nested and concurrent uses share one replacement."""
    global _depth, _pennylane_call
    with _lock:
        if _depth == 0:
            _pennylane_call = CaptureMeta.__call__
            CaptureMeta.__call__ = _fast_call
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                CaptureMeta.__call__ = _pennylane_call


__all__ = ["fast_gates"]

"""The queue a qnode records its function into: PennyLane's ``AnnotatedQueue`` kept in a plain dict by identity.

PennyLane's queue is an ``OrderedDict`` keyed by ``WrappedObj`` (a Python object whose ``__hash__`` and ``__eq__``
are Python functions): every operator a user's function makes is wrapped and hashed three times on its way in,
and ``QuantumScript.from_queue`` then copies the queue into a tuple of pairs and walks it again. At a few
microseconds a gate that was a tenth of a plain Q1000 p=2 step's recording (6,000 gates). Here the same
operations (``append``, ``remove``, ``update_info``, ``get_info``, ``items``, ``queue``, membership, indexing)
work on ``{id(obj): (obj, info)}``, in the order objects were first queued as PennyLane's; ``tape`` splits it
into operators and measurements in one pass and leaves anything unusual to PennyLane's ``process_queue`` (its
errors and warnings).

>>> import pennylane as qml
>>> with RecordingQueue() as q:
...     op = qml.RX(0.1, 0)
...     _ = qml.expval(qml.Z(0))
>>> tape = q.tape()
>>> tape.operations[0] is op, [type(m).__name__ for m in tape.measurements]
(True, ['ExpectationMP'])
"""

from __future__ import annotations

from contextlib import contextmanager

import pennylane as qml
from pennylane.exceptions import QueuingError
from pennylane.queuing import AnnotatedQueue, QueuingManager, WrappedObj, process_queue


STOP_RECORDING_WAIT_S = 2.0
"""How long ``stop_recording`` waits for another thread's recording to end before it swaps the list anyway (as
PennyLane does): a thread that records and waits on a worker that stops recording (a nested qnode's execution spread
over threads) must not hang."""


@contextmanager
def _stop_recording_locked(cls):
    """PennyLane's ``QueuingManager.stop_recording`` under the lock every recording holds. PennyLane swaps its one,
    process-wide list of active queues outside that lock: a thread running a transform or a decomposition meanwhile
    emptied the list under another thread's recording, whose gates then queued nowhere (lost from its tape) and
    whose exit popped an empty list (``IndexError`` in threads sharing a qnode). Under the lock the swap waits for
    the recording (at most ``STOP_RECORDING_WAIT_S``); a recording thread's own calls re-enter it (a reentrant
    lock)."""
    locked = AnnotatedQueue._lock.acquire(timeout=STOP_RECORDING_WAIT_S)
    try:
        previously_active = cls._active_contexts
        cls._active_contexts = []
        try:
            yield
        finally:
            cls._active_contexts = previously_active
    finally:
        if locked:
            AnnotatedQueue._lock.release()


QueuingManager.stop_recording = classmethod(_stop_recording_locked)


def _unwrapped(obj):
    return obj.obj if type(obj) is WrappedObj else obj


class RecordingQueue(AnnotatedQueue):
    """An ``AnnotatedQueue`` whose entries live in ``{id(obj): (obj, info)}`` (the objects are held, so their
    identities are not reused while queued)."""

    def __init__(self):
        super().__init__()
        self._entries: dict = {}

    def __exit__(self, exception_type, exception_value, traceback):
        # PennyLane's ``stop_recording`` in another thread swaps its global list of active queues outside this
        # lock, so the pop may find the list empty: the lock is released whatever happens, else this thread ends
        # holding it and every later recording waits forever (threads sharing a qnode hung in a test run)
        try:
            qml.QueuingManager.remove_active_queue()
        finally:
            AnnotatedQueue._lock.release()

    def append(self, obj, **kwargs):
        obj = _unwrapped(obj)
        self._entries[id(obj)] = (obj, kwargs)  # a queued object keeps its place, as in an OrderedDict

    def remove(self, obj):
        self._entries.pop(id(_unwrapped(obj)), None)

    def update_info(self, obj, **kwargs):
        entry = self._entries.get(id(_unwrapped(obj)))
        if entry is not None:
            entry[1].update(kwargs)

    def get_info(self, obj):
        obj = _unwrapped(obj)
        entry = self._entries.get(id(obj))
        if entry is None:
            raise QueuingError(f"Object {obj} not in the queue.")
        return entry[1]

    def items(self):
        return tuple(self._entries.values())

    @property
    def queue(self):
        return [obj for obj, _ in self._entries.values()]

    def keys(self):
        return [WrappedObj(obj) for obj, _ in self._entries.values()]

    def values(self):
        return [info for _, info in self._entries.values()]

    def __setitem__(self, key, value):
        key = _unwrapped(key)
        self._entries[id(key)] = (key, value)

    def __getitem__(self, key):
        entry = self._entries.get(id(_unwrapped(key)))
        if entry is None:
            raise KeyError(key)
        return entry[1]

    def __delitem__(self, key):
        del self._entries[id(_unwrapped(key))]

    def __contains__(self, key):
        return id(_unwrapped(key)) in self._entries

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return iter(self.keys())

    def get(self, key, default=None):
        entry = self._entries.get(id(_unwrapped(key)))
        return default if entry is None else entry[1]

    def tape(self) -> qml.tape.QuantumScript:
        """The queue as a tape: operators, then measurements (as ``QuantumScript.from_queue``)."""
        ops, measurements = [], []
        for obj, _ in self._entries.values():
            category = getattr(obj, "_queue_category", 0)
            if category == "_ops" and not measurements:
                ops.append(obj)
            elif category == "_measurements":
                measurements.append(obj)
            else:  # not queueable, an operator after a measurement, or a deprecated category: PennyLane's word
                return qml.tape.QuantumScript(*process_queue(self))
        return qml.tape.QuantumScript(ops, measurements)


__all__ = ["RecordingQueue"]

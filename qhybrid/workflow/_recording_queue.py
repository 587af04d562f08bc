"""The queue a qnode records its function into: PennyLane's ``AnnotatedQueue`` kept in a plain dict by identity.

PennyLane's queue is an ``OrderedDict`` keyed by ``WrappedObj`` (a Python object whose ``__hash__`` and ``__eq__``
are Python functions): every operator a user's function makes is wrapped and hashed three times on its way in,
and ``QuantumScript.from_queue`` then copies the queue into a tuple of pairs and walks it again. At a few
microseconds a gate that was a tenth of a plain Q1000 p=2 step's recording (6,000 gates). Here the same
operations (``append``, ``remove``, ``update_info``, ``get_info``, ``items``, ``queue``, membership, indexing)
work on ``{id(obj): (obj, info)}``, in the order objects were first queued as PennyLane's; ``tape`` splits it
into operators and measurements in one pass and leaves anything unusual to PennyLane's ``process_queue`` (its
errors and warnings). Importing it also makes PennyLane's queuing per thread (``_queue_per_thread``).

>>> import pennylane as qml
>>> with RecordingQueue() as q:
...     op = qml.RX(0.1, 0)
...     _ = qml.expval(qml.Z(0))
>>> tape = q.tape()
>>> tape.operations[0] is op, [type(m).__name__ for m in tape.measurements]
(True, ['ExpectationMP'])
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pennylane as qml
from pennylane.exceptions import QueuingError
from pennylane.queuing import AnnotatedQueue, QueuingManager, WrappedObj, process_queue


class _ThreadQueues(threading.local):
    """Each thread's own stack of active queues (PennyLane keeps one list for the whole process)."""

    def __init__(self):
        self.contexts: list = []


_THREAD_QUEUES = _ThreadQueues()


class _Unlocked:
    """What replaces ``AnnotatedQueue._lock``: recordings need not take turns once each thread has its own stack."""

    def acquire(self, blocking=True, timeout=-1):
        return True

    def release(self):
        pass


def _queue_per_thread() -> None:
    """PennyLane's queuing made per thread. ``QueuingManager`` keeps one process-wide list of active queues, so an
    operator made in any thread queues into whatever another thread is recording: a device executing in one thread
    (its decompositions, rebuilt operators) put gates into a PennyLane QNode recording in another ("ops operation
    RX must occur prior to measurements", or a silently wrong tape), and ``stop_recording`` swapped the list under
    another thread's recording (its gates lost). PennyLane's answer, a process-wide lock every recording holds,
    covers recordings only, and a recording that waits on a thread that records (a nested call spread over threads)
    would deadlock on it. Here each thread has its own stack: a thread's recording holds that thread's operators
    alone, and recordings no longer take turns (the lock is a no-op)."""

    def add_active_queue(cls, queue):
        _THREAD_QUEUES.contexts.append(queue)

    def remove_active_queue(cls):
        return _THREAD_QUEUES.contexts.pop()

    def recording(cls):
        return bool(_THREAD_QUEUES.contexts)

    def active_context(cls):
        contexts = _THREAD_QUEUES.contexts
        return contexts[-1] if contexts else None

    @contextmanager
    def stop_recording(cls):
        previously_active = _THREAD_QUEUES.contexts
        _THREAD_QUEUES.contexts = []
        try:
            yield
        finally:
            _THREAD_QUEUES.contexts = previously_active

    for fn in (add_active_queue, remove_active_queue, recording, active_context, stop_recording):
        setattr(QueuingManager, fn.__name__, classmethod(fn))
    AnnotatedQueue._lock = _Unlocked()


_queue_per_thread()


def _unwrapped(obj):
    return obj.obj if type(obj) is WrappedObj else obj


class RecordingQueue(AnnotatedQueue):
    """An ``AnnotatedQueue`` whose entries live in ``{id(obj): (obj, info)}`` (the objects are held, so their
    identities are not reused while queued)."""

    def __init__(self):
        super().__init__()
        self._entries: dict = {}

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

"""Is a steady step capture-safe? Checked on the CPU, op by op, without a GPU.

A CUDA graph (``qhybrid.cuda_graph``, ``capture="cuda-graph"``) replays a step's kernels without Python, so a
captured step must never wait for a value on the host nor hand the GPU data from Python; each such touch is
also a stall of the GPU pipeline uncaptured. :func:`host_touches` runs a step (after warm-up calls that plan it
and fill the caches) under a ``TorchDispatchMode`` and a ``TorchFunctionMode`` and lists each touch with the
source line that made it:

* ``host read``: a value read back to Python (``item()``, ``bool(t)``, ``float(t)``, ``tolist()``, ``numpy()``,
  ``torch.equal``, ``torch.allclose``: ``_local_scalar_dense``, ``is_nonzero``, ``equal``, ``allclose``);
* ``host data``: a tensor built from Python or NumPy data (``torch.tensor(list)``, ``torch.as_tensor``,
  ``new_tensor``, ``torch.from_numpy``, indexing with a Python list: ``lift_fresh``), a host-to-device copy on
  a GPU. Fills (``torch.full``, ``zeros``, a Python scalar operand: ``scalar_tensor``) are device work and pass;
* ``data-dependent shape``: an op whose output size depends on values (``nonzero``, ``unique``, ``masked_select``,
  ``repeat_interleave`` by a tensor, boolean-mask indexing); ``nonzero_static`` passes;
* ``device move``: ``.to(device)`` / ``.cuda()`` / ``torch.as_tensor(t, device=...)`` of a tensor made before
  the step (a cached constant), other than the step's ``inputs`` and its parameters (tensors that require grad).

Limits on the CPU: a tensor's device cannot show whether a constant would sit on the host in a GPU run, so
every device move of a pre-existing tensor is flagged (keep constants on the tensors' device, made once per
device, and never move them in a step), while ``dst.copy_(src)`` from a host tensor and a device-to-host copy
are not seen at all. What passes here may still touch the host on a GPU only through those two.

>>> import torch, pennylane as qml, qhybrid
>>> from qhybrid.testing import host_touches
>>> dev = qhybrid.device("tensornet", wires=2)
>>> @qhybrid.qnode(dev, diff_method="adjoint")
... def f(w):
...     qml.RY(w[0], wires=0)
...     qml.CNOT(wires=[0, 1])
...     return qml.expval(qml.Z(1))
>>> w = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
>>> host_touches(lambda: f(w).backward())
[]
>>> {t.kind for t in host_touches(lambda: f(w).item())}
{'host read'}
"""

from __future__ import annotations

import collections
import os
import sys
from typing import Callable, Iterable, NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

HOST_READS = frozenset({"_local_scalar_dense", "item", "is_nonzero", "equal", "allclose"})
"""Aten ops that return a Python value computed on the device (the host waits for the GPU)."""

HOST_DATA = frozenset({"lift_fresh", "lift_fresh_copy"})
"""Aten ops that wrap a tensor built from Python / NumPy data (a host-to-device copy on a GPU)."""

DATA_DEPENDENT = frozenset(
    {"nonzero", "argwhere", "unique", "_unique", "_unique2", "unique_dim", "unique_consecutive",
     "unique_dim_consecutive", "masked_select", "bincount", "histogram"}
)
"""Aten ops whose output size depends on tensor values (the host must read it to allocate the output)."""

_HOST_METHODS = {torch.Tensor.tolist: "tolist", torch.Tensor.numpy: "numpy"}
"""Reads that never reach the dispatcher as an op of their own."""

_HERE = os.path.abspath(__file__)
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))
_PACKAGE = os.path.dirname(_HERE)


class Touch(NamedTuple):
    """One host touch: ``kind`` (``host read``, ``host data``, ``data-dependent shape``, ``device move``), the
    aten op or method, and ``where`` (the innermost qhybrid source line that made it, else the caller's)."""

    kind: str
    op: str
    where: str


def _where() -> str:
    frame, fallback = sys._getframe(2), None
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path != _HERE and not path.startswith(_TORCH):
            place = f"{os.path.relpath(path, os.path.dirname(_PACKAGE))}:{frame.f_lineno} ({frame.f_code.co_name})"
            if path.startswith(_PACKAGE + os.sep):
                return place
            fallback = fallback or place
        frame = frame.f_back
    return fallback or "?"


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # sparse or other storage-less tensors
        return 0


class _Record:
    """What the two modes share: the touches, and the storages made inside the step (or allowed to move)."""

    def __init__(self, inputs: Iterable[torch.Tensor]):
        self.touches: list[Touch] = []
        self.made = {_storage(t) for t in inputs if isinstance(t, torch.Tensor)} | {0}

    def add(self, kind: str, op: str):
        self.touches.append(Touch(kind, op, _where()))

    def resident(self, t) -> bool:
        return isinstance(t, torch.Tensor) and not t.requires_grad and _storage(t) not in self.made


class _Ops(TorchDispatchMode):
    def __init__(self, record: _Record):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        if name in HOST_READS:
            self.record.add("host read", name)
        elif name in HOST_DATA:
            self.record.add("host data", name)
        elif name in DATA_DEPENDENT:
            self.record.add("data-dependent shape", name)
        elif name == "repeat_interleave" and isinstance(args[0], torch.Tensor) and kwargs.get("output_size") is None:
            self.record.add("data-dependent shape", "repeat_interleave")
        elif name in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1]
        ):
            self.record.add("data-dependent shape", f"{name} (boolean mask)")
        out = func(*args, **kwargs)
        self.record.made.update(_storage(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


class _Calls(TorchFunctionMode):
    def __init__(self, record: _Record):
        super().__init__()
        self.record = record

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _HOST_METHODS:
            self.record.add("host read", _HOST_METHODS[func])
        elif func is torch.Tensor.to and self.record.resident(args[0]):
            if torch._C._nn._parse_to(*args[1:], **kwargs)[0] is not None:
                self.record.add("device move", "Tensor.to(device)")
        elif func is torch.Tensor.cuda and self.record.resident(args[0]):
            self.record.add("device move", "Tensor.cuda")
        elif func is torch.as_tensor and kwargs.get("device") is not None and self.record.resident(args[0]):
            self.record.add("device move", "torch.as_tensor(device=)")
        return func(*args, **kwargs)


class OpCount(TorchDispatchMode):
    """Counts the aten ops dispatched inside ``with`` (by name, overload dropped): a step's fixed cost on the CPU,
    and its kernel launches on a GPU.

    >>> import torch
    >>> x = torch.ones(3)
    >>> with OpCount() as count:
    ...     _ = (x * 2).sum()
    >>> count.total, count.ops["mul"]
    (2, 1)
    """

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.__name__.split(".")[0]] += 1
        return func(*args, **(kwargs or {}))


def host_touches(step: Callable[[], object], *, warmup: int = 2, inputs: Iterable[torch.Tensor] = ()) -> list[Touch]:
    """The host touches of one call of ``step`` after ``warmup`` untracked calls (see the module's docstring).

    Args:
        step: a function of no arguments (a forward and a backward, say).
        warmup: calls first (they plan the circuit and fill the caches; their touches are not counted).
        inputs: tensors made before the step that it may move to its device (the data it is fed).
    """
    for _ in range(warmup):
        step()
    record = _Record(inputs)
    with _Calls(record), _Ops(record):
        step()
    return record.touches


def describe(touches: Iterable[Touch]) -> str:
    """One line per distinct touch, commonest first: ``count x kind op at where``.

    >>> describe([Touch("host read", "item", "a.py:1 (f)")] * 2)
    '2 x host read item at a.py:1 (f)'
    """
    counts = collections.Counter(touches)
    return "\n".join(f"{n} x {t.kind} {t.op} at {t.where}" for t, n in counts.most_common())


def assert_no_host_touches(step: Callable[[], object], *, warmup: int = 2, inputs: Iterable[torch.Tensor] = ()):
    """Raise ``AssertionError`` naming each host touch of a steady call of ``step`` (see :func:`host_touches`).

    >>> import torch
    >>> x = torch.ones(3)
    >>> assert_no_host_touches(lambda: (x * 2).sum())
    >>> assert_no_host_touches(lambda: x[x > 0].sum())
    Traceback (most recent call last):
    ...
    AssertionError: a steady step touched the host 1 time(s) (none is capture-safe):
    1 x data-dependent shape index (boolean mask) at ...
    """
    touches = host_touches(step, warmup=warmup, inputs=inputs)
    if touches:
        raise AssertionError(
            f"a steady step touched the host {len(touches)} time(s) (none is capture-safe):\n{describe(touches)}"
        )

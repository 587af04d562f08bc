"""Lazy gate parameters: a qnode's tensor arguments recorded as index tables, not as one select per gate.

``qml.IsingZZ(2 * gamma[l], wires=[u, v])`` per edge used to dispatch a ``select`` and a ``mul`` per gate
before the device saw the tape (1,000 aten ops at Q100 p=2, more in their backward). While a plain qnode
records its function, each floating tensor argument is handed to it as a ``LazyParam``: a tensor with the
argument's shape, dtype, device and ``requires_grad`` and no data of its own. Indexing it (integers, slices,
``select``, ``unbind``, iteration, ``transpose`` / ``T`` / ``permute`` / ``reshape`` / ``flatten``) and
multiplying, dividing, adding or subtracting a Python number, or negating, make further ``LazyParam``s:
(root tensor, NumPy table of flat positions in it, the arithmetic steps in the order written) and no aten op.
**Anything else** replays the proxy's real value from the root with the very ops the user wrote (cached on
the proxy) and runs on plain tensors: values, autograd and Python control flow on values
(``if x[0] > 0``, ``float(x[0])``, ``print``, ``torch.sin``, ``qml.math``) are what they were. After the
recording ``_lazy_resolve.resolve`` gives the tape's proxies their values with one ``take`` per root and
steps, and the device gathers from those few tensors (``_variant.through_rows``).

>>> import torch
>>> from qhybrid.workflow._lazy_arguments import proxied
>>> w = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
>>> (p,), _, session = proxied((w,), {})
>>> q = -p[1:][1] / 3
>>> type(q).__name__, tuple(q._index.shape), int(q._index), q._steps
('LazyParam', (), 2, (('neg', None), ('div', 3)))
>>> torch.equal(torch.sin(q), torch.sin(-w[2] / 3))  # any other use: the real value
True
"""

from __future__ import annotations

import operator

import autoray
import numpy as np
import torch
from torch.utils._pytree import tree_map

ENABLED = True
"""Whether plain qnode calls record their tensor arguments lazily (False: as the tensors themselves)."""


class Unrecordable(RuntimeError):
    """An op torch runs past ``__torch_function__`` (``torch.as_tensor(x, dtype=...)`` copies in C++) met a proxy: its
    value cannot be made there with its gradient, so the qnode records the call again from the real tensors."""


def _is_number(c) -> bool:
    return isinstance(c, (int, float)) and not isinstance(c, bool)


class LazyParam(torch.Tensor):
    """A tensor argument, or an index / constant-arithmetic image of one, not computed yet (module notes)."""

    @staticmethod
    def __new__(cls, session, root, index, steps, parent, replay):
        mode = torch.is_grad_enabled()  # the mode it was made in: its value is replayed in that mode
        grad = root.requires_grad if parent is None else parent._needs and mode  # whether its value needs one
        cls = _LazyArray if index.ndim else cls  # (indexable: its integer indexes read in Python, see below)
        t = torch.Tensor._make_wrapper_subclass(cls, index.shape, dtype=root.dtype, device=root.device, requires_grad=grad)
        t._session, t._root, t._index, t._steps = session, root, index, steps
        t._parent, t._replay, t._real, t._eager, t._mode, t._needs = parent, replay, None, False, mode, grad
        t._children = {}
        session.made.append(t)
        return t

    def _derive(self, index, steps, replay, key=None):
        """A child proxy; with ``key`` (an integer index, a step with its number) the one made before for it,
        so ``2 * gamma[l]`` written per gate is two proxies a layer, not two a gate."""
        if self._session.eager:  # the arguments were written in place: every use is real from here on
            return replay(self._value())
        child = LazyParam(self._session, self._root, index, steps, self, replay)
        if key is not None:
            self._children[key] = child
        return child

    def _child(self, key):
        found = self._children.get(key)
        if found is not None and found._mode == torch.is_grad_enabled() and not self._session.eager:
            return found
        return None

    def _value(self) -> torch.Tensor:
        """The plain tensor this proxy stands for: replayed from its parent with the user's own op, once."""
        if self._real is None:
            if self._parent is None:
                self._real = self._root
            else:
                parent = self._parent._value()
                with torch.set_grad_enabled(self._mode):
                    real = self._replay(parent)
                if real.requires_grad != self._needs:
                    return real  # made where autograd is off below the Python level (torch.tensor([p, q])): not kept
                self._real = real
        return self._real

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is _GETITEM and len(args) == 2 and type(args[1]) is int and not kwargs:
            # ``gamma[l]`` per gate: the child made for the layer's first gate, before the handler and its key
            found = args[0]._children.get(("[]", args[1]))
            if found is not None and found._mode == torch.is_grad_enabled() and not args[0]._session.eager:
                return found
        kwargs = kwargs or {}
        if func in _METADATA:  # shape, dtype, ...: the wrapper's own, nothing computed
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        handler = _HANDLERS.get(func)
        if handler is not None and kwargs.get("out") is None:
            out = _handled(handler, args, kwargs)
            if out is not NotImplemented:
                return out
        name = getattr(func, "__name__", "")
        if _in_place(name, kwargs):
            _freeze((args, kwargs))
        args, kwargs = tree_map(_used, (args, kwargs))
        return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.detach.default and isinstance(args[0], LazyParam):
            # ``torch.tensor(p)`` detaches its data in C++, past ``__torch_function__``: the value, detached (a use
            # of the value, as ``_used`` counts it)
            args[0]._session.real_uses += 1
            with torch.no_grad():
                return args[0]._value().detach()
        raise Unrecordable(f"qhybrid: aten op {func} reached a lazy gate parameter past __torch_function__.")

    def __repr__(self, *, tensor_contents=None):
        return repr(self._value())


class _LazyArray(LazyParam):
    """A ``LazyParam`` of one dimension or more: ``gamma[l]`` or ``w[l, i]`` written per gate finds the proxy made
    before for it in Python, without torch's ``__torch_function__`` round trip (1.3 us an index, a fifth of what a
    gate costs to record). Only these define ``__getitem__`` in Python, which makes them sequences to CPython:
    a list of 0-d proxies (a Hamiltonian's coefficients) is still read by torch as tensors, one by one. (A list of
    rows, ``torch.tensor([w[0], w[1]])``, is read as nested lists: the values, where torch refuses real rows.)"""

    def __getitem__(self, idx):
        if type(idx) is int or type(idx) is tuple and all(type(i) is int for i in idx):
            found = self._children.get(("[]", idx))
            if found is not None and found._mode == torch.is_grad_enabled() and not self._session.eager:
                return found
        return _GETITEM(self, idx)


autoray.register_backend(LazyParam, "torch")
autoray.register_backend(_LazyArray, "torch")


def _used(x):
    """``x``'s real value where it is a proxy, that use counted (Python may branch on it): a static trace is then
    not made from the recording's structure alone (``_static_lazy``)."""
    if isinstance(x, LazyParam):
        x._session.real_uses += 1
        return x._value()
    return x


_IN_PLACE_DUNDERS = frozenset(
    "__setitem__ __iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__ __imod__ __ipow__ __imatmul__ __iand__ "
    "__ior__ __ixor__ __ilshift__ __irshift__".split()
)


def _in_place(name: str, kwargs) -> bool:
    if name in _IN_PLACE_DUNDERS or kwargs.get("out") is not None:
        return True
    return name.endswith("_") and not name.endswith("__")


def _freeze(tree) -> None:
    """Before an in-place op on a proxy (or with one): every proxy made so far gets its value now (views see
    the write, as they did), and later uses are real."""
    sessions = {id(x._session): x._session for x in torch.utils._pytree.tree_leaves(tree) if isinstance(x, LazyParam)}
    for s in sessions.values():
        s.eager = True
        for p in s.made:
            p._value()
            p._eager = True


# --- what stays lazy ---------------------------------------------------------------------------------


def _basic_index(idx) -> bool:
    parts = idx if isinstance(idx, tuple) else (idx,)
    for i in parts:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, slice):
            if not all(v is None or type(v) is int for v in (i.start, i.stop, i.step)) or (i.step or 1) < 1:
                return False  # torch takes no negative step: it says so itself
            continue
        if type(i) is not int:
            return False
    return True


def _getitem(self, idx):
    if not isinstance(self, LazyParam) or not _basic_index(idx):
        return NotImplemented
    key = ("[]", idx) if type(idx) is int or type(idx) is tuple and all(type(i) is int for i in idx) else None
    found = None if key is None else self._child(key)
    return found if found is not None else self._derive(np.asarray(self._index[idx]), self._steps, lambda t: t[idx], key)


def _select(self, dim, index):
    if not isinstance(self, LazyParam) or type(dim) is not int or type(index) is not int or self._index.ndim == 0:
        return NotImplemented
    dim = dim % self._index.ndim
    key = ("select", dim, index)
    found = self._child(key)
    return found if found is not None else self._derive(
        np.asarray(np.take(self._index, index, axis=dim)), self._steps, lambda t: t.select(dim, index), key
    )


def _unbind(self, dim=0):
    if not isinstance(self, LazyParam) or type(dim) is not int or self._index.ndim == 0:
        return NotImplemented
    return tuple(_select(self, dim, k) for k in range(self._index.shape[dim]))


def _iter(self):
    if not isinstance(self, LazyParam) or self._index.ndim == 0:
        return NotImplemented
    return iter(_unbind(self, 0))


def _transpose(self, d0, d1):
    if not isinstance(self, LazyParam) or type(d0) is not int or type(d1) is not int:
        return NotImplemented
    return self._derive(np.swapaxes(self._index, d0, d1), self._steps, lambda t: t.transpose(d0, d1))


def _t(self):
    if not isinstance(self, LazyParam) or self._index.ndim > 2:
        return NotImplemented
    return self._derive(self._index.T, self._steps, lambda t: t.t())


def _T(self):
    if not isinstance(self, LazyParam) or self._index.ndim != 2:
        return NotImplemented
    return self._derive(self._index.T, self._steps, lambda t: t.T)


def _permute(self, *dims):
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if not isinstance(self, LazyParam) or not all(type(d) is int for d in dims):
        return NotImplemented
    return self._derive(np.transpose(self._index, dims), self._steps, lambda t: t.permute(dims))


def _reshape(self, *shape):
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)) else shape
    if not isinstance(self, LazyParam) or not all(type(n) is int for n in shape):
        return NotImplemented
    return self._derive(self._index.reshape(shape), self._steps, lambda t: t.reshape(shape))


def _flatten(self, start_dim=0, end_dim=-1):
    if not isinstance(self, LazyParam) or (start_dim, end_dim) != (0, -1):
        return NotImplemented
    return self._derive(self._index.reshape(-1), self._steps, lambda t: t.flatten())


def _step(kind, op):
    """``self (op) c`` for a Python number ``c``: one more arithmetic step, replayed as written."""

    def handler(self, other=None, *, alpha=None, rounding_mode=None):
        if kind == "neg":
            other = None
        elif alpha is not None or rounding_mode is not None or not _is_number(other):
            return NotImplemented
        if not isinstance(self, LazyParam):
            return NotImplemented
        key = (kind, type(other), other if type(other) is int else float(other).hex() if other is not None else None)
        found = self._child(key)
        return found if found is not None else self._derive(self._index, self._steps + ((kind, other),), lambda t: op(t, other), key)

    return handler


def _commuted(kind, op):
    """``c (op) self`` reached as ``torch.mul(c, self)`` and the like (only where the order is immaterial)."""
    direct = _step(kind, op)

    def handler(a, b=None, **kw):
        if isinstance(b, LazyParam) and _is_number(a):
            return direct(b, a, **kw)
        return direct(a, b, **kw)

    return handler


_GETITEM = torch.Tensor.__getitem__
_mul = _commuted("mul", operator.mul)
_add = _commuted("add", operator.add)
_HANDLERS = {
    torch.Tensor.__getitem__: _getitem,
    torch.Tensor.select: _select,
    torch.select: _select,
    torch.Tensor.unbind: _unbind,
    torch.unbind: _unbind,
    torch.Tensor.__iter__: _iter,
    torch.Tensor.transpose: _transpose,
    torch.transpose: _transpose,
    torch.Tensor.t: _t,
    torch.t: _t,
    torch.Tensor.T.__get__: _T,
    torch.Tensor.permute: _permute,
    torch.permute: _permute,
    torch.Tensor.reshape: _reshape,
    torch.reshape: _reshape,
    torch.Tensor.flatten: _flatten,
    torch.flatten: _flatten,
    torch.Tensor.__mul__: _mul,
    torch.Tensor.__rmul__: _mul,
    torch.Tensor.mul: _mul,
    torch.mul: _mul,
    torch.Tensor.__add__: _add,
    torch.Tensor.__radd__: _add,
    torch.Tensor.add: _add,
    torch.add: _add,
    torch.Tensor.__truediv__: _step("div", operator.truediv),
    torch.Tensor.div: _step("div", operator.truediv),
    torch.div: _step("div", operator.truediv),
    torch.Tensor.__sub__: _step("sub", operator.sub),
    torch.Tensor.sub: _step("sub", operator.sub),
    torch.sub: _step("sub", operator.sub),
    torch.Tensor.__rsub__: _step("rsub", lambda t, c: c - t),
    torch.Tensor.__neg__: _step("neg", lambda t, c: -t),
    torch.Tensor.neg: _step("neg", lambda t, c: -t),
    torch.neg: _step("neg", lambda t, c: -t),
}


def _handled(handler, args, kwargs):
    """What ``handler`` makes of a call, or ``NotImplemented`` where it declines or the arguments are wrong (then
    the call runs for real on the value, and torch says what is wrong)."""
    try:
        return handler(*args, **kwargs)
    except (IndexError, TypeError, ValueError):
        return NotImplemented


def _operator(handler, slow, kind: str | None = None):
    """``LazyParam``'s own ``2 * p``, ``p / 3``, ...: the handler called straight from Python, not through torch's
    ``__torch_function__`` machinery (~10 us a call); where the handler declines, ``slow`` (the tensor's own
    operator) goes that way and replays the real value. ``kind``: the step it makes with a Python number, whose
    proxy made before is looked up first (``2 * gamma[l]`` per gate: the same child every gate of a layer)."""

    def method(self, *args):
        if kind is not None and len(args) == 1:
            c = args[0]
            t = type(c)
            if t is int or t is float:  # ``_step``'s key, for the numbers it keeps
                found = self._children.get((kind, t, c if t is int else c.hex()))
                if found is not None and found._mode == torch.is_grad_enabled() and not self._session.eager:
                    return found
        out = _handled(handler, (self, *args), {})
        return slow(self, *args) if out is NotImplemented else out

    method.__name__ = slow.__name__
    return method


# (``__getitem__`` only on proxies of one dimension or more, ``_LazyArray``: a class that defines it in Python is a
# sequence to CPython, and torch would read a list of 0-d proxies, such as a Hamiltonian's coefficients, as
# sequences)
_KINDS = {"__mul__": "mul", "__rmul__": "mul", "__add__": "add", "__radd__": "add", "__truediv__": "div",
          "__sub__": "sub", "__rsub__": "rsub", "__neg__": None}
for _name, _kind in _KINDS.items():
    setattr(LazyParam, _name, _operator(_HANDLERS[getattr(torch.Tensor, _name)], getattr(torch.Tensor, _name), _kind))

_METADATA = frozenset(
    {
        torch.Tensor.shape.__get__, torch.Tensor.dtype.__get__, torch.Tensor.device.__get__,
        torch.Tensor.requires_grad.__get__, torch.Tensor.ndim.__get__, torch.Tensor.layout.__get__,
        torch.Tensor.is_cuda.__get__, torch.Tensor.is_cpu.__get__, torch.Tensor.is_sparse.__get__,
        torch.Tensor.is_quantized.__get__, torch.Tensor.is_meta.__get__, torch.Tensor.is_nested.__get__,
        torch.Tensor.size, torch.Tensor.dim, torch.Tensor.ndimension, torch.Tensor.numel, torch.Tensor.nelement,
        torch.Tensor.is_floating_point, torch.Tensor.is_complex, torch.Tensor.__len__, torch.Tensor.element_size,
        torch.Tensor.get_device, torch.is_floating_point, torch.is_complex, torch.numel, torch.Tensor.__hash__,
    }
)


__all__ = ["LazyParam", "ENABLED", "Unrecordable"]

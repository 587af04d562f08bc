"""The lazy parameters of a recorded tape given their values: one ``take`` per group, not an op per gate.

The tape's ``LazyParam`` s (``_lazy``) are grouped by root, arithmetic steps and shape. A group's values are
``torch.take(root, table)`` (``table``: every member's flat positions, made once per layout and device)
followed by the group's steps with the same Python numbers in the order the user wrote them, so each value
is bit for bit what ``2 * gamma[l]`` gave; one ``unbind`` hands each gate its own tensor. The rows are
marked as rows of the group's values (``_variant.mark_rows``), so the device gathers its columns from those
few tensors and the backward is a few ops a group (``take``'s backward adds into the root). A proxy that is
its argument unchanged is the argument; one whose real value was made (used by something else: ``retain_grad``,
a hook, ``autograd.grad`` with respect to it, a frozen one after an in-place write) is that value.

>>> import torch, pennylane as qml
>>> from qhybrid.workflow._lazy_arguments import proxied
>>> g = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True)
>>> (p,), _, session = proxied((g,), {})
>>> tape = qml.tape.QuantumScript([qml.RX(2 * p[k % 2], 0) for k in range(4)], [qml.expval(qml.Z(0))])
>>> tape = resolve(tape)
>>> [type(x).__name__ for x in tape.get_parameters()], float(tape.get_parameters()[1].detach())
(['Tensor', 'Tensor', 'Tensor', 'Tensor'], 0.4)
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pennylane as qml
import torch

from .._variant import mark_rows
from ..devices.tensornet._rebound import rebound
from ..devices._observable_key import observable_data  # read once per object: Sum.data walks every term
from ._lazy import LazyParam, Unrecordable

TABLES_SIZE = 256
"""Index tables kept (least recently used dropped): a table per group layout and device, made on the first call
of a layout (a captured CUDA graph reads the one its warm-up calls made), as many as structures are kept."""

_TABLES: OrderedDict = OrderedDict()
_APPLY = {
    "mul": lambda t, c: t * c,
    "div": lambda t, c: t / c,
    "add": lambda t, c: t + c,
    "sub": lambda t, c: t - c,
    "rsub": lambda t, c: c - t,
    "neg": lambda t, c: -t,
}


class _Group:
    __slots__ = ("root", "steps", "shape", "grad", "where", "indexes", "rows", "table")

    def __init__(self, root, steps, shape, grad):
        self.root, self.steps, self.shape, self.grad = root, steps, shape, grad
        self.where: dict = {}
        self.indexes: list = []
        self.rows = None
        self.table = None

    def member(self, index: np.ndarray) -> int:
        key = int(index) if index.ndim == 0 else index.tobytes()
        m = self.where.get(key)
        if m is None:
            m = self.where[key] = len(self.indexes)
            self.indexes.append(index)
        return m

    def values(self):
        if self.rows is None:
            flat = np.stack(self.indexes)
            device = self.root.device
            key = (flat.tobytes(), flat.shape, device)
            table = _TABLES.get(key)
            if table is None:
                table = _TABLES[key] = torch.as_tensor(flat, dtype=torch.long, device=device)
                if len(_TABLES) > TABLES_SIZE:
                    _TABLES.popitem(last=False)
            else:
                _TABLES.move_to_end(key)
            self.table = table
            with torch.set_grad_enabled(self.grad):  # the grad mode the proxies were made in
                whole = torch.take(self.root, table)
                for kind, c in self.steps:
                    whole = _APPLY[kind](whole, c)
                self.rows = whole.unbind(0)
            mark_rows(whole, self.rows)
        return self.rows


def measured_proxies(tape: qml.tape.QuantumScript) -> bool:
    """Whether an observable of ``tape`` holds a ``LazyParam`` (its resolution rebuilds the observable)."""
    return any(isinstance(d, LazyParam) for mp in tape.measurements if mp.obs is not None for d in observable_data(mp.obs))


_DERIVED: dict = {}


def _data_derived(kind: type) -> bool:
    """Whether operators of ``kind`` compute their ``data`` from parts (a property: a new operator takes new
    values), asked once per kind."""
    derived = _DERIVED.get(kind)
    if derived is None:
        derived = _DERIVED[kind] = isinstance(getattr(kind, "data", None), property)
    return derived


def resolve(tape: qml.tape.QuantumScript, groups: dict | None = None) -> qml.tape.QuantumScript:
    """``tape`` with every ``LazyParam`` among its operators' and observables' data given its value (plain
    operators are updated in place, others copied). ``groups``: a dict that receives the groups made
    (``_Group``: root, steps, index ``table``, value ``rows``), for a static trace to replay them."""
    groups = {} if groups is None else groups
    found = []  # (data list, position, proxy id) to fill once the proxies have their values
    # a proxy is placed once however many gates read it (``2 * gamma[l]`` per edge: Q1000 p=2's 5,000 gate
    # parameters are four proxies), keyed by identity: every proxy is alive until the tape is resolved
    placed: dict = {}  # id -> (group, member), or (None, proxy) for one frozen, used by itself, or an argument

    def visit(data) -> list | None:
        new = None
        for j, d in enumerate(data):
            if not isinstance(d, LazyParam):
                continue
            if new is None:
                new = list(data)
            k = id(d)
            if k not in placed:
                if d._eager or d._real is not None or d._parent is None:
                    placed[k] = (None, d)
                else:
                    key = (id(d._root), d._steps, d._index.shape, d._mode)
                    g = groups.get(key)
                    if g is None:
                        g = groups[key] = _Group(d._root, d._steps, d._index.shape, d._mode)
                    placed[k] = (g, g.member(d._index))
            found.append((new, j, k))
        return new

    ops = tape.operations
    pending = [visit(op.data) for op in ops]
    mps = list(tape.measurements)
    obs_pending = [None if mp.obs is None else visit(observable_data(mp.obs)) for mp in mps]
    if not found:
        return tape
    values = {k: d._value() if g is None else g.values()[d] for k, (g, d) in placed.items()}
    for new, j, k in found:
        new[j] = values[k]
    ops, changed = list(ops), False
    for i, new in enumerate(pending):
        if new is None:
            continue
        op = ops[i]
        if _data_derived(type(op)) or getattr(op, "_pauli_rep", None) is not None:
            ops[i] = _bound(op, new)  # data derived from parts: a new operator
            changed = True
        else:
            held = op.__dict__.get("_hyperparameters")  # (the property costs ~1 us a gate, the lookup 0.1)
            if held and _holds_proxies(held.values()):
                # a template that keeps the operator it wraps (QuantumPhaseEstimation's unitary, a Reflection's
                # base) and decomposes from it: new data would not reach that operator, nor its gradient, so the
                # operator it keeps takes its values itself (recording the function again instead would run its
                # side effects twice: a seeded draw in it, a counter)
                _fill_kept(held.values(), op)
            op.data = tuple(new)
    for i, (mp, new) in enumerate(zip(mps, obs_pending)):
        if new is not None:
            mps[i] = type(mp)(obs=_bound(mp.obs, new))
            changed = True
    return tape.copy(operations=ops, measurements=mps) if changed else tape


_GENERIC_BIND = qml.ops.functions.bind_new_parameters.dispatch(object)


def _bound(op, new):
    """``op`` with data ``new``, or ``Unrecordable`` where PennyLane's binding cannot make it from lazy parameters: a
    kind without its own binding whose parts are operators (PrepSelPrep: the copy of its parts fails on the tensors
    made from the proxies), or a binding that fails (an ``Evolution`` of a ``Sum``)."""
    binding = qml.ops.functions.bind_new_parameters.dispatch(type(op))
    if binding is _GENERIC_BIND and op.hyperparameters and _holds_proxies(op.hyperparameters.values()):
        # its data are those of the operators it keeps (``Select``'s): they take their values in place
        _fill_kept(op.hyperparameters.values(), op)
        if any(isinstance(d, LazyParam) for d in op.data):
            raise Unrecordable(f"qhybrid: {op.name} holds an operator made from a lazy gate parameter.")
        return op
    try:
        # the device's own binding, where PennyLane's loses something (an evolution rebinds its generator from what
        # follows its parameter: a ``Hermitian`` generator lost its matrix, ``evolve(Hermitian(M), t)`` crashed)
        return rebound(op, new)
    except Exception as exc:  # noqa: BLE001 - any failure: the caller records from the real tensors instead
        raise Unrecordable(f"qhybrid: PennyLane could not bind new data to {op.name} ({exc}).") from exc


def _fill_kept(values, owner) -> None:
    """The lazy parameters of the operators among ``values`` (a template's hyperparameters, at any depth) replaced by
    their values in place; ``Unrecordable`` where one keeps its data otherwise (parts, a Pauli sentence)."""
    for v in values:
        if isinstance(v, (list, tuple)):
            _fill_kept(v, owner)
        elif isinstance(v, qml.operation.Operator):
            if any(isinstance(d, LazyParam) for d in v.data):
                if getattr(v, "_pauli_rep", None) is not None:
                    raise Unrecordable(f"qhybrid: {owner.name} holds an operator made from a lazy gate parameter.")
                if _data_derived(type(v)):  # an adjoint, a product: its data are its parts'
                    _fill_kept([getattr(v, "base", None), *getattr(v, "operands", ())], owner)
                    if any(isinstance(d, LazyParam) for d in v.data):
                        raise Unrecordable(f"qhybrid: {owner.name} holds an operator made from a lazy gate parameter.")
                else:
                    v.data = tuple(d._value() if isinstance(d, LazyParam) else d for d in v.data)
            if v.hyperparameters:
                _fill_kept(v.hyperparameters.values(), owner)


def _holds_proxies(values) -> bool:
    """Whether operators among ``values`` (a template's hyperparameters) carry a ``LazyParam``, at any depth."""
    for v in values:
        if isinstance(v, (list, tuple)):
            if _holds_proxies(v):
                return True
        elif isinstance(v, qml.operation.Operator):
            if any(isinstance(d, LazyParam) for d in v.data):
                return True
            if v.hyperparameters and _holds_proxies(v.hyperparameters.values()):
                return True
    return False


__all__ = ["measured_proxies", "resolve", "TABLES_SIZE"]

"""Structure keys of measured observables and constant operator data, cheap on every call.

A molecular Hamiltonian is a ``Sum`` of ~10^3 scaled Pauli words: its ``repr`` took 34 ms and PennyLane's
``hash`` 18-450 ms a call (H2O, 1,079 terms), which the preprocessing cache paid on every step to find a
tape it already had. The key of an observable with data is its operator tree (kinds, wires, settings and
the number of data each node holds) plus its constant data's values, computed once per observable object
and kept beside it, with the objects that hold its data: data set since (``H.data = ...``) make the key
again, and the Pauli sentences PennyLane kept from construction are made again with them.

>>> import pennylane as qml
>>> H = qml.dot([0.5, 0.25], [qml.X(0), qml.Z(0) @ qml.Z(1)])
>>> observable_key(qml.expval(H)) == observable_key(qml.expval(H))
True
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pennylane as qml
import torch

OBSERVABLE_KEYS_KEPT = 64
"""Observable objects whose keys are remembered (least recently used dropped)."""

_KEYS: OrderedDict = OrderedDict()


def constants_key(data) -> tuple:
    """The values of the constant (non-tensor) entries of ``data``; tensors stand as None (they are
    gathered inputs, values not structure)."""
    out = []
    for p in data:
        if isinstance(p, torch.Tensor):
            out.append(None)
        elif isinstance(p, (int, float, complex)):
            out.append(p)
        else:
            a = np.asarray(p)
            out.append((a.dtype.str, a.shape, a.tobytes()))
    return tuple(out)


def _tree(op) -> tuple:
    """An operator's tree: kind, wires, settings and data count per node (no values)."""
    operands = getattr(op, "operands", None)
    if isinstance(op, qml.ops.op_math.CompositeOp) and operands is not None:
        return (type(op), tuple(_tree(o) for o in operands))
    if type(op) is qml.ops.SProd and len(op.data) == 1 and not op.base.data and op.base.pauli_rep is not None:
        # a coefficient times a Pauli word (qml.dot's terms): its word is its structure (10^3 terms a call)
        return (qml.ops.SProd, tuple(op.base.pauli_rep.items()))
    if isinstance(op, qml.ops.op_math.SymbolicOp):
        extra = {k: v for k, v in op.hyperparameters.items() if k != "base"}
        return (type(op), len(op.data) - len(op.base.data), repr(sorted(extra.items())), _tree(op.base))
    hyper = op.hyperparameters
    return (type(op), op.name, tuple(op.wires), len(op.data), repr(sorted(hyper.items())) if hyper else "")


def _entry(obs) -> tuple:
    """(key, data) of an observable, computed once per object (``Sum.data`` walks every term: 5 ms for H2O) and
    made again when its data were set since (``H.data = ...``, ``term.scalar = ...``, an array written in place)."""
    hit = _KEYS.get(id(obs))
    if hit is not None and hit[0] is obs and _unchanged(obs, hit[2]):
        _KEYS.move_to_end(id(obs))
        return hit[1]
    data = tuple(obs.data)
    watch = _watch(obs, data)
    entry = (_Key(_key(obs, data) if data else _tree(obs)), data)
    # arrays among the data are checked on every hit: a ``Hermitian`` of a matrix changed in place is another
    # observable (its key held the old bytes, and a cached tape its own copy of them)
    arrays = tuple((a, a.tobytes()) for a in data if isinstance(a, np.ndarray))
    _KEYS[id(obs)] = (obs, entry, (*watch, arrays))  # the observable is held, so its id is not reused meanwhile
    if len(_KEYS) > OBSERVABLE_KEYS_KEPT:
        _KEYS.popitem(last=False)
    return entry


_SPROD = qml.ops.SProd
_COMPOSITE = qml.ops.op_math.CompositeOp
_SCALED = qml.ops.op_math.ScalarSymbolicOp
_SYMBOLIC = qml.ops.op_math.SymbolicOp
_NUMBERS = (int, float, complex)
_PROD = qml.ops.Prod
_PAULIS = frozenset((qml.PauliX, qml.PauliY, qml.PauliZ, qml.Identity))


def _scan(op, nodes: list, names: list) -> tuple[bool, bool]:
    """(whether every datum of ``op``'s tree sits in a node collected into ``nodes`` with the attribute holding
    it in ``names``: a scaled operator's ``scalar``, a plain operator's ``data`` tuple; whether a cached Pauli
    sentence was made again, ``refresh_pauli_reps``)."""
    if type(op) is _SPROD:
        nodes.append(op)
        names.append("scalar")
        base = op.base
        if type(base) in _PAULIS or type(base) is _PROD and all(type(o) in _PAULIS for o in base.operands):
            stale = False  # a word, which holds no data (qml.dot's terms: a walk a term, so kept short)
        else:
            tracked, stale = _scan(base, nodes, names)
            if not tracked:
                return False, _refresh_scaled(op, True)
        return True, _refresh_scaled(op, stale)
    if isinstance(op, _COMPOSITE):
        tracked, stale = True, False
        for o in op.operands:
            t, st = _scan(o, nodes, names)
            tracked &= t
            stale |= st
        if stale and hasattr(op, "_build_pauli_rep"):
            op._pauli_rep = op._build_pauli_rep()
        return tracked, stale
    if isinstance(op, _SYMBOLIC):
        if isinstance(op, _SCALED):
            nodes.append(op)
            names.append("scalar")
        tracked, stale = _scan(op.base, nodes, names)
        return tracked and (isinstance(op, _SCALED) or len(op.data) == len(op.base.data)), stale
    held = vars(op).get("data")
    if held is None:
        return not op.data, False
    if held:
        nodes.append(op)
        names.append("data")
    return True, False


def _refresh_scaled(op, stale: bool) -> bool:
    """``op``'s (a ``SProd``) sentence made again where its base's was, or where its numeric scalar no longer
    gives its coefficients, or where those are tensors: PennyLane's ``math.dot(coefficient, scalar)`` makes the
    number a tensor of torch's default dtype first (float32: 6e-8 off in float64). A tensor scalar is read from
    the data, not the sentence, and is left alone."""
    ps, base, scalar = op._pauli_rep, op.base.pauli_rep, op.scalar
    number = type(scalar) in _NUMBERS or isinstance(scalar, np.generic)
    tensors = number and base is not None and any(isinstance(c, torch.Tensor) for c in base.values())
    if not stale:
        if not number:
            return False
        if tensors:
            stale = True  # (compared, a tensor would be read back to the host)
        elif ps is None or base is None:
            stale = (ps is None) != (base is None)
        elif len(base) == 1:  # a word: one coefficient to check
            ((w, c),) = base.items()
            v = ps.get(w)
            stale = len(ps) != 1 or v is None or v != c * scalar
        else:
            stale = ps.keys() != base.keys() or any(ps[w] != c * scalar for w, c in base.items())
        if not stale:
            return False
    # PennyLane's own construction (``SProd.__init__``), a tensor coefficient times a number exactly
    op._pauli_rep = (
        qml.pauli.PauliSentence(
            {w: c * scalar if tensors and isinstance(c, torch.Tensor) else qml.math.dot(c, scalar) for w, c in base.items()}
        )
        if base is not None and op.batch_size is None
        else None
    )
    return True


def _watch(obs, data: tuple) -> tuple:
    """What tells, cheaply, that ``obs``'s data (``data``, read now) were set after its key was made: the objects
    its holders hold (compared by identity), or its whole data where some node keeps them otherwise. Makes its
    stale Pauli sentences again on the way (``refresh_pauli_reps``)."""
    nodes: list = []
    names: list = []
    tracked, _ = _scan(obs, nodes, names)
    if not tracked:
        return (None, None, data)
    return (nodes, names, list(map(getattr, nodes, names)))


def _unchanged(obs, watch) -> bool:
    nodes, names, held, arrays = watch
    if nodes is None:  # some node keeps its data otherwise: the whole data, compared one by one
        now = tuple(obs.data)
        same = len(now) == len(held) and all(
            a is b or (type(a) is type(b) and type(a) in (int, float, complex) and exact(a) == exact(b))
            for a, b in zip(now, held)
        )
    else:  # (list equality compares identity first: one C loop, ~30 ns a term)
        same = list(map(getattr, nodes, names)) == held
    return same and all(a.tobytes() == b for a, b in arrays)


def refresh_pauli_reps(op) -> bool:
    """Makes ``op``'s cached Pauli sentences (``pauli_rep``, kept from construction) agree with its data again,
    where they were set since (``H.data = ...``); True where something was made again.

    PennyLane builds a scaled operator's and a sum's ``pauli_rep`` once, in ``__init__``; setting ``data``
    later leaves it with the old coefficients (PennyLane's own shots and parameter-shift paths then use them,
    its backprop path the new ones), and every readout of qhybrid reads the sentence. A numeric scalar is
    compared with its sentence's coefficients (a few operations a term)."""
    return _scan(op, [], [])[1]


def observable_data(obs) -> tuple:
    """``obs.data``, remembered per observable object."""
    return _entry(obs)[1]


def tape_parameters_fast(tape) -> list:
    """``tape_parameters(tape)`` with each observable's data remembered per object."""
    params = [p for op in tape.operations for p in op.data]
    for mp in tape.measurements:
        if mp.obs is not None:
            params.extend(observable_data(mp.obs))
    return params


def _key(obs, data) -> tuple:
    """An observable's key: with constant data only and a Pauli representation, that sentence itself (equal
    sentences are one operator, whatever their trees); else its tree and constants."""
    ps = obs.pauli_rep
    if ps is not None and not any(isinstance(p, torch.Tensor) for p in data):
        try:
            return ("pauli", len(data), tuple(ps.items()))
        except TypeError:  # an unhashable coefficient
            pass
    return (_tree(obs), constants_key(data))


class _Key:
    """An observable's key, hashed once: the tuple of a ``Sum`` of 10^3 words is hashed term by term every time,
    and so was PennyLane's ``hash`` of a measured ``Sum`` without data (Q1000 p=2's 1,500 ``Z Z`` words: ~1 ms a
    lookup, two lookups a step)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple):
        self.value, self._hash = value, hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is _Key and self._hash == other._hash and self.value == other.value)

    def __repr__(self) -> str:
        return f"_Key({self.value!r})"


def observable_key(mp) -> object:
    """The structure key of measurement ``mp``: its kind and its observable's key (PennyLane's hash of a
    measurement without an observable: ``probs``, ``state``, ``sample`` of wires)."""
    obs = mp.obs
    if obs is None:
        return mp.hash
    return (type(mp), _entry(obs)[0])


class Inexact(Exception):
    """An attribute value ``own_attributes`` cannot key by value."""


_OPERATOR_ATTRIBUTES = frozenset(
    ("_name", "_id", "_pauli_rep", "_num_params", "_wires", "_batch_size", "_ndim_params", "data", "grad_recipe",
     "_hyperparameters", "queue_idx")
)


def own_attributes(op) -> tuple:
    """The instance attributes of a user's operator class beyond PennyLane's own, by exact value: a setting its
    matrix or decomposition reads, kept outside ``hyperparameters`` (an ``axis`` attribute changed between calls
    ran the old circuit from the cache). PennyLane's and qhybrid's classes keep theirs in ``hyperparameters``."""
    if type(op).__module__.startswith(("pennylane.", "qhybrid.")):
        return ()
    return tuple(sorted((k, exact(v)) for k, v in vars(op).items() if k not in _OPERATOR_ATTRIBUTES))


def exact(v):
    """``v`` (a number, string, class, wires, array or a tuple / list of them) as a value equal only to an equal one
    (floats by their exact repr; -0.0 is not 0.0); ``Inexact`` for anything else."""
    t = type(v)
    if v is None or t is str or isinstance(v, type):
        return v
    if t is bool or t is int:  # (True == 1: the type keeps them apart)
        return (t, v)
    if t in (float, complex):
        return (t, repr(v))
    if t in (tuple, list):
        return (t, tuple(exact(x) for x in v))
    if isinstance(v, qml.wires.Wires):
        return ("wires", v.labels)
    if isinstance(v, (np.ndarray, np.generic)) and np.asarray(v).dtype != object:
        a = np.asarray(v)
        return ("array", a.dtype.str, a.shape, a.tobytes())
    raise Inexact(f"{type(v).__name__} attribute")

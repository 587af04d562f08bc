"""The structure of a tape: what decides a network's shape, never its values.

Two tapes with the same gates on the same wires, the same broadcasting and the same measurements
share one structure, hence one network topology and one contraction plan.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import pennylane as qml
from pennylane.measurements import DensityMatrixMP, ProbabilityMP, StateMP
from pennylane.operation import _UNSET_BATCH_SIZE as _BATCH_UNSET
from pennylane.operation import Operator
from pennylane.wires import Wires

from ...errors import BroadcastError, UnsupportedOperationError, WireError
from .._observable_key import Inexact, observable_key, own_attributes
from ._gates import has_fast_builder

SKIPPED_OPS = frozenset({"Identity", "Barrier", "Snapshot"})
"""Operators with no effect on the state."""


@dataclass(frozen=True)
class Slot:
    """One operator of a tape as the network sees it."""

    kind: str  # "fast" | "matrix" | "const" | "prep" | "phase" | "channel"
    name: str
    wires: tuple[int, ...]  # positions among the simulated wires
    params: tuple[int, int]  # [start, stop) in the tape's flat parameter list
    batched: bool
    op_index: int  # position in tape.operations (for the operator's own matrix)


@dataclass(frozen=True)
class TapeStructure:
    key: tuple
    slots: tuple[Slot, ...]
    sim_wires: Wires
    batch_size: int | None
    n_op_params: int

    @cached_property
    def has_channels(self) -> bool:
        """Whether a slot is a noise channel (read on every call: kept, not rescanned)."""
        return any(slot.kind == "channel" for slot in self.slots)


def standard_wires(tape) -> Wires:
    """A device without wires simulates ``tape``'s wires in PennyLane's standard order (``map_to_standard_wires``):
    labels that are already 0..n-1 in label order, others as the tape first uses them (``qml.probs()`` of
    ``RY(., 1); RY(., 0)`` came back in the order [1, 0], default.qubit's being [0, 1])."""
    return Wires(sorted(tape.wires)) if tape._get_standard_wire_map() is None else tape.wires


def _needs_all_wires(mp) -> bool:
    return isinstance(mp, (StateMP, DensityMatrixMP, ProbabilityMP)) and not mp.wires and mp.obs is None


COMPLEX_DATA_OPS = frozenset({"QubitUnitary", "ControlledQubitUnitary", "DiagonalQubitUnitary", "BlockEncode", "DrawnUnitary"})
"""Operators whose data are matrices or vectors that may be complex; every other gate's data are angles."""

UNITARY_BY_CONSTRUCTION = frozenset({"DrawnUnitary"})
"""Matrix operators made unitary by qhybrid itself (trajectories' draws, ``engines/mixed/trajectories.py``): a run
does not check their values (a host read a step), as it does a user's ``QubitUnitary``."""


_NOT_UNITARY_KINDS = frozenset(
    {"SProd", "Sum", "Exp", "LinearCombination", "Hamiltonian", "Hermitian", "Projector", "BasisStateProjector",
     "StateVectorProjector"}
)  # fmt: skip
"""Operators whose matrix, used as a gate, is unitary only for some data (``qml.s_prod(1.5, X)``, ``qml.exp(X, 0.3)``)
or never (a projector). ``Evolution`` (``exp(-i t H)``, H Hermitian) is unitary."""
_WRAPPERS = (qml.ops.op_math.Adjoint, qml.ops.op_math.Pow, qml.ops.op_math.Controlled, qml.ops.op_math.Prod)
"""Operators unitary where what they wrap is (an adjoint, power, control or product of unitaries)."""


def wrapped_parts(op: Operator) -> list | None:
    """What an adjoint, power, control or product wraps (unitary where each part is), None for other operators."""
    if not isinstance(op, _WRAPPERS):
        return None
    parts = [op.base] if hasattr(op, "base") else list(getattr(op, "operands", ()) or ())
    return [p for p in parts if isinstance(p, Operator)]


def may_be_non_unitary(op: Operator) -> bool:
    """Whether ``op``'s matrix may fail to be unitary: a user's matrix (``QubitUnitary``, ...), a sum, scaled operator,
    exponential or projector used as a gate, or an adjoint, power, control or product of one. PennyLane's named gates
    and templates are unitary: their matrices are neither built nor read back to check them (a host read a step,
    and a template's matrix on many wires does not fit in memory).

    >>> may_be_non_unitary(qml.adjoint(qml.RX(0.3, 0))), may_be_non_unitary(qml.ctrl(qml.QubitUnitary(qml.math.eye(2), 0), 1))
    (False, True)
    """
    if op.name in UNITARY_BY_CONSTRUCTION:
        return False
    if op.name in COMPLEX_DATA_OPS or type(op).__name__ in _NOT_UNITARY_KINDS:
        return True
    parts = wrapped_parts(op)
    return parts is not None and any(may_be_non_unitary(p) for p in parts)


_NAMED_GATE_MODULES = frozenset(
    {"pennylane.ops.qubit.parametric_ops_single_qubit", "pennylane.ops.qubit.parametric_ops_multi_qubit",
     "pennylane.ops.qubit.parametric_ops_controlled", "pennylane.ops.qubit.non_parametric_ops",
     "pennylane.ops.qubit.qchem_ops", "pennylane.ops.qubit.arithmetic_ops", "pennylane.ops.qubit.special_unitary",
     "pennylane.ops.op_math.controlled_ops", "pennylane.ops.identity", "pennylane.ops.op_math.evolution"}
)  # fmt: skip
"""PennyLane's named gates (and ``exp(-i t H)``): unitary for every real angle, their matrices built so."""


def unitary_by_kind(op: Operator) -> bool:
    """Whether ``op`` is unitary whatever its values: one of PennyLane's named gates, or an adjoint, power, control or
    product of them. Anything else (a user's matrix, a class of the user's own) has its matrix checked where a run
    relies on unitarity (the adjoint walk).

    >>> unitary_by_kind(qml.adjoint(qml.U3(0.1, 0.2, 0.3, 0))), unitary_by_kind(qml.QubitUnitary(qml.math.eye(2), 0))
    (True, False)
    """
    if op.name in UNITARY_BY_CONSTRUCTION:
        return True
    if op.name in COMPLEX_DATA_OPS or type(op).__name__ in _NOT_UNITARY_KINDS:
        return False
    if type(op).__module__ in _NAMED_GATE_MODULES:  # (CNOT, CRX: controlled, and named)
        return True
    parts = wrapped_parts(op)
    return bool(parts) and all(unitary_by_kind(p) for p in parts)


def settings_repr(op: Operator) -> str:
    """``repr(op.hyperparameters)`` with an operator among them written by kind, wires and settings, not values: the
    repr of a controlled gate's base printed its angle, a read of a tensor to the host every step. (Its values are
    the operator's data, keyed apart.)

    >>> key = settings_repr(qml.ctrl(qml.RY(0.3, 0), control=[1, 2]))
    >>> "RY" in key, "0.3" in key
    (True, False)
    """
    try:
        own = own_attributes(op)
    except Inexact:  # a setting no key can hold: a key of its own (planned anew)
        return f"<unkeyed {next(_UNKEYED)}>"
    held = op.hyperparameters
    if not held:
        return repr(own) if own else ""
    return repr({k: _described(v) for k, v in held.items()}) + (repr(own) if own else "")


_UNKEYED = itertools.count()


def _described(v):
    if isinstance(v, Operator):
        return (type(v).__name__, v.name, tuple(v.wires), settings_repr(v))
    if isinstance(v, (list, tuple)) and any(isinstance(x, Operator) for x in v):
        return type(v)(_described(x) for x in v)
    return v


def decomposes(op: Operator) -> bool:
    """``op.has_decomposition``; where PennyLane's own test fails (a controlled gate with a batch of one indexes the
    batch as its matrix; a batched ``qml.exp`` asks a tensor of several values for a bool), whether it decomposes."""
    try:
        return bool(op.has_decomposition)
    except (IndexError, ValueError, TypeError, RuntimeError):
        try:
            op.decomposition()
        except Exception:  # noqa: BLE001 - no decomposition: the operator is taken whole (or refused by name)
            return False
        return True


def _complex_allowed(op: Operator) -> list[bool]:
    """Per entry of ``op.data``: whether it may be complex, a user's matrix or vector (``QubitUnitary``'s, also
    under an adjoint, power, control or product) or a scaled gate's factor (``qml.s_prod(exp(0.3j), Y)``: the
    unitary guard checks what it makes); angles may not."""
    if op.name in COMPLEX_DATA_OPS:
        return [True] * len(op.data)
    if isinstance(op, qml.ops.op_math.SProd):
        return [True] + _complex_allowed(op.base)
    parts = wrapped_parts(op)
    flags = [f for part in parts for f in _complex_allowed(part)] if parts else []
    return flags if len(flags) == len(op.data) else [False] * len(op.data)


def _check_real(op: Operator) -> None:
    if op.name in COMPLEX_DATA_OPS:
        return
    allowed = None
    for k, p in enumerate(op.data):
        if not _is_complex(p):
            continue
        allowed = _complex_allowed(op) if allowed is None else allowed  # (only where some datum is complex)
        if allowed[k]:
            continue
        if _holds_exp(op):  # its real part would make it non-unitary: not a rotation's angle
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} got the coefficient {_show(p)}: exp(c H) is unitary only for "
                "an imaginary c and a Hermitian H (qml.exp(H, -1j * t) runs as qml.evolve(H, t)); this one has a real "
                "part, or a base not known to be Hermitian. PennyLane's own parameter-shift shifts such a coefficient "
                "by a real amount: differentiate it with diff_method='adjoint' or 'backprop', or through "
                "qhybrid.qnode, whose parameter-shift takes it. For a matrix of your own use qml.QubitUnitary."
            )
        raise UnsupportedOperationError(
            f"{op.name} on wires {op.wires.tolist()} got a complex parameter {k} ({_show(p)}); gate angles "
            "must be real, or the gate is not unitary. Pass a real tensor (e.g. x.real), or use "
            "qml.QubitUnitary for a matrix of your own."
        )


def _holds_exp(op: Operator) -> bool:
    """Whether ``op`` is a ``qml.exp`` or wraps one (``qml.ctrl``, ``qml.adjoint``)."""
    return op.name == "Exp" or any(_holds_exp(part) for part in wrapped_parts(op) or ())


def _is_complex(p) -> bool:
    if isinstance(p, complex):
        return True
    dtype = getattr(p, "dtype", None)
    if dtype is None:
        return False
    return bool(getattr(dtype, "is_complex", False)) or getattr(dtype, "kind", "") == "c"


def _show(p) -> str:
    text = repr(p)
    return text if len(text) <= 60 else text[:57] + "..."


def _classify(op: Operator, touched: set) -> str:
    if isinstance(op, qml.operation.StatePrepBase):
        if touched.isdisjoint(op.wires):
            return "prep"
        raise UnsupportedOperationError(
            f"{op.name} on wires {op.wires.tolist()} comes after gates on those wires; the device "
            "prepares states only at the start. Decompose it (qml.transforms.decompose) or move it first."
        )
    if op.name == "GlobalPhase":
        return "phase"
    if isinstance(op, qml.operation.Channel):  # noise: runs on the mixed-state engine (engines.mixed)
        return "channel"
    if not op.has_matrix:
        raise UnsupportedOperationError(
            f"Operation {op.name} has no matrix and was not decomposed; qhybrid.tensornet supports every "
            "operator with a matrix. Decompose it into standard gates (qml.transforms.decompose) first."
        )
    if op.num_params == 0:
        return "const"
    _check_real(op)
    return "fast" if has_fast_builder(op.name) else "matrix"


def checked_batch_size(op: Operator) -> int | None:
    """``op.batch_size``, its parameters' dimensions refused by name (``BroadcastError``) where they are neither the
    operator's own nor one more (a batch). PennyLane's check raises once and leaves the operator's batch size None,
    so a second read took a ``(2, 1)`` angle beside a batch of 2 as unbatched (a wrong matrix, silently): the
    dimensions are checked here on every read."""
    try:
        batch = op.batch_size
        fixed = type(op).__dict__.get("ndim_params")  # a class's own fixed dimensions (a property elsewhere)
        if isinstance(fixed, tuple) and len(fixed) == len(op.data):
            ndims = tuple(qml.math.ndim(p) for p in op.data)
            if any(d not in (f, f + 1) for d, f in zip(ndims, fixed)):
                raise ValueError(
                    f"wrong number(s) of dimensions in parameters. Parameters with ndims {ndims} passed, {fixed} "
                    "expected (or one more, a leading batch axis)."
                )
            if batch is not None and ndims == fixed:  # a batch size kept from a copy of a batched operator
                # (PennyLane's broadcast_expand splits a broadcast MultiRZ into copies that keep their batch of 3)
                op._batch_size, batch = _BATCH_UNSET, None
    except ValueError as exc:
        raise BroadcastError(f"{op.name} on wires {op.wires.tolist()}: {exc}") from exc
    return batch


def op_slot(op: Operator, index: int, start: int, position: dict, touched: set) -> tuple[Slot, tuple, int | None]:
    """One operator's slot (``index`` in ``tape.operations``, its parameters from ``start`` in the flat
    list, wires mapped by ``position``; ``touched``: the wires acted on before, updated), its structure key
    and its batch size."""
    kind = _classify(op, touched)
    batch = checked_batch_size(op)
    wires = tuple(position[w] for w in op.wires)
    touched.update(op.wires)
    slot = Slot(kind, op.name, wires, (start, start + len(op.data)), batch is not None, index)
    hyper = settings_repr(op) if kind != "fast" else ""
    return slot, (kind, op.name, wires, slot.batched, hyper), batch


def measurement_key(measurements) -> tuple:
    """The measurements' part of a structure key (refusing measurements of mid-circuit measurements)."""
    for mp in measurements:
        if mp.mv is not None:
            raise UnsupportedOperationError(
                f"{type(mp).__name__} of a mid-circuit measurement is not supported by qhybrid.tensornet; "
                "apply qml.defer_measurements to the circuit first."
            )
    return tuple(observable_key(mp) for mp in measurements)


def tape_structure(tape: qml.tape.QuantumScript, device_wires: Wires | None) -> TapeStructure:
    """The structure key, slots and simulated wires of ``tape``.

    >>> s = tape_structure(qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))]), None)
    >>> s.slots[0].kind
    'fast'
    """
    if device_wires is not None:
        unknown = [w for w in tape.wires if w not in device_wires]
        if unknown:
            raise WireError(
                f"The tape uses wires {unknown} that the device does not have (device wires: "
                f"{device_wires.tolist()}). Create the device with those wires or relabel the circuit."
            )
        if any(_needs_all_wires(mp) for mp in tape.measurements):
            sim_wires = device_wires
        else:
            sim_wires = Wires([w for w in device_wires if w in tape.wires])
    else:
        sim_wires = standard_wires(tape)
    position = {w: i for i, w in enumerate(sim_wires)}

    slots, keys, touched = [], [], set()
    batch_sizes: dict[str, int] = {}
    start = 0
    for index, op in enumerate(tape.operations):
        n = len(op.data)
        if op.name in SKIPPED_OPS:
            start += n
            continue
        slot, key, batch = op_slot(op, index, start, position, touched)
        if batch is not None:
            batch_sizes[f"{op.name}{op.wires.tolist()}"] = batch
        slots.append(slot)
        keys.append(key)
        start += n

    sizes = set(batch_sizes.values())
    if len(sizes) > 1:
        detail = ", ".join(f"{k}: {v}" for k, v in batch_sizes.items())
        raise BroadcastError(
            f"Broadcast parameters disagree on the batch size ({detail}). Every broadcast parameter of a "
            "circuit needs the same leading dimension."
        )
    batch_size = sizes.pop() if sizes else None
    mkey = measurement_key(tape.measurements)
    key = (tuple(keys), mkey, tuple(sim_wires), batch_size)
    return TapeStructure(key, tuple(slots), sim_wires, batch_size, start)

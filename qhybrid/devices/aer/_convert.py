"""Tapes to parameterised Qiskit circuits, built once per circuit structure.

A structure is what the circuit's gates are and where they act, and what is measured, never the values
of gate parameters: every recipe parameter becomes a ``qiskit.circuit.Parameter`` whose value is an affine
function of one entry of the variant's flat parameter list. All parameter sets of one structure (every
element of a broadcast batch, every parameter-shift variant) then run as one Aer job with
``parameter_binds``. Only operators given by their matrix (QubitUnitary, matrix-only gates) put values in
the circuit; parameter sets whose matrices differ get their own circuit inside the same job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pennylane as qml
from pennylane.wires import Wires
from qiskit import QuantumCircuit
from qiskit.circuit import Parameter

from ...errors import UnsupportedOperationError
from ._gates import SKIPPED_OPS, Affine, is_matrix_op, qiskit_gate, steps_for, unitary_gate
from ._measure_analytic import AnalyticPlan
from ._noise import channel_error, is_channel, kraus_array
from ._measure_sampled import SamplePlan


def qubit_map(wires: Wires) -> Callable:
    """Device wire ``k`` of ``n`` is Qiskit qubit ``n - 1 - k`` (PennyLane's bit order for free)."""
    n = len(wires)
    index = {w: n - 1 - k for k, w in enumerate(wires)}
    return index.__getitem__


@dataclass(frozen=True)
class OpSlot:
    """One tape operation: how it is sent ("recipe", "matrix", "phase" or "skip") and its parameters."""

    kind: str
    name: str
    wires: tuple
    params: tuple[int, int]  # [start, stop) in the variant's flat parameter list
    steps: tuple = ()


def op_slots(tape: qml.tape.QuantumScript, basis: frozenset) -> tuple[OpSlot, ...]:
    """Classify every operation; a clear error for one the device cannot run as it stands."""
    slots, start = [], 0
    for op in tape.operations:
        stop = start + len(op.data)
        steps = steps_for(op)
        if op.name in SKIPPED_OPS:
            kind = "skip"
        elif op.name == "GlobalPhase":
            kind = "phase"
        elif is_channel(op):  # noise: an Aer QuantumError of its Kraus operators (_noise.py)
            kind = "channel"
        elif steps is not None and {s.gate for s in steps} <= basis:
            kind = "recipe"
        elif is_matrix_op(op):
            kind, steps = "matrix", ()
        else:
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} has no Qiskit equivalent on this Aer method and was not "
                "decomposed; run the tape through the device's preprocessing (qhybrid.execute or a QNode), or "
                "decompose it first."
            )
        slots.append(OpSlot(kind, op.name, tuple(op.wires), (start, stop), steps if kind != "matrix" else ()))
        start = stop
    return tuple(slots)


def is_ready(op: qml.operation.Operator, basis: frozenset) -> bool:
    """Whether ``op`` needs no decomposition on a simulator with these basis gates."""
    if op.name in SKIPPED_OPS or op.name == "GlobalPhase" or is_channel(op):
        return True
    steps = steps_for(op)
    if steps is not None and {s.gate for s in steps} <= basis:
        return True
    return is_matrix_op(op)


@dataclass
class Template:
    """A circuit with ``Parameter`` placeholders and where each placeholder's values come from."""

    circuit: QuantumCircuit
    parameters: list[Parameter] = field(default_factory=list)
    index: list[int] = field(default_factory=list)  # flat parameter feeding each placeholder
    scale: list[float] = field(default_factory=list)
    offset: list[float] = field(default_factory=list)

    def values(self, flat: dict[int, np.ndarray]) -> np.ndarray:
        """Placeholder values, shape (n_placeholders, n_sets), from each used flat parameter's values."""
        if not self.parameters:
            return np.zeros((0, 0))
        cols = np.stack([flat[i] for i in self.index])
        return cols * np.asarray(self.scale)[:, None] + np.asarray(self.offset)[:, None]


def _float(p) -> float:
    p = qml.math.unwrap(p)
    if hasattr(p, "detach"):
        p = p.detach().cpu().numpy()
    return float(np.real(p))


def build_template(
    slots: Sequence[OpSlot],
    tape: qml.tape.QuantumScript,
    wires: Wires,
    plan: AnalyticPlan | SamplePlan,
    matrices: dict[int, np.ndarray],
    finalize: Callable = lambda qc: qc,
) -> Template:
    """The circuit of one structure; ``matrices`` gives the matrix of each "matrix" slot (by position).

    ``finalize`` may rewrite the gates (e.g. transpile them to a noise model's basis) before the
    measurements or save instructions are appended.
    """
    qubit = qubit_map(wires)
    n_clbits = plan.n_clbits if isinstance(plan, SamplePlan) else 0
    qc = QuantumCircuit(len(wires), n_clbits)
    t = Template(qc)

    def place(step_wires, op_wires):
        return [qubit(op_wires[w]) for w in step_wires]

    for i, slot in enumerate(slots):
        if slot.kind == "skip" or (slot.kind == "phase" and not plan.needs_phase):
            continue
        if slot.kind == "matrix":
            qc.append(unitary_gate(matrices[i]), [qubit(w) for w in reversed(slot.wires)])
            continue
        if slot.kind == "channel":
            qc.append(channel_error(matrices[i]), [qubit(w) for w in reversed(slot.wires)])
            continue
        op_wires = slot.wires if slot.wires else (wires[0],)
        for step in slot.steps:
            params = []
            for p in step.params:
                if isinstance(p, Affine):
                    theta = Parameter(f"t{len(t.parameters)}")
                    t.parameters.append(theta)
                    t.index.append(slot.params[0] + p.index)
                    t.scale.append(p.scale)
                    t.offset.append(p.offset)
                    params.append(theta)
                else:
                    params.append(p)
            qc.append(qiskit_gate(step.gate, params, len(step.wires)), place(step.wires, op_wires))

    def emit(op):  # basis rotations before sampling: constants
        steps = steps_for(op)
        if steps is not None:
            for step in steps:
                params = [
                    p.scale * _float(op.data[p.index]) + p.offset if isinstance(p, Affine) else p for p in step.params
                ]
                qc.append(qiskit_gate(step.gate, params, len(step.wires)), place(step.wires, tuple(op.wires)))
        else:
            matrix = np.asarray(qml.math.unwrap(qml.matrix(op, wire_order=op.wires)), dtype=complex)
            qc.append(unitary_gate(matrix), [qubit(w) for w in reversed(op.wires)])

    if isinstance(plan, SamplePlan):
        plan.append_rotations(emit)
    t.circuit = qc = finalize(qc)
    plan.append_to(qc, qubit)
    return t


def slot_matrices(slots: Sequence[OpSlot], tape: qml.tape.QuantumScript, params: Sequence, batch: int) -> list[dict]:
    """For each parameter set of a variant, the matrices of its "matrix" slots and the Kraus operators
    ``[r, D, D]`` of its "channel" slots (empty dicts if none)."""
    out = [dict() for _ in range(batch)]
    for i, slot in enumerate(slots):
        if slot.kind not in ("matrix", "channel"):
            continue
        op = tape.operations[i]
        data = list(params[slot.params[0] : slot.params[1]])
        if any(d is not o for d, o in zip(data, op.data)):
            op = qml.ops.functions.bind_new_parameters(op, data)
        if slot.kind == "channel":
            kraus = kraus_array(op)
            for b in range(batch):
                out[b][i] = kraus[:, b] if kraus.ndim == 4 else kraus
            continue
        m = qml.math.unwrap(qml.matrix(op, wire_order=op.wires))
        if hasattr(m, "detach"):
            m = m.detach().cpu().numpy()
        m = np.asarray(m, dtype=complex)
        for b in range(batch):
            out[b][i] = m[b] if m.ndim == 3 else m
    return out


def matrix_key(matrices: dict[int, np.ndarray]) -> tuple:
    return tuple((i, m.tobytes()) for i, m in sorted(matrices.items()))


__all__ = ["OpSlot", "Template", "op_slots", "is_ready", "build_template", "slot_matrices", "matrix_key", "qubit_map"]

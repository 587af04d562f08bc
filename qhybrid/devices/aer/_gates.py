"""PennyLane gates as Qiskit instructions: one recipe table, one builder.

A recipe lists the Qiskit gates that reproduce a PennyLane gate exactly (global phase included). Each
Qiskit parameter is an affine function ``scale * p_k + offset`` of the PennyLane gate's own parameter
``p_k``, so a circuit is built once per structure with ``qiskit.circuit.Parameter`` placeholders and every
parameter set is bound at run time. Gates without a recipe are decomposed by PennyLane first (see
``AerDevice.preprocess_transforms``), or become a ``unitary`` instruction when they only have a matrix.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pennylane as qml
from qiskit.circuit import Gate
from qiskit.circuit.library import MCXGate, UnitaryGate, get_standard_gate_name_mapping

MATRIX_MAX_WIRES = 10
"""Matrix-only operators on more wires than this are decomposed rather than sent as one ``unitary``."""


class Affine(NamedTuple):
    """A Qiskit gate parameter computed from the PennyLane gate's parameter ``index``."""

    index: int
    scale: float = 1.0
    offset: float = 0.0


class Step(NamedTuple):
    """One Qiskit gate: its name, the positions (in the PennyLane op's wires) it acts on, its parameters.

    Each parameter is a constant float or an :class:`Affine` of the PennyLane gate's parameters.
    """

    gate: str
    wires: tuple[int, ...]
    params: tuple = ()


def _fixed(gate: str, n_wires: int) -> tuple[Step, ...]:
    return (Step(gate, tuple(range(n_wires))),)


def _rotation(gate: str, n_wires: int, n_params: int = 1) -> tuple[Step, ...]:
    return (Step(gate, tuple(range(n_wires)), tuple(Affine(k) for k in range(n_params))),)


RECIPES: dict[str, tuple[Step, ...]] = {
    "Hadamard": _fixed("h", 1),
    "PauliX": _fixed("x", 1),
    "PauliY": _fixed("y", 1),
    "PauliZ": _fixed("z", 1),
    "S": _fixed("s", 1),
    "T": _fixed("t", 1),
    "SX": _fixed("sx", 1),
    "Adjoint(S)": _fixed("sdg", 1),
    "Adjoint(T)": _fixed("tdg", 1),
    "Adjoint(SX)": _fixed("sxdg", 1),
    "CNOT": _fixed("cx", 2),
    "CZ": _fixed("cz", 2),
    "CY": _fixed("cy", 2),
    "SWAP": _fixed("swap", 2),
    "ECR": _fixed("ecr", 2),
    "Toffoli": _fixed("ccx", 3),
    "CCZ": _fixed("ccz", 3),
    "CSWAP": _fixed("cswap", 3),
    "RX": _rotation("rx", 1),
    "RY": _rotation("ry", 1),
    "RZ": _rotation("rz", 1),
    "PhaseShift": _rotation("p", 1),
    "U1": _rotation("p", 1),
    "U2": (Step("u", (0,), (math.pi / 2, Affine(0), Affine(1))),),
    "U3": _rotation("u", 1, 3),
    "Rot": (
        Step("rz", (0,), (Affine(0),)),
        Step("ry", (0,), (Affine(1),)),
        Step("rz", (0,), (Affine(2),)),
    ),
    # Aer 0.18 drops the angle of cp/crx/cry/crz bound through parameter_binds (it simulates angle 0),
    # so controlled rotations are sent as CNOTs around half-angle rotations of the target (exact).
    "ControlledPhaseShift": (
        Step("p", (0,), (Affine(0, 0.5),)),
        Step("cx", (0, 1)),
        Step("p", (1,), (Affine(0, -0.5),)),
        Step("cx", (0, 1)),
        Step("p", (1,), (Affine(0, 0.5),)),
    ),
    "CRX": (
        Step("rz", (1,), (math.pi / 2,)),
        Step("ry", (1,), (Affine(0, 0.5),)),
        Step("cx", (0, 1)),
        Step("ry", (1,), (Affine(0, -0.5),)),
        Step("cx", (0, 1)),
        Step("rz", (1,), (-math.pi / 2,)),
    ),
    "CRY": (
        Step("ry", (1,), (Affine(0, 0.5),)),
        Step("cx", (0, 1)),
        Step("ry", (1,), (Affine(0, -0.5),)),
        Step("cx", (0, 1)),
    ),
    "CRZ": (
        Step("p", (1,), (Affine(0, 0.5),)),
        Step("cx", (0, 1)),
        Step("p", (1,), (Affine(0, -0.5),)),
        Step("cx", (0, 1)),
    ),
    "IsingXX": _rotation("rxx", 2),
    "IsingYY": _rotation("ryy", 2),
    "IsingZZ": _rotation("rzz", 2),
    # PennyLane's GlobalPhase(phi) is exp(-i phi); rz(2 phi) p(-2 phi) is exactly that on any one qubit.
    # (Aer 0.18 ignores a parameterised circuit.global_phase when parameters are bound at run time.)
    "GlobalPhase": (
        Step("rz", (0,), (Affine(0, 2.0),)),
        Step("p", (0,), (Affine(0, -2.0),)),
    ),
}

SKIPPED_OPS = frozenset({"Identity", "Barrier", "Snapshot"})
"""Operators that change nothing the device measures."""

MATRIX_OPS = frozenset({"QubitUnitary"})
"""Operators sent to Aer as a ``unitary`` instruction even though PennyLane could decompose them."""

_GATES = get_standard_gate_name_mapping()


def steps_for(op: qml.operation.Operator) -> tuple[Step, ...] | None:
    """The recipe for ``op``, or None when it has none (MultiControlledX gets ``mcx`` on all its wires)."""
    recipe = RECIPES.get(op.name)
    if recipe is not None:
        return recipe
    if op.name == "MultiControlledX" and all(op.hyperparameters.get("control_values") or [True]):
        return (Step("mcx", tuple(range(len(op.wires)))),)
    return None


def recipe_gates(op: qml.operation.Operator) -> set[str]:
    steps = steps_for(op)
    return set() if steps is None else {s.gate for s in steps}


def is_matrix_op(op: qml.operation.Operator) -> bool:
    """Sent as a ``unitary`` built from its values: QubitUnitary, and matrix-only operators."""
    if not op.has_matrix or len(op.wires) > MATRIX_MAX_WIRES:
        return False
    if op.name in MATRIX_OPS:
        return True
    try:
        return not op.has_decomposition
    except (ValueError, IndexError, RuntimeError, TypeError):
        # a decomposition PennyLane decides from values it cannot read batched (an ``Exp``'s batched coefficient:
        # a broadcast FermionicSWAP): sent as its matrix, which every batch element has
        return True


def qiskit_gate(name: str, params: list, n_qubits: int) -> Gate:
    """A Qiskit gate instance by its name, with ``params`` (floats or ``Parameter`` objects)."""
    if name == "mcx":
        return MCXGate(n_qubits - 1)
    template = _GATES[name]
    if not params:
        return template
    return type(template)(*params)


def unitary_gate(matrix) -> UnitaryGate:
    return UnitaryGate(matrix, check_input=False)


__all__ = [
    "Affine",
    "Step",
    "RECIPES",
    "SKIPPED_OPS",
    "MATRIX_OPS",
    "MATRIX_MAX_WIRES",
    "steps_for",
    "recipe_gates",
    "is_matrix_op",
    "qiskit_gate",
    "unitary_gate",
]

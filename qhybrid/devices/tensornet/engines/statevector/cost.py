"""What a state-vector program costs, known before it is built: arithmetic (to choose an engine by) and
memory (refused above ``max_memory`` before anything is allocated).

Arithmetic is counted in the planner's unit, complex multiply-adds ("flops" in cotengra's sense), so that a
state vector and a closed network's contraction tree compare directly: a gate on ``k`` wires of a ``2**n``
state costs ``2**n * 2**k`` (a diagonal or permutation gate touches each amplitude once: ``2**n``), times the
stack and batch (``lead``), plus ``ACTION_FLOPS`` for what each op costs beyond its arithmetic.

Memory is the peak of live state-sized buffers: a run holds the state and the buffer its next action
writes into (``FORWARD_STATES``); the adjoint walk holds the final state kept for it, the walked state,
the cotangent and one spare (``ADJOINT_STATES``), plus the states the forward pass keeps for it
(``adjoint.KEEP_STATES_MAX_BYTES``); reading expectation values takes real probabilities (``READOUT_STATES``).

>>> state_memory(20, 1, 16, gradient=False).peak / 2**20  # MiB: two 16 MiB states and the probabilities
40.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .....errors import ContractionTooLargeError
from ..network.plan import _fmt_bytes
from .adjoint import KEEP_STATE_MAX_BYTES, KEEP_STATES_MAX_BYTES

ACTION_FLOPS = 2e4
"""What one state-vector action costs beyond its arithmetic (an op launch, about 20 us at 1 Gflop/s), in
flops: the same per-step charge the planner gives a network's pairwise step (``plan.STEP_FLOPS``)."""

GRADIENT_FACTOR = 3.0
"""Forward plus adjoint walk against forward alone: the walk un-applies each action to the state and to the
cotangent and reads the gate's cotangent (about three forward passes; a network's backward, torch reverse
mode through its pairwise steps, is charged the same)."""

FORWARD_STATES = 2
"""State-sized buffers live during a forward run (the state, and the buffer the next action writes into)."""

ADJOINT_STATES = 4
"""State-sized buffers live during the adjoint walk (the final state kept for it, the walked state, the
cotangent and one spare)."""

READOUT_STATES = 0.5
"""Reading expectation values takes the probabilities (real: half a complex state)."""

_DIAGONAL_OR_MONOMIAL = frozenset(
    {"RZ", "PhaseShift", "U1", "CRZ", "ControlledPhaseShift", "IsingZZ", "MultiRZ", "CZ", "CCZ", "Z", "S", "T",
     "CNOT", "CY", "Toffoli", "SWAP", "CSWAP", "PauliX", "PauliY", "PauliZ", "X", "Y", "ISWAP", "ECR"}
)
"""Gates that touch each amplitude once (a phase multiply or a permutation), whatever their wire count."""


@dataclass(frozen=True)
class StateMemory:
    """Bytes of one state (``state``) and of the program's peak (``peak``), with how many states that is."""

    state: float
    peak: float
    states: float


def state_memory(n: int, lead: int, itemsize: int, *, gradient: bool, actions: int | None = None) -> StateMemory:
    """Peak memory of a state-vector program on ``n`` wires with ``lead`` stacked rows times batch (``actions``:
    how many states the forward pass could keep for the walk at most; None: as many as its budget allows)."""
    state = float(1 << n) * lead * itemsize
    states = (ADJOINT_STATES if gradient else FORWARD_STATES) + READOUT_STATES
    kept = 0.0
    if gradient and state <= KEEP_STATE_MAX_BYTES:
        kept = (KEEP_STATES_MAX_BYTES // state) * state
        if actions is not None:
            kept = min(kept, actions * state)
    return StateMemory(state, state * states + kept, states)


def check_state_memory(n: int, lead: int, itemsize: int, max_memory: float, *, gradient: bool, what: str,
                       actions: int | None = None) -> None:
    """Refuse, before anything is allocated, a state-vector program whose peak would exceed ``max_memory``
    (``actions``: how many states its forward pass could keep for the walk at most, as ``state_memory``).

    >>> check_state_memory(30, 1, 16, 1e9, gradient=False, what="the circuit's state")
    Traceback (most recent call last):
    ...
    qhybrid.errors.ContractionTooLargeError: Simulating the circuit's state as a state vector needs about 40.0 GiB at its peak (2.5 states of 16.0 GiB: 1073741824 elements x 16 bytes), above max_memory=953.7 MiB. Use fewer wires or a smaller batch, measure local observables (their light cones are smaller), raise the device's max_memory, or simulate it approximately as a matrix product state: qhybrid.device('tensornet', ..., method="mps", max_bond_dim=64).
    """
    memory = state_memory(n, lead, itemsize, gradient=gradient, actions=actions)
    if memory.peak > max_memory:
        elements = (1 << n) * lead
        adjoint = ", with the adjoint walk's" if gradient else ""
        raise ContractionTooLargeError(
            f"Simulating {what} as a state vector needs about {_fmt_bytes(memory.peak)} at its peak "
            f"({memory.states:g} states{adjoint} of {_fmt_bytes(memory.state)}: {elements} elements x {itemsize} "
            f"bytes), above max_memory={_fmt_bytes(max_memory)}. Use fewer wires or a smaller batch, measure local "
            "observables (their light cones are smaller), raise the device's max_memory, or simulate it "
            "approximately as a matrix product state: qhybrid.device('tensornet', ..., method=\"mps\", max_bond_dim=64)."
        )


def rows_that_fit(structure, rows: int, itemsize: int, max_memory: float, gradient: bool) -> int:
    """How many of ``rows`` stacked rows of ``structure`` run as one state vector within ``max_memory`` (halving
    from all of them; at least one: a single row above it is the program's own refusal).

    >>> from types import SimpleNamespace
    >>> cone = SimpleNamespace(sim_wires=range(8), batch_size=None, slots=range(40))
    >>> rows_that_fit(cone, 145, 16, 2**20, gradient=False), rows_that_fit(cone, 145, 16, float("inf"), gradient=True)
    (73, 145)
    """
    if max_memory == math.inf:
        return rows
    n, batch, actions = len(structure.sim_wires), structure.batch_size or 1, len(structure.slots)
    while rows > 1 and state_memory(n, rows * batch, itemsize, gradient=gradient, actions=actions).peak > max_memory:
        rows = (rows + 1) // 2
    return rows


def state_flops(structure, lead: int, *, gradient: bool, measured_words: int = 1) -> float:
    """Flops of one run of ``structure`` as a state vector (``lead``: stack rows times batch), with its
    adjoint walk when ``gradient``."""
    size = float(1 << len(structure.sim_wires)) * lead
    total = 0.0
    for slot in structure.slots:
        if slot.kind == "phase":
            continue
        k = len(slot.wires)
        touches = 1 if slot.name in _DIAGONAL_OR_MONOMIAL else 1 << k
        total += size * touches + ACTION_FLOPS
    total += size * max(measured_words, 1)
    return total * (GRADIENT_FACTOR if gradient else 1.0)


__all__ = ["StateMemory", "state_memory", "state_flops", "check_state_memory", "ACTION_FLOPS", "GRADIENT_FACTOR"]

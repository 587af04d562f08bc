"""Density matrices, entropies and shots of a few wires: the circuit cut to the light cone of the measured wires.

Everything measured on wires ``S`` is a function of their reduced state, and that depends on the gates in the
reverse light cone of ``S`` alone: every other gate commutes past those to the end of the circuit, where it acts
on other wires only and the partial trace over them removes it. So where the whole state does not fit
``max_memory`` and a measurement needs a state (a density matrix, an entropy, or any measurement with shots), the
tape keeps that cone's gates alone and its state lies on the cone's wires: the same reduced density matrices, and
samples of the same distribution (drawn over fewer wires). Expectation values and probabilities without shots are
left to the engines, whose light cones and closed networks need no state, except where some operator holds a
matrix (a ``QubitUnitary``, a ``QubitChannel``'s Kraus operators), which light cones do not take: the cut leaves
out those outside the cone. Exact measurements that need a state beside ones that do not (a density matrix beside
expectations on wires across the circuit) are cut apart, each part to its own measured wires' cone: together their
cone was the whole circuit, refused as a state of many TiB.

Only where the whole state does not fit: a cut tape no longer holds the parameters of the gates it dropped, so
their gradients are None or zero (by the method; default.qubit's are zero), a result that depends on no parameter
left has no ``grad_fn``, and a seed draws other samples than from the whole state. A cut that drops every batched
gate repeats its exact results along the batch; with shots, it is not made (a batch's samples are independent draws).

Kept as it is: a measurement of every wire (``qml.sample()``, ``qml.counts()``, ``qml.state()``), state
preparations, and a matrix that is not unitary (a postselection's projector): the cone argument holds for unitary
gates and trace-preserving channels.

>>> tape = qml.tape.QuantumScript(
...     [qml.RY(0.3, 0), qml.CNOT([0, 1]), qml.RY(0.2, 40), qml.CNOT([40, 41])], [qml.density_matrix([0])]
... )
>>> (cut,), _ = measured_cone(tape, device_wires=None, max_memory=lambda: 100.0, itemsize=16)
>>> [op.name for op in cut.operations]  # (the CNOT on wires 40, 41 and its RY are outside the cone)
['RY', 'CNOT']
"""

from __future__ import annotations

from typing import Callable

import pennylane as qml
from pennylane.measurements import ExpectationMP, ProbabilityMP, StateMP, VarianceMP
from pennylane.tape import QuantumScript

from .._structure import tape_structure
from ..engines.lightcone.cones import GENERAL, cone_slots
from ..engines.lightcone.program import holds_matrix
from ..engines.lightcone.unitary_guard import non_unitary_matrix
from ..engines.mixed.program import DENSITY_PEAK_MATRICES
from ..engines.statevector.cost import state_memory

CUT_SLOT_KINDS = frozenset({"fast", "const", "matrix", "phase", "channel"})
"""Slots a cut tape may hold: unitary gates (matrices checked on their values), global phases and noise channels
(trace-preserving: one outside the cone is traced out with its wires)."""


def _first(results):
    return results[0]


def _needs_state(tape: QuantumScript) -> bool:
    """Whether some measurement of ``tape`` is read from a state: any with shots, else one that is not an
    expectation, a variance or the probabilities of wires (those the engines measure without a state)."""
    return bool(tape.shots) or any(map(_needs_state_alone, tape.measurements))


def _needs_state_alone(mp) -> bool:
    """Whether ``mp`` (exact) is read from a state: not an expectation, a variance or probabilities of wires."""
    return not (isinstance(mp, (ExpectationMP, VarianceMP)) or (isinstance(mp, ProbabilityMP) and mp.obs is None))


def _local(mp) -> bool:
    """Whether ``mp`` reads named wires (not every wire of the device, not a mid-circuit measurement's value)."""
    return len(mp.wires) > 0 and type(mp) is not StateMP and getattr(mp, "mv", None) is None


@qml.transform
def measured_cone(tape: QuantumScript, *, device_wires, max_memory: Callable[[], float], itemsize: int):
    """``tape`` cut to the reverse light cone of its measured wires where its whole state does not fit ``max_memory()``
    bytes and a measurement needs a state (see the module); else ``tape`` itself. Exact measurements that need a state
    beside ones the engines read without one (a density matrix beside local expectations) are cut apart: the cone of
    every measured wire together was the whole circuit."""
    if not tape.measurements or not all(map(_local, tape.measurements)):
        return (tape,), _first
    apart = [k for k, mp in enumerate(tape.measurements) if not tape.shots and _needs_state_alone(mp)]
    structure = None
    if 0 < len(apart) < len(tape.measurements):
        structure = tape_structure(tape, device_wires)
        if _whole_state_bytes(tape, structure, itemsize) > max_memory():
            rest = [k for k in range(len(tape.measurements)) if k not in apart]
            parts = [QuantumScript(tape.operations, [tape.measurements[k] for k in ks]) for ks in (apart, rest)]
            cuts = [_cut(part, device_wires, max_memory, itemsize) for part in parts]
            return tuple(c[0] for c in cuts), _Merged((apart, rest), tuple(c[1] for c in cuts))
    cut, post = _cut(tape, device_wires, max_memory, itemsize, structure)
    return (cut,), post


def _whole_state_bytes(tape: QuantumScript, structure, itemsize: int) -> float:
    """What the whole state of ``tape`` may take: with the states an adjoint walk keeps (exact; the engine's own
    check counts them), or one state and its readout (shots); a density matrix where it holds channels."""
    n, lead = len(structure.sim_wires), tape.batch_size or 1
    if structure.has_channels:  # (the density-matrix engine's own check: ``engines.mixed.program.peak_bytes``)
        return DENSITY_PEAK_MATRICES * float(1 << (2 * n)) * lead * itemsize
    return state_memory(n, lead, itemsize, gradient=not tape.shots).peak


def _cut(tape: QuantumScript, device_wires, max_memory: Callable[[], float], itemsize: int, structure=None):
    """``tape`` cut to its measured wires' cone where that is needed and allowed (``measured_cone``'s rule);
    ``structure``: the tape's, where it is made already."""
    # (light cones take scalar parameters alone: one matrix anywhere left a wide circuit to its whole state)
    if not _needs_state(tape) and not any(map(holds_matrix, tape.operations)):
        return tape, _first
    structure = structure or tape_structure(tape, device_wires)
    if _whole_state_bytes(tape, structure, itemsize) <= max_memory():
        return tape, _first
    if any(slot.kind not in CUT_SLOT_KINDS for slot in structure.slots) or non_unitary_matrix(tape) is not None:
        return tape, _first
    position = {w: i for i, w in enumerate(structure.sim_wires)}
    measured = {position[w] for mp in tape.measurements for w in mp.wires}
    kept = {structure.slots[i].op_index for i in cone_slots(structure.slots, dict.fromkeys(measured, GENERAL))}
    if len(kept) == len(tape.operations):
        return tape, _first
    operations = [op for i, op in enumerate(tape.operations) if i in kept]
    # (a new script, not a copy: a copy keeps its original's batch size, which the cut may have dropped)
    cut = QuantumScript(operations, tape.measurements, shots=tape.shots)
    if cut.batch_size is not None or tape.batch_size is None:
        return cut, _first
    if tape.shots:  # (a batch's samples are drawn apart: one draw repeated would not be)
        return tape, _first
    return cut, _Repeated(tape.batch_size, len(tape.measurements) == 1)


class _Merged:
    """The postprocessing of a tape cut apart: each part's own, then the results in the tape's order."""

    def __init__(self, positions: tuple, parts: tuple):
        self.positions, self.parts = positions, parts

    def __call__(self, results):
        out: dict = {}
        for ks, post, res in zip(self.positions, self.parts, results):
            items = post((res,))
            for k, r in zip(ks, (items,) if len(ks) == 1 else items):
                out[k] = r
        return tuple(out[k] for k in range(len(out)))


class _Repeated:
    """The postprocessing of a cut that dropped every batched gate: each exact result repeated along the batch
    (module-level, so plans holding it pickle)."""

    def __init__(self, batch: int, single: bool):
        self.batch, self.single = batch, single

    def __call__(self, results):
        (res,) = results
        items = (res,) if self.single else res
        out = tuple(qml.math.stack([r] * self.batch) for r in items)
        return out[0] if self.single else out


__all__ = ["measured_cone"]

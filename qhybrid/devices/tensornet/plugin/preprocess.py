"""PennyLane preprocessing for the tensornet device: which operators are contracted whole or decomposed, which\nmeasurements are served analytically or by sampling, and the errors that name what is unsupported."""

from __future__ import annotations

import pennylane as qml
from pennylane.devices.preprocess import decompose
from pennylane.exceptions import DeviceError
from pennylane.measurements import (
    ClassicalShadowMP,
    ExpectationMP,
    MeasurementProcess,
    SampleMeasurement,
    ShadowExpvalMP,
    StateMeasurement,
)
from pennylane.tape import QuantumScript
from pennylane.transforms import broadcast_expand
from ....errors import UnsupportedOperationError
from .._gates import rebound
from .._structure import SKIPPED_OPS, decomposes
from ._zero_controls import on_ones


MATRIX_MAX_WIRES = 10
"""Operators on more wires than this are decomposed rather than turned into one dense tensor."""


class UnsupportedOnDeviceError(UnsupportedOperationError, DeviceError):
    """An operator or measurement qhybrid.tensornet cannot run; a PennyLane ``DeviceError`` as well, so
    PennyLane's tools (and its device test suite's ``--skip-ops``) recognise it."""


def _rebinds(op: qml.operation.Operator) -> bool:
    """Whether the simulator can put new parameter values into ``op`` (``_gates.rebound``; some composite
    operators cannot take back their own ``data``)."""
    try:
        rebound(op, list(op.data))
    except (IndexError, ValueError, TypeError, AttributeError, RuntimeError):
        return False
    return True


def _contracts_whole(op: qml.operation.Operator, native_gates) -> bool:
    """Whether ``op`` is contracted as one tensor (True) or must be decomposed first (False)."""
    if op.name in SKIPPED_OPS or op.name == "GlobalPhase":
        return True
    if isinstance(op, qml.operation.StatePrepBase):
        return True  # mid-circuit ones are caught by _decompose_for_tensornet
    if isinstance(op, MeasurementProcess) or op.name == "MidMeasureMP":
        return False
    if isinstance(op, qml.operation.Channel):  # noise: the mixed-state engine's superoperators
        return True
    if not op.has_matrix or (len(op.wires) > MATRIX_MAX_WIRES and decomposes(op)):
        return False
    if not op.wires and decomposes(op):  # (a phase on no wire is GlobalPhase's slot: adjoint(GlobalPhase) into it)
        return False
    if not op.num_params and op.data and decomposes(op):
        # ``QSVT`` declares no parameters but holds its parts' data: its matrix comes from the parts it keeps, which
        # new data (a later call's, a shifted run's) would not reach, and a matrix kept by its settings' rounded repr
        # served an earlier call's (a phase 1e-5 away); its parts run as gates instead
        return False
    if op.num_params and _holds_product(op) and decomposes(op):
        return False  # PennyLane's matrix of a product takes its first factor's dtype: prod(H, RZ(t)) lost RZ's phase
    if isinstance(op, qml.ops.Pow) and op.num_params and not float(op.scalar).is_integer() and decomposes(op):
        return False  # its matrix is scipy's fractional power (no torch tensors); RX(t)**0.5 is RX(t / 2)
    if op.num_params and op.name not in native_gates and decomposes(op):
        return _rebinds(op)
    return True


def _holds_product(op) -> bool:
    """Whether ``op`` is a product of operators, or an adjoint, power or control of one."""
    while isinstance(op, (qml.ops.op_math.Adjoint, qml.ops.op_math.Pow, qml.ops.op_math.Controlled)):
        op = op.base
    return isinstance(op, qml.ops.op_math.Prod)


def runs_whole(device):
    """``kept(op)``: whether ``device`` (a tensornet device) runs ``op`` as one tensor rather than decomposing it."""
    gates = device.capabilities.gate_set()
    return lambda op: _contracts_whole(op, gates)


@qml.transform
def _decompose_for_tensornet(tape: QuantumScript, *, device_wires, target_gates, name: str):
    """Decompose every operator the contraction cannot take as one tensor.

    State preparations stay whole only where no earlier operator touched their wires; elsewhere they are
    decomposed into gates. Broadcast operators stay broadcast: the batch is one more tensor index.
    """
    # decompose's new tape copies every measurement, and a measurement copies its observable term by term
    # (0.1-0.3 s for a 10^3-word molecular Hamiltonian): it decomposes the operations alone here, and the
    # new tape measures the tape's own measurement objects (a stand-in keeps the measured wires off the
    # work wires decompose may count as free)
    measured = qml.wires.Wires.all_wires([mp.wires for mp in tape.measurements])
    operations = on_ones(tape.operations)
    bare = QuantumScript(operations, [qml.probs(wires=measured)] if measured else [], shots=tape.shots)
    new, late_preps = bare, _late_preps(bare.operations)
    for _ in range(MAX_PASSES):  # a template's decomposition may itself prepare a state late (Qubitization)

        def stopping_condition(op, late_preps=late_preps):
            return id(op) not in late_preps and _contracts_whole(op, target_gates)

        (newer,), post = decompose(
            new,
            stopping_condition=stopping_condition,
            skip_initial_state_prep=False,
            device_wires=device_wires,
            target_gates=target_gates,
            name=name,
            error=UnsupportedOnDeviceError,
        )
        if newer is new:
            break
        new, late_preps = newer, _late_preps(newer.operations)
        if not late_preps:
            break
    if new is bare and operations is tape.operations:
        return (tape,), post
    return (QuantumScript(new.operations, tape.measurements, shots=tape.shots),), post


MAX_PASSES = 4
"""Decomposition passes where state preparations keep appearing after gates on their wires."""


def _late_preps(operations) -> set:
    """Identities of the state preparations that come after a gate on one of their wires."""
    late, touched = set(), set()
    for op in operations:
        if isinstance(op, qml.operation.StatePrepBase) and not touched.isdisjoint(op.wires):
            late.add(id(op))
        touched.update(op.wires)
    return late


def _observable_analytic(obs, is_expval: bool) -> bool:
    if obs.pauli_rep is not None:  # read off the sentence (PennyLane builds it once, at construction)
        return True
    if isinstance(obs, qml.ops.CompositeOp):
        return all(_observable_analytic(o, is_expval) for o in obs.operands)
    if isinstance(obs, qml.ops.SymbolicOp):
        return _observable_analytic(obs.base, is_expval)
    if obs.name == "SparseHamiltonian":
        return is_expval
    return obs.pauli_rep is not None or obs.has_matrix or obs.has_diagonalizing_gates


def _observable_sampled(obs) -> bool:
    if isinstance(obs, qml.ops.CompositeOp):
        return all(_observable_sampled(o) for o in obs.operands)
    if isinstance(obs, qml.ops.SymbolicOp):
        return _observable_sampled(obs.base)
    return obs.has_diagonalizing_gates


def _analytic_measurement(mp: MeasurementProcess) -> bool:
    if not isinstance(mp, StateMeasurement):
        return False
    return mp.obs is None or _observable_analytic(mp.obs, isinstance(mp, ExpectationMP))


def _sample_measurement(mp: MeasurementProcess) -> bool:
    if isinstance(mp, (ClassicalShadowMP, ShadowExpvalMP)):
        return True
    if not isinstance(mp, SampleMeasurement):
        return False
    return mp.obs is None or _observable_sampled(mp.obs)


def _null_postprocessing(results):
    return results[0]


@qml.transform
def _expand_broadcast_shadows(tape: QuantumScript):
    """Classical shadows draw one random basis per shot and cannot share a batch: split those tapes."""
    if tape.batch_size is not None and any(
        isinstance(mp, (ClassicalShadowMP, ShadowExpvalMP)) for mp in tape.measurements
    ):
        return broadcast_expand(tape)
    return (tape,), _null_postprocessing

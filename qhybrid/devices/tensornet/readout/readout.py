"""Which measurements of a tape the contraction answers itself, and reading the rest off its state.

The contraction reads expval, var, probs, state and density_matrix directly (``_measure.py``). Any
other analytic measurement PennyLane knows (entropies, purity, sparse Hamiltonians, measurement
values, user-defined ``StateMeasurement`` subclasses) is answered from the contracted state of the
wires it needs, by PennyLane's own state-vector functions, in torch, so results stay differentiable.

A tape becomes a *core tape*: (when needed) one ``StateMP`` over the tape's wires, then its natively
read measurements in order; ``ReadoutPlan.assemble`` puts the results back in the tape's order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pennylane as qml
import torch
from pennylane.devices.qubit.measure import measure as pennylane_measure
from pennylane.measurements import (
    DensityMatrixMP,
    ExpectationMP,
    MeasurementProcess,
    ProbabilityMP,
    StateMeasurement,
    StateMP,
    VarianceMP,
)
from pennylane.tape import QuantumScript
from pennylane.wires import Wires

from .._structure import standard_wires
from ..engines.mixed.channels import is_channel

_CORE_MEASUREMENTS = (ExpectationMP, VarianceMP, ProbabilityMP, DensityMatrixMP)


def state_wires(tape: QuantumScript, device_wires: Wires | None) -> Wires:
    """The wires, in order, of the state the contraction returns for ``StateMP(wires=...)`` of them:
    the tape's wires in device order (or in the tape's order on a device without wires)."""
    if device_wires is None:
        return standard_wires(tape)
    return Wires([w for w in device_wires if w in tape.wires])


def _core_observable(obs) -> bool:
    if obs.name == "SparseHamiltonian":
        return False
    if obs.pauli_rep is not None:
        return True
    if isinstance(obs, (qml.ops.Sum, qml.ops.SProd)):
        operands = obs.operands if isinstance(obs, qml.ops.Sum) else [obs.base]
        return all(_core_observable(o) for o in operands)
    return obs.has_matrix


def read_by_core(mp: MeasurementProcess, wires: Wires) -> bool:
    """Whether the contraction reads ``mp`` itself; ``wires`` as from ``state_wires``."""
    if mp.mv is not None:
        return False
    if isinstance(mp, StateMP) and not isinstance(mp, DensityMatrixMP):
        return type(mp) is StateMP and (not mp.wires or mp.wires == wires)
    if type(mp) not in _CORE_MEASUREMENTS:
        return False
    return mp.obs is None or _core_observable(mp.obs)


@dataclass
class ReadoutPlan:
    """How the results of a tape come from the results of its core tape."""

    tape: QuantumScript
    core_tape: QuantumScript
    core_index: list  # per measurement of ``tape``: its index among the core tape's results, or None
    wires: Wires  # the wires of the extra state, when there is one
    param_map: list  # per flat parameter of ``tape``: its index among the core tape's, or None

    @property
    def needs_state(self) -> bool:
        return any(i is None for i in self.core_index)

    def assemble(self, core_results) -> tuple:
        """Results of ``tape`` (one per measurement) from those of ``core_tape``."""
        if not self.needs_state:
            return tuple(core_results)
        psi = core_results[0]
        n = len(self.wires)
        batched = psi.ndim == 2
        psi = psi.reshape(((psi.shape[0],) if batched else ()) + (2,) * n)
        mapping = {w: i for i, w in enumerate(self.wires)}
        out = []
        for mp, i in zip(self.tape.measurements, self.core_index):
            out.append(core_results[i] if i is not None else read_from_state(mp.map_wires(mapping), psi, batched))
        return tuple(out)


def plan_readout(tape: QuantumScript, device_wires: Wires | None) -> ReadoutPlan:
    """Split ``tape``'s measurements between the contraction and the state read-out."""
    wires = state_wires(tape, device_wires)
    native = [read_by_core(mp, wires) for mp in tape.measurements]
    if any(map(is_channel, tape.operations)):  # the mixed-state engine reads every state measurement itself
        native = [mp.mv is None for mp in tape.measurements]
    n_op_params = sum(len(op.data) for op in tape.operations)
    param_map = _parameter_map(tape, native, n_op_params)
    if all(native):
        return ReadoutPlan(tape, tape, list(range(len(native))), wires, param_map)
    # the state goes first, so the core tape's wires keep the order of the tape's wires
    kept, core_index = [StateMP(wires=wires)], []
    for mp, ok in zip(tape.measurements, native):
        core_index.append(len(kept) if ok else None)
        if ok:
            kept.append(mp)
    core_tape = tape.copy(measurements=kept)
    core_tape.trainable_params = [param_map[i] for i in tape.trainable_params if param_map[i] is not None]
    return ReadoutPlan(tape, core_tape, core_index, wires, param_map)


def _parameter_map(tape: QuantumScript, native: list, n_op_params: int) -> list:
    params = list(range(n_op_params))
    k = n_op_params
    for mp, ok in zip(tape.measurements, native):
        n_obs = len(mp.obs.data) if mp.obs is not None else 0
        if ok:
            params.extend(range(k, k + n_obs))
            k += n_obs
        else:
            params.extend([None] * n_obs)
    return params


def read_from_state(mp: MeasurementProcess, psi: torch.Tensor, batched: bool) -> torch.Tensor:
    """``mp`` (wires relabelled to state axes) of the state ``psi`` of shape ``(batch,)? + (2,) * n``."""
    if isinstance(mp, ExpectationMP) and mp.obs is not None and _holds_sparse(mp.obs):
        # (a sum holding one too: PennyLane's measure reads such a term through NumPy, which a state that
        # requires grad refuses)
        return sparse_expval(mp.obs, psi, batched)
    if not isinstance(mp, StateMeasurement):
        raise qml.exceptions.DeviceError(
            f"{type(mp).__name__} is not an analytic measurement; run the circuit with shots to sample it."
        )
    return pennylane_measure(mp, psi, is_state_batched=batched)


def _holds_sparse(obs) -> bool:
    """Whether ``obs`` is a ``SparseHamiltonian`` or a sum, product or multiple of operators holding one (and
    no tensor data: its sparse matrix is built with SciPy)."""
    if obs.name == "SparseHamiltonian":
        return True
    parts = getattr(obs, "operands", None) or ([obs.base] if isinstance(obs, qml.ops.SProd) else [])
    return (
        any(map(_holds_sparse, parts))
        and not any(isinstance(d, torch.Tensor) for d in obs.data)
        and obs.has_sparse_matrix
    )


def sparse_expval(obs, psi: torch.Tensor, batched: bool) -> torch.Tensor:
    """<psi|H|psi> with H as a torch sparse matrix, differentiable in ``psi``."""
    n = psi.ndim - int(batched)
    h = obs.sparse_matrix(wire_order=list(range(n))).tocoo()
    index = torch.as_tensor(np.vstack([h.row, h.col]), dtype=torch.long, device=psi.device)
    values = torch.as_tensor(h.data, dtype=psi.dtype, device=psi.device)
    sparse = torch.sparse_coo_tensor(index, values, (2**n, 2**n), check_invariants=False)
    flat = psi.reshape(-1, 2**n)
    h_psi = torch.sparse.mm(sparse, flat.T).T
    value = (flat.conj() * h_psi).real.sum(-1)
    return value if batched else value[0]

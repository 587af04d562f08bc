"""A tape and its parameters to a batched MPS: gate matrices (differentiable in the parameters), one-site
gates fused into the next gate on their wire, applied in an order that keeps the centre moving little."""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch

from .....errors import UnsupportedOperationError
from ..._gates import constant_matrix, fast_matrix, generic_matrix, global_phase, has_fast_builder
from .gates import apply_gate, apply_one_site, entry_site
from .schedule import schedule
from .state import MPS, product_state

SKIPPED = frozenset({"Identity", "Barrier", "Snapshot"})
GATE_MAX_WIRES = 8
"""A gate on more wires merges 2**k sites' worth of state into one block: decompose it first."""


def _gate_matrix(op, params, dtype, device) -> torch.Tensor:
    if has_fast_builder(op.name):
        return fast_matrix(op.name, params, dtype, device)
    if not params:
        return constant_matrix(op, dtype, device)
    return generic_matrix(op, params, dtype, device)


def _kron(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Kronecker product of (batched) matrices (last two dims)."""
    out = a[..., :, None, :, None] * b[..., None, :, None, :]
    lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return out.reshape(*lead, a.shape[-2] * b.shape[-2], a.shape[-1] * b.shape[-1])


def _initial_bits(tape, params, site_of, n_sites: int) -> tuple[list[int], int]:
    """The basis state the tape starts from (BasisState at the start) and how many operators that took."""
    bits = [0] * n_sites
    used = 0
    for op in tape.operations:
        if not isinstance(op, qml.operation.StatePrepBase):
            break
        if not isinstance(op, qml.BasisState):
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()}: method='mps' starts from a basis state "
                "(qml.BasisState); prepare the state with gates, or use method='auto'."
            )
        values = op.data[0]
        values = values.tolist() if hasattr(values, "tolist") else list(values)
        if isinstance(values, list) and values and isinstance(values[0], list):
            raise UnsupportedOperationError("A broadcast BasisState is not supported by method='mps'.")
        for w, v in zip(op.wires, values):
            bits[site_of[w]] = int(v)
        used += 1
    return bits, used


def build_mps(
    tape: qml.tape.QuantumScript,
    params: Sequence,
    site_of: dict,
    n_sites: int,
    batch: int,
    dtype: torch.dtype,
    device,
    max_bond: int | None,
    cutoff: float,
) -> tuple[MPS, torch.Tensor | None]:
    """The final MPS of ``tape`` run with ``params`` (``tape_parameters`` order), and the global phase
    (``[B]`` or None) of its GlobalPhase gates, which only a state read sees."""
    bits, skip = _initial_bits(tape, params, site_of, n_sites)
    mps = product_state(bits, batch, dtype, device, max_bond, cutoff)
    gates: list[tuple[tuple[int, ...], torch.Tensor]] = []
    phase = None
    start = 0
    for index, op in enumerate(tape.operations):
        n = len(op.data)
        p = list(params[start : start + n])
        start += n
        if index < skip or op.name in SKIPPED:
            continue
        if op.name == "GlobalPhase":
            ph = global_phase(p, dtype, device)
            phase = ph if phase is None else phase * ph
            continue
        if isinstance(op, qml.operation.StatePrepBase):
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} comes after gates; method='mps' prepares basis states "
                "only at the start."
            )
        if len(op.wires) > GATE_MAX_WIRES:
            raise UnsupportedOperationError(
                f"{op.name} acts on {len(op.wires)} wires; method='mps' applies gates on at most "
                f"{GATE_MAX_WIRES} wires. Decompose it (qml.transforms.decompose) first."
            )
        gates.append((tuple(site_of[w] for w in op.wires), _gate_matrix(op, p, dtype, device)))
    _apply_fused(mps, gates)
    return mps, phase


def _apply_fused(mps: MPS, gates: list) -> None:
    """Apply ``gates`` with each run of one-site gates multiplied into the next multi-site gate on its wire."""
    pending: dict[int, torch.Tensor] = {}
    multi = []
    for sites, mat in gates:
        if len(sites) == 1:
            s = sites[0]
            pending[s] = mat if s not in pending else mat @ pending[s]
            continue
        factors = [pending.pop(s, None) for s in sites]
        if any(f is not None for f in factors):
            eye = torch.eye(2, dtype=mat.dtype, device=mat.device)
            before = None
            for f in factors:
                f = eye if f is None else f
                before = f if before is None else _kron(before, f)
            mat = mat @ before
        multi.append((sites, mat))
    order = schedule([sites for sites, _ in multi], mps.n_sites)
    for pos, j in enumerate(order):
        sites, mat = multi[j]
        towards = entry_site(multi[order[pos + 1]][0]) if pos + 1 < len(order) else None
        apply_gate(mps, mat, list(sites), towards)
    for s, m in pending.items():
        apply_one_site(mps, m, s)

"""A tape and its parameters to a batched MPS: gate matrices (differentiable in the parameters), one-site
gates fused into the next gate on their wire (not into a diagonal one: diagonal gates commute, which the
router uses), run as the blocks of :func:`.route.plan` (an order that keeps the centre moving little, distant
wires moved next to each other and left there)."""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch

from .....errors import UnsupportedOperationError
from ..._gates import constant_matrix, fast_matrix, generic_matrix, global_phase, has_fast_builder
from pennylane.ops.qubit.attributes import diagonal_in_z_basis

from .gates import apply_block, apply_one_site, in_site_order
from .memory import MemoryGuard, worst_case
from .route import plan
from .state import MPS, RouteSummary, product_state
from ..mixed.channels import is_channel

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
    max_memory: float | None = None,
) -> tuple[MPS, torch.Tensor | None, dict]:
    """The final MPS of ``tape`` run with ``params`` (``tape_parameters`` order), the global phase
    (``[B]`` or None) of its GlobalPhase gates, which only a state read sees, and where each wire ended
    (``{wire: site}``: distant gates move wires along the chain). A split that would take the state past
    ``max_memory`` is refused before it allocates (:mod:`.memory`); ``mps.route`` summarises the plan."""
    bits, skip = _initial_bits(tape, params, site_of, n_sites)
    mps = product_state(bits, batch, dtype, device, max_bond, cutoff)
    gates: list[tuple[tuple[int, ...], torch.Tensor, bool]] = []
    phase = None
    start = 0
    for index, op in enumerate(tape.operations):
        n = len(op.data)
        p = list(params[start : start + n])
        start += n
        if index < skip or op.name in SKIPPED:
            continue
        if is_channel(op):
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} is a noise channel: method='mps' simulates pure states and "
                "has no channels. Use method='auto' (the default) for the exact density-matrix engine, or keep "
                "method='mps' with noise='trajectories' for analytic results (channels that are mixtures of "
                "unitaries, drawn as a batch of pure-state MPS; docs/NOISE.md)."
            )
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
        sites = tuple(site_of[w] for w in op.wires)
        gates.append((sites, _gate_matrix(op, p, dtype, device), op.name in diagonal_in_z_basis))
    final = _apply_fused(mps, gates, max_memory)
    return mps, phase, {w: final[s] for w, s in site_of.items()}


def _fuse(gates: list) -> list:
    """``gates`` (``(sites, matrix, diagonal)``) with each run of one-site gates multiplied into the next
    multi-site gate on its wire; runs before a diagonal gate that are not diagonal themselves stay one-site
    gates of their own (fused, the gate would no longer commute with its diagonal neighbours)."""
    pending: dict[int, tuple[torch.Tensor, bool]] = {}
    nodes = []
    for sites, mat, diagonal in gates:
        if len(sites) == 1:
            s = sites[0]
            if s in pending:
                before, was_diagonal = pending[s]
                mat, diagonal = mat @ before, diagonal and was_diagonal
            pending[s] = (mat, diagonal)
            continue
        if diagonal:
            for s in sites:
                if s in pending and not pending[s][1]:
                    nodes.append(((s,), *pending.pop(s)))
        factors = [pending.pop(s, (None, True))[0] for s in sites]
        if any(f is not None for f in factors):
            eye = torch.eye(2, dtype=mat.dtype, device=mat.device)
            before = None
            for f in factors:
                f = eye if f is None else f
                before = f if before is None else _kron(before, f)
            mat = mat @ before
        nodes.append((sites, mat, diagonal))
    nodes.extend(((s,), m, d) for s, (m, d) in pending.items())
    return nodes


def _block_matrix(mat: torch.Tensor, offsets: tuple[int, ...], swap_after: bool) -> torch.Tensor:
    """A gate's matrix over its block's sites in chain order (wire j at ``offsets[j]``), times a SWAP of the
    two sites when the block also exchanges them."""
    mat, _ = in_site_order(mat, offsets)
    if swap_after:
        lead = mat.shape[:-2]
        mat = mat.reshape(*lead, 2, 2, 4).transpose(-3, -2).reshape(*lead, 4, 4)
    return mat


def _apply_fused(mps: MPS, gates: list, max_memory: float | None = None) -> tuple[int, ...]:
    """Apply ``gates`` (fused, see :func:`_fuse`) by the router's plan; returns ``final[slot] = site``."""
    nodes = _fuse(gates)
    blocks, final = plan(tuple((sites, diagonal) for sites, _, diagonal in nodes), mps.n_sites)
    spans = tuple((b.start, b.width) for b in blocks if b.width > 1)
    itemsize = mps.sites[0].element_size()
    guard = MemoryGuard.for_plan(spans, mps.n_sites, mps.max_bond, mps.cutoff, mps.batch, itemsize, max_memory)
    bound = worst_case(spans, mps.n_sites, mps.max_bond)
    swaps = sum(1 for b in blocks if b.width > 1 and b.gate is None)
    mps.route = RouteSummary(spans, len(spans), swaps, bound.bond, bound.peak * mps.batch * itemsize, guard is not None)
    next_start: list[int | None] = [None] * len(blocks)  # where the next multi-site block starts
    upcoming = None
    for i in range(len(blocks) - 1, -1, -1):
        next_start[i] = upcoming
        if blocks[i].width > 1:
            upcoming = blocks[i].start
    for block, towards in zip(blocks, next_start):
        if block.width == 1:
            apply_one_site(mps, nodes[block.gate][1], block.start)
            continue
        if guard is not None:
            guard.check(mps.sites, block.start, block.width)
        mat = None if block.gate is None else _block_matrix(nodes[block.gate][1], block.offsets, block.swap_after)
        apply_block(mps, block.start, block.width, mat, towards)
    return final

"""Which engine runs a circuit, or one light-cone class of it: a state vector or a closed network, by cost.

Both sides are counted in flops (complex multiply-adds) plus a fixed charge per op:

* a **state vector** costs ``2**w`` per gate times the stack and batch, three times that with its adjoint
  walk (``statevector.cost``); its memory is a few states at its peak, and it must fit ``max_memory``;
* a **closed network** costs the flops of its contraction tree plus a charge per pairwise step, from a
  greedy path (milliseconds to find; the search that follows only makes it cheaper, so the comparison is
  fair to the state vector), and its largest intermediate must fit ``max_memory``;
* the **light cones** of a whole circuit cost the sum over their classes of the cheaper of the two.

The cheaper one that fits runs; each decision is an ``EngineChoice`` (engine, reason, both costs) that
``dev.plan_cache_info().engines`` lists, decided once per structure.

>>> EngineChoice("whole circuit, 24 wires", "state vector", "cheaper", 2.0e9, 1 << 30, 5.0e12, None).engine
'state vector'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .....errors import ContractionTooLargeError, UnsupportedOperationError
from ..network.network import BATCH, closed_network, diagonal_slots
from ..network.pathfind import PathSettings, priced_paths
from ..network.plan import CHUNK_LETTERS, _binary_tree
from ..network.problem import Problem, _numel
from ..network.programs import ClosedProgram, _closed_terms
from ..statevector.cost import GRADIENT_FACTOR, _fmt_bytes, state_flops, state_memory

NETWORK_STEP_FLOPS = 2e4
"""What one pairwise contraction step costs beyond its flops (an einsum launch and its permute copies,
about 20 us at 1 Gflop/s), in flops (``plan.STEP_FLOPS``)."""

WHOLE_STATE_SURE_WIRES = 16
"""Circuits on at most this many wires run as one state vector (when it fits ``max_memory``) without
pricing their light cones: a 1 MiB state per row, whose whole run costs less than planning the cones would
(W1-W5, G16 keep their engine)."""

CLASS_STATE_SURE_FLOPS = 4e6
"""A light-cone class whose state vector costs at most this (flops of one forward run per row) runs as a
state vector without pricing its network: about 4 ms, less than finding a greedy path for it takes."""


@dataclass(frozen=True)
class EngineChoice:
    """One decision: ``what`` it is for, the ``engine`` chosen, why, and the numbers compared (flops of
    one forward and backward run, bytes at the peak; None where not priced)."""

    what: str
    engine: str  # "state vector" | "closed network" | "light cones"
    reason: str
    state_flops: float | None
    state_bytes: float | None
    network_flops: float | None
    network_bytes: float | None

    def __str__(self) -> str:
        parts = [f"{self.what}: {self.engine} ({self.reason})"]
        if self.state_flops is not None:
            parts.append(f"state vector {_fmt_flops(self.state_flops)}, {_fmt_bytes(self.state_bytes)} at its peak")
        if self.network_flops is not None:
            net = f"network {_fmt_flops(self.network_flops)}"
            if self.network_bytes is not None:
                net += f", largest intermediate {_fmt_bytes(self.network_bytes)}"
            parts.append(net)
        return "; ".join(parts)


def _fmt_flops(f: float) -> str:
    return f"2^{math.log2(max(f, 1.0)):.1f} flops"


def network_cost(structure, tape, opts, itemsize: int, gradient: bool, keep: dict | None = None) -> tuple[float, float] | None:
    """(flops with the backward where ``gradient``, bytes of the largest intermediate) of ``tape`` as closed
    networks, or None where it cannot be a closed network. Each network is priced by the path the device's
    path store keeps for it (a second process prices by the trees the first planned, and plans and prices
    nothing again), else by its greedy path (no search; remembered for the planning that follows); the
    networks are built but not compiled into contraction plans, and nothing is written to the store.
    ``keep``: a dict that receives the networks built, by term spec (a ``ClosedProgram`` of the same
    structure takes them instead of building them again).
    A Pauli sentence measured as one network goes through a ``ClosedProgram`` as before (its split into
    words is that program's decision)."""
    try:
        specs = list(dict.fromkeys(spec for mp in tape.measurements for spec in _closed_terms(mp, structure)))
    except UnsupportedOperationError:
        return None
    if any(spec[0] == "paulisum" for spec in specs):
        return _program_cost(structure, tape, opts, itemsize, gradient)
    diagonal = diagonal_slots(structure, tape)
    networks = [closed_network(structure, frozenset(), 0, *spec[:3], spec[3] if len(spec) > 3 else (), diagonal)
                for spec in specs]  # fmt: skip
    if not networks:
        return None
    if keep is not None:
        keep.update(zip(specs, networks))
    problems = [Problem.of(n.inputs, n.output, n.sizes, n.positions, BATCH) for n in networks]
    found = priced_paths(problems, PathSettings.of(opts.optimizer).store)
    flops = sum(f.flops + NETWORK_STEP_FLOPS * _calls(n, f) for n, f in zip(networks, found))
    largest = max(_largest(n, f) for n, f in zip(networks, found)) * itemsize
    return flops * (GRADIENT_FACTOR if gradient else 1.0), float(largest)


def _calls(network, found) -> int:
    """The einsum calls of the network's plan along ``found``'s path (``len(ContractionPlan.steps)``)."""
    inputs = network.inputs
    if found.sliced:
        inputs = [tuple(i for i in ix if i not in found.sliced) for ix in inputs]
    return call_count(*_binary_tree(inputs, network.output, found.path))


def call_count(nodes: dict, indices: dict) -> int:
    """``len(plan._chunks(n, nodes, indices))`` without building the calls' equations and operand
    positions (most of ``_chunks``' time): the same cut of the tree into subtrees of at most
    ``CHUNK_LETTERS`` letters, counted."""
    if not nodes:
        return 0
    letters: dict[int, set] = {}
    cut: set = set()

    def own(t: int) -> set:
        if t in nodes:
            cut.add(t)
        return set(indices[t])

    for node in sorted(nodes):
        left, right = nodes[node]
        if right == -1:
            letters[node] = own(left)
            continue
        parts = []
        for child in (left, right):
            if child in nodes and nodes[child][1] == -1:
                parts.append(own(child))
            else:
                parts.append(letters[child] if child in nodes else set(indices[child]))
        union = parts[0] | parts[1] | set(indices[node])
        if len(union) <= CHUNK_LETTERS:
            letters[node] = union
        else:
            letters[node] = own(left) | own(right) | set(indices[node])
    return len(cut | {max(nodes)})


def _largest(network, found) -> int:
    """``ContractionPlan.largest_intermediate`` of the network along ``found``: inputs and output included."""
    sizes = network.sizes
    return max(found.largest, _numel(network.output, sizes), *(_numel(ix, sizes) for ix in network.inputs))


def _program_cost(structure, tape, opts, itemsize: int, gradient: bool) -> tuple[float, float] | None:
    """``network_cost`` through a ``ClosedProgram`` planned with greedy paths (Pauli sentences)."""
    quick = replace(
        opts, optimizer=PathSettings("greedy", math.inf, None), plan_time=0.0, max_memory=math.inf
    )
    try:
        program = ClosedProgram(structure, frozenset(), 0, quick, tape)
    except (ContractionTooLargeError, UnsupportedOperationError):
        return None
    plans = closed_plans(program)
    if not plans:
        return None
    flops = sum(p.flops + NETWORK_STEP_FLOPS * len(p.steps) for p in plans)
    largest = max(p.largest_intermediate for p in plans) * itemsize
    return flops * (GRADIENT_FACTOR if gradient else 1.0), float(largest)


def closed_plans(program: ClosedProgram) -> list:
    """The ``ContractionPlan`` of every network a ``ClosedProgram`` contracts (its planned terms): what the
    choice reads of a closed program is each plan's ``flops``, ``steps`` and ``largest_intermediate``."""
    return [c.plan for c in program._terms.values()]


def state_side(structure, lead: int, itemsize: int, gradient: bool, words: int = 1):
    """(flops, peak bytes) of ``structure`` as a state vector with ``lead`` rows times batch."""
    memory = state_memory(len(structure.sim_wires), lead, itemsize, gradient=gradient, actions=len(structure.slots))
    return state_flops(structure, lead, gradient=gradient, measured_words=words), memory.peak


def choose_class(what: str, structure, tape, opts, itemsize: int, gradient: bool, keep: dict | None = None) -> EngineChoice:
    """State vector or closed network for one light-cone class (priced for one member; every member
    multiplies both sides alike); ``keep``: as ``network_cost``'s."""
    batch = structure.batch_size or 1
    flops, peak = state_side(structure, batch, itemsize, gradient)
    sure = state_sure(what, flops, peak, opts.max_memory, gradient)
    if sure is not None:
        return sure
    return decide(what, flops, peak, network_cost(structure, tape, opts, itemsize, gradient, keep), opts.max_memory)


NO_NETWORK = "no closed network measures it"
"""The reason of a class choice whose network could not be priced."""


def state_sure(what: str, flops: float, peak: float, max_memory: float, gradient: bool) -> EngineChoice | None:
    """The state vector, without pricing a network, where it fits and costs at most ``CLASS_STATE_SURE_FLOPS``
    a forward run; else None."""
    if peak <= max_memory and flops / (GRADIENT_FACTOR if gradient else 1.0) <= CLASS_STATE_SURE_FLOPS:
        return EngineChoice(what, "state vector", "cheap enough not to price a network", flops, peak, None, None)
    return None


def decide(what: str, flops: float, peak: float, net: tuple | None, max_memory: float) -> EngineChoice:
    """The cheaper of a state vector (``flops``, ``peak`` bytes) and a network (``net``: flops, bytes; None
    where none measures it) that fits ``max_memory``."""
    if net is None:
        return EngineChoice(what, "state vector", NO_NETWORK, flops, peak, None, None)
    net_flops, net_bytes = net
    if peak > max_memory:
        return EngineChoice(what, "closed network", "its state vector does not fit max_memory", flops, peak, net_flops, net_bytes)
    if net_flops < flops and net_bytes <= max_memory:
        return EngineChoice(what, "closed network", "cheaper", flops, peak, net_flops, net_bytes)
    return EngineChoice(what, "state vector", "cheaper" if net_flops >= flops else "its network does not fit max_memory",
                        flops, peak, net_flops, net_bytes)


__all__ = ["EngineChoice", "choose_class", "network_cost", "closed_plans", "state_side", "state_sure", "decide", "NO_NETWORK",
           "NETWORK_STEP_FLOPS", "WHOLE_STATE_SURE_WIRES", "CLASS_STATE_SURE_FLOPS"]

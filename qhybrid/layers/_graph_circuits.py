"""Graph circuits as templates: blocks of commuting gates of one kind, plus the Z-words to measure.

A template holds structure only (gate kind and wires); the angles come separately, one ``(batch, n_gates)``
tensor per block, so one template serves every batch and every step. Every block holds gates of a single
kind on distinct wire sets, so its gates commute: the device's light-cone walker sees that gate by gate
(gates diagonal in one Pauli basis per wire commute), so a block widens a cone by one layer of neighbours.

QAOA (``kind="qaoa"``), with ``IsingZZ(phi) = exp(-i phi/2 ZZ)`` and ``RX(phi) = exp(-i phi/2 X)``::

    H on every node;  for l in layers:  ZZ(2 gamma_l w_e) on every edge,  RX(2 beta_l) on every node

QGNN (``kind="qgnn"``)::

    RY(x[:, 0]), RZ(x[:, 1]), RY(x[:, 2]), ... on every node (one block per node feature);
    for l in layers:  ZZ(c[l, e, 0] w_e),  XX(c[l, e, 1] w_e) on every edge;  RY(r[l, v, 0]), RZ(r[l, v, 1]) on every node
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pennylane as qml
import torch

from ._graph_input import Graph

GATES = {
    "H": qml.Hadamard,
    "RX": qml.RX,
    "RY": qml.RY,
    "RZ": qml.RZ,
    "ZZ": qml.IsingZZ,
    "XX": qml.IsingXX,
}
"""Gate kinds a block may hold (all but ``H`` take one angle)."""

XX_DECOMPOSE_MAX_WIRES = 20
"""``IsingXX`` blocks become CNOT conjugations of ``RX`` (see ``_couplings``) on graphs up to this many nodes
(the device simulates their whole state). Wider graphs run on light cones, where an ``IsingXX`` block
commutes gate by gate and widens a cone by one layer of neighbours; decomposed, every matching of the
block would widen it again."""

ENCODING_GATES = ("RY", "RZ")
"""QGNN node features ``f = 0, 1, 2, ...`` are encoded with ``ENCODING_GATES[f % 2]``."""


@dataclass(frozen=True)
class Block:
    """Gates of one kind on distinct wire sets (so they commute)."""

    gate: str
    wires: tuple[tuple[int, ...], ...]

    @property
    def parametric(self) -> bool:
        return self.gate != "H"

    @property
    def two_qubit(self) -> bool:
        return self.gate in ("ZZ", "XX")


@dataclass(frozen=True)
class Template:
    """A layered graph circuit on wires ``0 .. n_wires - 1`` measuring ``<Z...Z>`` on each of ``roots``."""

    n_wires: int
    blocks: tuple[Block, ...]
    roots: tuple[tuple[int, ...], ...]


def qaoa_template(graph: Graph, n_layers: int, roots: Sequence[tuple[int, ...]]) -> Template:
    nodes = tuple((v,) for v in range(graph.n_nodes))
    blocks = [Block("H", nodes)]
    for _ in range(n_layers):
        blocks += [Block("ZZ", graph.edges), Block("RX", nodes)]
    return Template(graph.n_nodes, tuple(blocks), tuple(roots))


def qgnn_template(graph: Graph, n_layers: int, n_features: int, roots: Sequence[tuple[int, ...]]) -> Template:
    nodes = tuple((v,) for v in range(graph.n_nodes))
    blocks = [Block(ENCODING_GATES[f % len(ENCODING_GATES)], nodes) for f in range(n_features)]
    for _ in range(n_layers):
        blocks += [Block("ZZ", graph.edges), Block("XX", graph.edges), Block("RY", nodes), Block("RZ", nodes)]
    return Template(graph.n_nodes, tuple(blocks), tuple(roots))


def build_tape(template: Template, angles: Sequence[torch.Tensor | None], summed: bool = False) -> qml.tape.QuantumScript:
    """The template as a PennyLane tape. ``angles[b]`` is block ``b``'s angles: ``(batch, n_gates)`` (column
    ``g`` broadcasts gate ``g`` over the batch, so the whole batch is one execution), ``(batch,)`` (one angle
    per sample for every gate of the block), a 0-dim tensor (one angle for everything: a plain, unbroadcast
    gate, which the simulator applies faster) or None for ``H``.

    >>> from qhybrid.layers._graph_input import as_graph
    >>> t = qaoa_template(as_graph([(0, 1)]), 1, [(0, 1)])
    >>> a = torch.tensor([[0.3]])
    >>> build_tape(t, [None, a, torch.tensor([[0.1, 0.2]])]).batch_size
    1
    """
    ops = []
    for block, theta in zip(template.blocks, angles):
        gate = GATES[block.gate]
        if not block.parametric:
            ops.extend(gate(wires=w) for w in block.wires)
            continue
        columns = theta.unbind(1) if theta.ndim == 2 else [theta] * len(block.wires)
        if block.two_qubit:
            ops.extend(_couplings(block, columns, native_xx(template)))
        else:
            ops.extend(gate(col, wires=w) for col, w in zip(columns, block.wires))
    if summed:
        measurements = [qml.expval(qml.dot([1.0] * len(template.roots), [_z_word(r) for r in template.roots]))]
    else:
        measurements = [qml.expval(_z_word(r)) for r in template.roots]
    return qml.tape.QuantumScript(ops, measurements)


def native_xx(template: Template) -> bool:
    """Whether the template's ``IsingXX`` gates stay themselves (``XX_DECOMPOSE_MAX_WIRES``)."""
    return template.n_wires > XX_DECOMPOSE_MAX_WIRES


def xx_order(template: Template, block: Block) -> list[int]:
    """The order ``build_tape`` puts the angles of a two-qubit block in (gate order, or by matching)."""
    if block.gate == "XX" and not native_xx(template):
        return [g for m in matchings(block.wires) for g in m]
    return list(range(len(block.wires)))


def _couplings(block: Block, angles, native: bool = False) -> list:
    """A block of ``IsingZZ`` / ``IsingXX`` gates.

    ``IsingZZ`` gates stay themselves: the state-vector engine turns a block of them into one diagonal run
    (one phase multiply for the whole block, every angle's gradient in one reduction). ``IsingXX`` gates
    become CNOT conjugations of rotations: CNOT(u, v) maps ``X_u`` to ``X_u X_v``, so ``IsingXX(a) = CNOT
    RX_u(a) CNOT``. The block's gates commute, so they are applied one matching at a time (edges sharing no
    node, :func:`matchings`): all CNOTs of a matching, all its rotations, all its CNOTs again; consecutive
    CNOTs compose into one basis permutation and the waiting rotations run as a few Kronecker-block
    matmuls, where a two-qubit gate on wires that are not neighbours would cost a general einsum over the
    whole state each (measured 17x slower on 16 qubits)."""
    if block.gate == "ZZ" or native:
        return [GATES[block.gate](a, wires=list(w)) for a, w in zip(angles, block.wires)]
    ops = []
    for matching in matchings(block.wires):
        cnots = [qml.CNOT(wires=list(block.wires[g])) for g in matching]
        turns = [qml.RX(angles[g], wires=block.wires[g][0]) for g in matching]
        ops += cnots + turns + [qml.CNOT(wires=list(block.wires[g])) for g in matching]
    return ops


def matchings(pairs: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Positions of ``pairs`` split into matchings by greedy edge colouring, in order (at most
    ``2 * max degree - 1`` of them; 4 for most 3-regular graphs).

    >>> matchings([(0, 1), (1, 2), (2, 3)])
    [[0, 2], [1]]
    """
    used: dict[int, set[int]] = {}
    colours: list[list[int]] = []
    for g, (u, v) in enumerate(pairs):
        taken = used.get(u, set()) | used.get(v, set())
        c = next(c for c in range(len(colours) + 1) if c not in taken)
        if c == len(colours):
            colours.append([])
        colours[c].append(g)
        used.setdefault(u, set()).add(c)
        used.setdefault(v, set()).add(c)
    return colours


def _z_word(wires: tuple[int, ...]):
    if len(wires) == 1:
        return qml.Z(wires[0])
    return qml.prod(*(qml.Z(w) for w in wires))


__all__ = ["Block", "Template", "GATES", "qaoa_template", "qgnn_template", "build_tape", "xx_order", "native_xx"]

"""A closed program's networks contracted together: one ``ManyTrees`` pass over their distinct operands.

A deep QAOA Hamiltonian measured word by word (150 edges of a 100-node graph at p=3) is 150 closed
networks of ~190 small tensors each, over overlapping light cones: most gate tensors appear in dozens of
them. Contracted one by one, a step spends its time dispatching pairwise steps of a few dozen flops and
fetching operands. Here the operands' sources go once into one leaf table (each gate kind's matrices as
the one tensor its builder made, other tensors one by one), each network reads its operands from the
table by position (the reshapes, diagonals, selections and conjugates the operand would take, applied to
positions), and all the networks' trees run as one ``ManyTrees`` pass: one autograd node for every value.

One network alone goes the same way: its tree's small steps run as waves of batched products and its
large ones in order, where ``contract_tree`` dispatches a pairwise ``einsum`` a step (W3, a 64-wire CNOT
ladder measured by one Z word: 659 ``einsum`` calls and 10,751 aten ops a value + gradient step, 342 ops
this way; W3b's sentence of 64 words as one MPO network likewise).

Taken for closed networks (one value each) without lead indices (nothing stacked or broadcast), on the torch
backend, whose operands are gates, caps and a sentence's MPO sites; the program contracts any other network
(probabilities, an observable's own matrix) one by one.
"""

from __future__ import annotations

import numpy as np
import torch

from ...backends.torch_backend import TorchBackend
from .many import ManyTrees, NotTogether

TOGETHER_MIN_NETWORKS = 1
"""Networks are contracted together from this many on: one network's tree as waves beats an ``einsum`` a step."""

_TABLE_KINDS = ("slot", "zero", "pauli", "mpo")


class Together:
    """Several ``_Contraction``\\ s of one program compiled into one ``ManyTrees``; ``values`` (the
    program's operand source at compile time) fixes the operands' shapes."""

    def __init__(self, contractions, values):
        self._sources: list = []  # per table block: ("stack", a slot of it, its shape) or ("base", operand)
        blocks: dict[tuple, tuple] = {}  # block key -> (source, shape), constants (|0>, Pauli caps) first
        for c in contractions:
            if c.network.lead or c.network.output:  # ``ManyTrees`` gives each network one value
                raise NotTogether("a network with lead indices or open output indices")
            for o in c.network.operands:
                if o.kind not in _TABLE_KINDS:
                    raise NotTogether(f"a {o.kind} operand")
                key, source, shape = _block(values, o)
                blocks.setdefault(key, (source, shape, o.kind != "slot"))
        order = sorted(blocks, key=lambda k: not blocks[k][2])  # stable: constants, then gates as met
        where, size, constants = {}, 0, 0
        for key in order:
            source, shape, constant = blocks[key]
            where[key] = size
            self._sources.append(source)
            size += int(np.prod(shape))
            constants = size if constant else constants
        leaves = []
        seen: dict[tuple, np.ndarray] = {}  # (block, matrix, diagonal, selection) -> positions
        for c in contractions:
            operands = []
            for o in c.network.operands:
                key, _, shape = _block(values, o)
                stacked = values.stacked_matrix(o.slot) if o.kind == "slot" else None
                view = (key, stacked[1] if stacked is not None else None, o.diagonal, _hashable(o.select))
                pos = seen.get(view)
                if pos is None:  # networks over overlapping cones read the same gates the same way
                    pos = seen[view] = _view_positions(where[key], shape, stacked, o)
                operands.append(pos)
            leaves.append(operands)
        self.table_size = size
        # blocks that are the same every step (|0>, Pauli caps, parameter-free gates such as Q100's 100 Hadamards):
        # flattened once per dtype and device, not read and reshaped (two ops each) per step
        slots = values.structure.slots
        self._fixed = [s[0] == "base" and (s[1].kind != "slot" or slots[s[1].slot].kind == "const") for s in self._sources]
        self._flat: dict = {}
        conj = [[o.conj for o in c.network.operands] for c in contractions]
        bra: dict[int, np.ndarray] = {}  # id of a ket operand's positions -> its conjugate's (made once, shared:
        # ``ManyTrees`` tests each distinct array once, and Q200 p=3's 300 networks read 31k operands)
        leaves = [[_conjugate(p, size, bra) if cj else p for p, cj in zip(ps, cs)] for ps, cs in zip(leaves, conj)]
        itemsize = values.dtype.itemsize
        limit = min(c.max_memory for c in contractions) / itemsize
        # Pauli words' <psi|P|psi>, read as real: the bra side's cotangents are the ket side's conjugates
        self.trees = ManyTrees([c.plan for c in contractions], leaves, size, max_elements=limit, constants=constants, mirrored=True)

    def contract(self, values) -> torch.Tensor:
        """Every network's value (``[networks]``, complex), differentiable in the gates' parameters."""
        parts = []
        for i, source in enumerate(self._sources):
            if self._fixed[i]:
                key = (i, values.dtype, values.device)
                flat = self._flat.get(key)
                if flat is None:
                    flat = self._flat[key] = values.operand_base(source[1]).reshape(-1).clone()
                parts.append(flat)
            elif source[0] == "stack":
                got = values.stacked_matrix(source[1])
                if got is None or tuple(got[0].shape) != source[2]:
                    raise RuntimeError("a gate kind's matrices were built otherwise than when the networks were compiled")
                parts.append(got[0].reshape(-1))
            else:
                parts.append(values.operand_base(source[1]).reshape(-1))
        return self.trees.contract(torch.cat(parts).to(values.dtype))


def _conjugate(pos: np.ndarray, size: int, memo: dict) -> np.ndarray:
    """``pos + size`` (the conjugate block's positions), one read-only array per ``pos``."""
    got = memo.get(id(pos))
    if got is None or got[0] is not pos:
        shifted = np.asarray(pos + size)  # (an operand selected down to one element: a 0-d array, not a scalar)
        shifted.flags.writeable = False
        got = memo[id(pos)] = (pos, shifted)
    return got[1]


def _block(values, o) -> tuple:
    """(key, source, shape) of the table block operand ``o`` reads: its gate kind's stacked matrices, or its own
    base tensor."""
    stacked = values.stacked_matrix(o.slot) if o.kind == "slot" else None
    if stacked is not None:
        whole, _ = stacked
        if whole.ndim != 3:
            raise NotTogether("a gate with lead axes")
        return ("stack", id(whole)), ("stack", o.slot, tuple(whole.shape)), whole.shape
    # an MPO site is its own constant (its data: its shape and its words' letters and coefficients)
    return ("base", o.kind, o.slot, o.diagonal, o.letter, o.data), ("base", o), values.operand_base(o).shape


def _hashable(select):
    """A selection as a dictionary key (slices are not hashable before Python 3.12)."""
    if select is None:
        return None
    return tuple((s.start, s.stop, s.step) if isinstance(s, slice) else s for s in select)


def _view_positions(at: int, shape, stacked, o) -> np.ndarray:
    """The positions of operand ``o``'s elements in a block at ``at`` of ``shape``: its own view of its
    matrix (as ``_Values`` builds it) and its selection."""
    pos = at + np.arange(int(np.prod(shape))).reshape(shape)
    if stacked is not None:
        return gate_view(pos[stacked[1]], o)
    return pos if o.select is None else pos[o.select]


def gate_view(matrix: np.ndarray, o) -> np.ndarray:
    """A gate matrix's ``[D, D]`` element positions as slot operand ``o`` reads them (``_Values.slot`` /
    ``_Values.diagonal``, then the operand's selection): its diagonal or its ``(2,) * 2k`` tensor."""
    wires = matrix.shape[-1].bit_length() - 1
    pos = np.diagonal(matrix).reshape((2,) * wires) if o.diagonal else matrix.reshape((2,) * (2 * wires))
    return pos if o.select is None else pos[o.select]


def together(contractions, values) -> Together | None:
    """A ``Together`` of the contractions, or None where they are contracted one by one."""
    if len(contractions) < TOGETHER_MIN_NETWORKS:
        return None
    if not all(isinstance(c.backend, TorchBackend) for c in contractions):
        return None
    if any(c.spread_slices is not False for c in contractions):  # (their slices go over ranks, network by network)
        return None
    try:
        return Together(contractions, values)
    except NotTogether:
        return None


__all__ = ["Together", "together", "gate_view"]

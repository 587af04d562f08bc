"""Closed-network cone classes run together: every member's network in one ``ManyTrees`` pass.

A deep QAOA's cones are mostly pairwise distinct (150 classes of one member on a 100-node graph at p=4),
each a closed network of a few hundred small tensors. Run class by class, a step spends its time building each
class's gate tensors and dispatching each pairwise step. Here the gate tensors of the whole circuit are
built once per gate kind, from the circuit's flat parameters, into one leaf table (a gate shared by many
cones is built once), and every member's network reads its operands from that table by position
(``network/many.py``). The members' values come back together, with one autograd node for all of them.

Taken when nothing is stacked or broadcast (one parameter row, no data batch), the contraction backend is
torch, and every closed class measures one Pauli word of gates with closed-form matrices; anything else
runs class by class as before (``program.ConeProgram._class_values``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..._values import _pauli_tensor
from ..._gates import constant_matrix, fast_matrix
from ...backends import get_backend
from ...backends.torch_backend import TorchBackend
from ..network.many import ManyTrees, NotTogether
from ..network.together import gate_view

TOGETHER_MIN_MEMBERS = 2
"""Closed classes run together once they hold at least this many members (one network gains nothing)."""


class ClassesTogether:
    """The closed classes of a ``ConeProgram`` (``classes``: (class, its one-row ``ClosedProgram``) pairs),
    compiled into one ``ManyTrees`` over a leaf table of the circuit's gates."""

    def __init__(self, classes: list, dtype, device):
        self.classes = [c for c, _ in classes]
        self.dtype, self.device = dtype, device
        self._fast: dict[str, dict[tuple, int]] = {}  # gate name -> {full-circuit parameter positions: row}
        self._const_keys: dict[tuple, int] = {}  # constant tensor key -> offset in the constant block
        self._const_parts: list[torch.Tensor] = []
        self._const_size = 0
        self._dims: dict[str, int] = {}  # gate name -> its matrix dimension
        recipes, plans = [], []
        max_memory = min(p.opts.max_memory for _, p in classes)
        for c, program in classes:
            (contraction,) = program._terms.values()
            plans.extend([contraction.plan] * len(c.terms))
            table = c.table.cpu().numpy()
            for m in range(len(c.terms)):
                recipes.append([self._recipe(o, c, table[m]) for o in contraction.network.operands])
        self.constants = torch.cat(self._const_parts) if self._const_parts else torch.zeros(0, dtype=dtype, device=device)
        self._fast_index = {
            name: torch.tensor(list(rows), dtype=torch.long, device=device).reshape(len(rows), -1)
            for name, rows in self._fast.items()
        }
        offsets, at = {}, self._const_size
        for name, rows in self._fast.items():
            offsets[name] = at
            at += len(rows) * self._dims[name] ** 2
        self.table_size = at
        leaves = [[self._positions(r, offsets) for r in network] for network in recipes]
        self.trees = ManyTrees(plans, leaves, self.table_size, max_elements=max_memory / dtype.itemsize)

    def _recipe(self, o, c, row) -> tuple:
        """(block, key, dimension, operand) of one network operand: where its base tensor lives in the table."""
        if o.kind == "slot":
            slot = c.structure.slots[o.slot]
            dim = 2 ** len(slot.wires)
            if slot.kind == "fast":
                if slot.params[1] == slot.params[0]:
                    raise NotTogether("a closed-form gate without parameters")
                key = tuple(int(p) for p in row[slot.params[0] : slot.params[1]])
                rows = self._fast.setdefault(slot.name, {})
                rows.setdefault(key, len(rows))
                self._dims[slot.name] = dim
                return ("fast", slot.name, key, dim, o)
            if slot.kind == "const":
                op = c.tape.operations[slot.op_index]
                return ("const", self._constant(constant_matrix(op, self.dtype, self.device)), None, dim, o)
            raise NotTogether(f"a {slot.kind} gate")
        if o.kind in ("zero", "pauli"):
            t = _pauli_tensor("0" if o.kind == "zero" else o.letter, self.dtype, self.device)
            return ("const", self._constant(t), None, 0, o)
        raise NotTogether(f"a {o.kind} operand")

    def _constant(self, t: torch.Tensor) -> tuple[int, tuple]:
        key = (id(t), tuple(t.shape))
        at = self._const_keys.get(key)
        if at is None:
            at = self._const_keys[key] = self._const_size
            self._const_parts.append(t.reshape(-1))
            self._const_size += t.numel()
        return at, tuple(t.shape)

    def _positions(self, recipe, offsets) -> np.ndarray:
        """The operand's element positions in the table (its conjugate block for a conjugated operand), in
        the shape ``_values.operand`` gives the tensor (the same reshapes, diagonal and selection)."""
        block, name, key, dim, o = recipe
        if block == "fast":
            base = offsets[name] + self._fast[name][key] * dim * dim
            pos = base + np.arange(dim * dim).reshape(dim, dim)
        else:
            at, shape = name
            pos = at + np.arange(int(np.prod(shape))).reshape(shape)
        if o.kind == "slot":
            pos = gate_view(pos, o)
        elif o.diagonal:
            pos = np.diagonal(pos, axis1=-2, axis2=-1)
        return pos + (self.table_size if o.conj else 0)

    def table(self, params: torch.Tensor) -> torch.Tensor:
        """The leaf table from the circuit's flat parameters ``[P]``: constants, then each fast gate kind's
        matrices (one builder call per kind)."""
        parts = [self.constants]
        for name, index in self._fast_index.items():
            p = params[index]  # [rows, gate parameters]
            parts.append(fast_matrix(name, list(p.unbind(1)), self.dtype, self.device).reshape(-1))
        return torch.cat(parts)

    def run(self, params: torch.Tensor) -> dict[int, torch.Tensor]:
        """Per class (by ``id``): its members' ``[1, members, 1]`` values."""
        values = self.trees.contract(self.table(params)).real
        out, at = {}, 0
        for c in self.classes:
            out[id(c)] = values[at : at + len(c.terms)].reshape(1, -1, 1)
            at += len(c.terms)
        return out


def run_together(program, params: torch.Tensor, values) -> dict[int, torch.Tensor]:
    """The values (per class ``id``: ``[1, members, 1]``) of a ``ConeProgram``'s closed classes that run
    together this step: those whose members read pairwise distinct parameters (a class whose members share
    their rows runs each distinct row once, the plain way, and is cheaper there). Empty where none does."""
    if program.rows != 1 or program.structure.batch_size is not None or program.opts.spread_slices is not False:
        return {}
    chosen = tuple(c for c in program.classes if program._closed_class[id(c)] and _distinct_rows(c, params[0]))
    key = (values.dtype, str(values.device), tuple(id(c) for c in chosen))
    if key not in program._together:
        program._together[key] = classes_together(program, chosen, values.dtype, values.device)
    together = program._together[key]
    if together is None:
        return {}
    program.executions += len(together.classes)
    return together.run(params[0])


def _distinct_rows(c, params: torch.Tensor) -> bool:
    if len(c.terms) == 1:
        return True
    rows = params.detach()[c.table.to(params.device)]
    return torch.unique(rows, dim=0).shape[0] == rows.shape[0]


def classes_together(program, classes, dtype, device) -> ClassesTogether | None:
    """The ``ClassesTogether`` of some of a ``ConeProgram``'s closed classes, or None where they run one
    by one."""
    if sum(len(c.terms) for c in classes) < TOGETHER_MIN_MEMBERS:
        return None
    if not isinstance(get_backend(program.opts.backend, device), TorchBackend):
        return None
    pairs = []
    for c in classes:
        if not _one_word(c.tape):
            return None
        program_c = program._program(c, 1, closed=True)
        if len(program_c._terms) != 1 or next(iter(program_c._terms))[0] != "pauli":
            return None
        pairs.append((c, program_c))
    try:
        return ClassesTogether(pairs, dtype, device)
    except NotTogether:
        return None


def _one_word(tape) -> bool:
    """Whether the class's sub-tape measures one expval of one Pauli word with coefficient 1."""
    if len(tape.measurements) != 1 or tape.measurements[0].obs is None:
        return False
    ps = tape.measurements[0].obs.pauli_rep
    return ps is not None and len(ps) == 1 and all(w and c == 1 for w, c in ps.items())


__all__ = ["ClassesTogether", "classes_together", "run_together"]

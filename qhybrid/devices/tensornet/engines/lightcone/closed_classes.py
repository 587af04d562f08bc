"""Closed-network cone classes run together: every member's network in one ``ManyTrees`` pass.

A deep QAOA's cones are mostly pairwise distinct (150 classes of one member on a 100-node graph at p=4),
each a closed network of a few hundred small tensors. Run class by class, a step spends its time building each
class's gate tensors and dispatching each pairwise step. Here the gate tensors of the whole circuit are
built once per gate kind, from the circuit's flat parameters, into one leaf table (a gate shared by many
cones is built once), and every member's network reads its operands from that table by position
(``network/many.py``). The members' values come back together, with one autograd node for all of them.

Classes whose members read equal parameters (an 8x8 lattice QAOA: every edge of a class at the same
angles) run each distinct row once, all classes in one pass too: their networks read class-local copies of
the distinct rows, and each member gets its row's value and, in the backward, its cotangent times its
row's gradient (``shared.run_distinct``'s rule, for all classes at once).

Taken when nothing is stacked or broadcast (one parameter row, no data batch), the contraction backend is
torch, and every closed class measures one Pauli word of gates with closed-form matrices; anything else
runs class by class as before (``program.ConeProgram._class_values``).
"""

from __future__ import annotations

import numpy as np
import torch

from ...._collector import collector_paused
from ..._values import _pauli_tensor
from ..._gates import constant_matrix, fast_matrix
from ...backends import get_backend
from ...backends.torch_backend import TorchBackend
from ..network.many import ManyTrees, NotTogether
from ..network.pathfind import PathSettings
from ..network.together import gate_view
from . import together_store
from .closed_sourced import sourced
from .shared import capturing
from ...._constants import on_device

TOGETHER_MIN_MEMBERS = 2
"""Closed classes run together once they hold at least this many members (one network gains nothing)."""

SHARED_MIN_ROWS = 1
"""Classes whose members share rows run together from this many distinct rows on: one network through
``ManyTrees`` (chains fused, one autograd node) beat ``contract_tree``'s einsum per step (Q100 p=4: a
39-wire class of 2 members reading one row took ~0.1 s of a step that way)."""


class ClassesTogether:
    """The closed classes of a ``ConeProgram`` (``classes``: (class, its one-row ``ClosedProgram``) pairs),
    compiled into one ``ManyTrees`` over a leaf table of the circuit's gates. ``rows[i]``: the parameter
    positions (``[networks, class parameters]``) of the networks run for class ``i``; by default every
    member's row of the full circuit (``class.table``)."""

    def __init__(self, classes: list, dtype, device, rows: list | None = None):
        self.classes = [c for c, _ in classes]
        self.dtype, self.device = dtype, device
        self._fast: dict[str, dict[tuple, int]] = {}  # gate name -> {full-circuit parameter positions: row}
        self._const_keys: dict[tuple, int] = {}  # constant tensor key -> offset in the constant block
        self._const_parts: list[torch.Tensor] = []
        self._const_size = 0
        self._dims: dict[str, int] = {}  # gate name -> its matrix dimension
        recipes, plans = [], []
        for i, (c, program) in enumerate(classes):
            (contraction,) = program._terms.values()
            table = c.table.cpu().numpy() if rows is None else rows[i]
            plans.extend([contraction.plan] * len(table))
            for row in table:
                bases: dict = {}  # slot -> its base tensor's place (a gate's ket and bra copies share it)
                recipes.append([self._recipe(o, c, row, bases) for o in contraction.network.operands])
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
        seen: dict = {}  # equal operands (a gate read by several cones) share one read-only position array
        leaves = [[self._positions(r, offsets, seen) for r in network] for network in recipes]
        limit = min(_element_limit(p.opts, dtype) for _, p in classes)
        self.trees = ManyTrees(plans, leaves, self.table_size, max_elements=limit, constants=self._const_size, mirrored=True)
        self.plan_flops = sum(p.flops for p in {id(p): p for p in plans}.values())
        """Forward flops of the distinct plans compiled in (each class's once; kept with the schedule)."""
        self.kept_flops = None  # the same, for one loaded from disk (it holds no plans to count)

    @classmethod
    def restored(cls, classes: list, dtype, device, constants, fast_index: dict, trees, flops) -> "ClassesTogether":
        """One whose leaf table's recipe and ``ManyTrees`` were kept (``together_store``)."""
        self = object.__new__(cls)
        self.plan_flops = self.kept_flops = flops
        self.classes, self.dtype, self.device = list(classes), dtype, device
        self.constants, self._fast_index, self.trees = constants, fast_index, trees
        self.table_size = trees.table_size
        return self

    def _recipe(self, o, c, row, bases: dict) -> tuple:
        """(block, key, dimension, operand) of one network operand: where its base tensor lives in the table
        (``bases``: the member's slots placed so far)."""
        if o.kind == "slot":
            base = bases.get(o.slot)
            if base is None:
                base = bases[o.slot] = self._base(c, row, o.slot)
            return (*base, o)
        if o.kind in ("zero", "pauli"):
            t = _pauli_tensor("0" if o.kind == "zero" else o.letter, self.dtype, self.device)
            return ("const", self._constant(t), None, 0, o)
        raise NotTogether(f"a {o.kind} operand")

    def _base(self, c, row, si: int) -> tuple:
        """(block, key, dimension) of slot ``si``'s base tensor for the member reading parameter row ``row``."""
        slot = c.structure.slots[si]
        dim = 2 ** len(slot.wires)
        if slot.kind == "fast":
            if slot.params[1] == slot.params[0]:
                raise NotTogether("a closed-form gate without parameters")
            key = tuple(int(p) for p in row[slot.params[0] : slot.params[1]])
            rows = self._fast.setdefault(slot.name, {})
            rows.setdefault(key, len(rows))
            self._dims[slot.name] = dim
            return ("fast", slot.name, key, dim)
        if slot.kind == "const":
            op = c.operator(slot.op_index)
            return ("const", self._constant(constant_matrix(op, self.dtype, self.device)), None, dim)
        raise NotTogether(f"a {slot.kind} gate")

    def _constant(self, t: torch.Tensor) -> tuple[int, tuple]:
        key = (id(t), tuple(t.shape))
        at = self._const_keys.get(key)
        if at is None:
            at = self._const_keys[key] = self._const_size
            self._const_parts.append(t.reshape(-1))
            self._const_size += t.numel()
        return at, tuple(t.shape)

    def _positions(self, recipe, offsets, seen: dict) -> np.ndarray:
        """The operand's element positions in the table (its conjugate block for a conjugated operand), in
        the shape ``_values.operand`` gives the tensor (the same reshapes, diagonal and selection); equal
        operands get one array (``seen``), made read-only so that no reader can change another's."""
        block, name, key, dim, o = recipe
        memo = (block, name, key, dim, o.kind, o.diagonal, o.conj, _selection(o.select))
        pos = seen.get(memo)
        if pos is None:
            pos = seen[memo] = self._new_positions(block, name, key, dim, o, offsets)
            pos.flags.writeable = False
        return pos

    def _new_positions(self, block, name, key, dim, o, offsets) -> np.ndarray:
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
        return np.asarray(pos + (self.table_size if o.conj else 0))  # (a 0-d operand's sum is a numpy scalar)

    def table(self, params: torch.Tensor) -> torch.Tensor:
        """The leaf table from the circuit's flat parameters ``[P]``: constants, then each fast gate kind's
        matrices (one builder call per kind)."""
        parts = [self.constants]
        for name, index in self._fast_index.items():
            p = params[index]  # [rows, gate parameters]
            parts.append(fast_matrix(name, list(p.unbind(1)), self.dtype, self.device).reshape(-1))
        return torch.cat(parts)

    def values(self, params: torch.Tensor) -> torch.Tensor:
        """Every network's (real) value, class after class."""
        return self.trees.contract(self.table(params)).real

    def run(self, params: torch.Tensor) -> dict[int, torch.Tensor]:
        """Per class (by ``id``): its members' ``[1, members, 1]`` values."""
        values = self.values(params)
        out, at = {}, 0
        for c in self.classes:
            out[id(c)] = values[at : at + len(c.terms)].reshape(1, -1, 1)
            at += len(c.terms)
        return out


def run_together(program, params: torch.Tensor, values, sources=None) -> dict[int, torch.Tensor]:
    """The values (per class ``id``: ``[1, members, 1]``) of a ``ConeProgram``'s closed classes that run
    together this step: those whose members read pairwise distinct parameters in one pass, those whose
    members share rows (each distinct row once) in another. Empty where none does."""
    if program.rows != 1 or program.structure.batch_size is not None or program.opts.spread_slices is not False:
        return {}
    if sources is not None:  # which members share rows is known from the plan: the shared classes in a few ops
        build = lambda cs, rows: classes_together(program, cs, values.dtype, values.device, rows, SHARED_MIN_ROWS)  # noqa: E731
        plan = sourced(program, sources, values.dtype, values.device, build)
        out = _run_distinct(program, plan[0], params, values)
        if plan[1] is not None:
            program.executions += plan[1].rows
            out.update(plan[1].run(params[0]))
        return out
    distinct, shared = [], []
    for c in program.classes:
        if not program._closed_class[id(c)]:
            continue
        if len(c.terms) == 1:
            distinct.append(c)
            continue
        cols = params[0][on_device(c.table, params.device)]  # [members, class parameters]
        if cols.shape[1] == 0:  # every member the same circuit without parameters: run the plain way
            continue
        with torch.no_grad():  # rows known equal from the values (``sources`` None)
            if capturing(cols):  # a CUDA graph (it cannot wait)
                distinct.append(c)
                continue
            unique, inverse = torch.unique(cols.detach(), dim=0, return_inverse=True)
        if unique.shape[0] == cols.shape[0]:
            distinct.append(c)
        else:
            shared.append((c, cols, unique, inverse))
    out = _run_distinct(program, distinct, params, values)
    if shared:
        key = ("shared", values.dtype, str(values.device), tuple((id(c), u.shape[0]) for c, _, u, _ in shared))
        if key not in program._together:
            with collector_paused():
                program._together[key] = shared_together(program, shared, values.dtype, values.device)
        got = program._together[key]
        if got is not None:
            program.executions += sum(u.shape[0] for _, _, u, _ in shared)
            out.update(got.run([cols for _, cols, _, _ in shared], [(u, inv) for _, _, u, inv in shared]))
    return out


def _run_distinct(program, distinct: list, params: torch.Tensor, values) -> dict:
    """The values of the classes whose members read pairwise distinct rows, in one pass."""
    key = (values.dtype, str(values.device), tuple(id(c) for c in distinct))
    if key not in program._together:
        with collector_paused():  # (the classes' programs and their ManyTrees: millions of objects)
            program._together[key] = classes_together(program, distinct, values.dtype, values.device)
    together = program._together[key]
    if together is None:
        return {}
    program.executions += len(together.classes)
    return together.run(params[0])


def _element_limit(opts, dtype) -> float:
    """Elements one intermediate may take: ``max_memory``'s, or the plans' own bound where lower (a device
    without ``max_memory`` slices plans to an eighth of the room, ``device.DEFAULT_INTERMEDIATE_FRACTION``)."""
    return min(opts.max_memory / dtype.itemsize, PathSettings.of(opts.optimizer).max_elements)


def classes_together(program, classes, dtype, device, rows=None, min_networks=None) -> ClassesTogether | None:
    """The ``ClassesTogether`` of some of a ``ConeProgram``'s closed classes (at least ``min_networks``
    networks, by default ``TOGETHER_MIN_MEMBERS``), or None where they run one by one."""
    networks = sum(len(c.terms) for c in classes) if rows is None else sum(map(len, rows))
    least = TOGETHER_MIN_MEMBERS if min_networks is None else min_networks
    if networks < least:
        return None
    store = together_store.store_of(program)
    described = together_store.describe(program, classes, dtype, device, rows) if store is not None else None
    limit = _element_limit(program.opts, dtype)
    kept = store.load(described, dtype, device, limit) if store is not None else None
    if kept is not None:  # a process built them before: no class program, network or tree is built
        return ClassesTogether.restored(classes, dtype, device, *kept)
    pairs = _pairs(program, classes, device)
    if pairs is None:
        return None
    try:
        together = ClassesTogether(pairs, dtype, device, rows)
    except NotTogether:
        return None
    if store is not None:
        store.save(described, together)
    return together


def shared_together(program, shared, dtype, device):
    """A ``SharedTogether`` of the classes in ``shared`` ((class, columns, distinct rows, inverse) each), or
    None where they run one by one."""
    classes = [c for c, _, _, _ in shared]
    rows, at = [], 0
    for c, cols, unique, _ in shared:
        rows.append(at + np.arange(unique.numel()).reshape(unique.shape))
        at += unique.numel()
    together = classes_together(program, classes, dtype, device, rows, min_networks=SHARED_MIN_ROWS)
    return None if together is None else SharedTogether(program, together, shared)


def _pairs(program, classes, device):
    if not isinstance(get_backend(program.opts.backend, device), TorchBackend):
        return None
    pairs = []
    for c in classes:
        if not _one_word(c.measurements):
            return None
        program_c = program._program(c, 1, closed=True)
        if len(program_c._terms) != 1 or next(iter(program_c._terms))[0] != "pauli":
            return None
        pairs.append((c, program_c))
    return pairs


def _one_word(measurements) -> bool:
    """Whether the class's sub-tape measures one expval of one Pauli word with coefficient 1."""
    if len(measurements) != 1 or measurements[0].obs is None:
        return False
    ps = measurements[0].obs.pauli_rep
    return ps is not None and len(ps) == 1 and all(w and c == 1 for w, c in ps.items())


class SharedTogether:
    """Closed classes whose members share parameter rows, each distinct row run once, all in one pass: the
    networks read the distinct rows laid end to end (``together``, built over those class-local rows)."""

    def __init__(self, program, together: ClassesTogether, shared):
        self.program, self.together = program, together
        self.classes = [c for c, _, _, _ in shared]
        self._every = None  # the classes over every member's own row (second derivatives)

    def run(self, cols: list, distinct: list) -> dict[int, torch.Tensor]:
        """Per class ``id``: its members' ``[1, members, 1]`` values, from their columns ``cols`` and the
        ``(distinct rows, inverse)`` of each."""
        if torch.is_grad_enabled() and any(x.requires_grad for x in cols):
            flat = _SharedRows.apply(self, [inv for _, inv in distinct], [u for u, _ in distinct], *cols)
        else:
            with torch.no_grad():
                every = self.together.values(torch.cat([u.reshape(-1) for u, _ in distinct]))
                flat = torch.cat(list(_members(every, distinct)))
        out, at = {}, 0
        for c, x in zip(self.classes, cols):
            out[id(c)] = flat[at : at + x.shape[0]].reshape(1, -1, 1)
            at += x.shape[0]
        return out

    def every_member(self, cols: list) -> torch.Tensor:
        """Every member's value from its own row (recorded: a second derivative differentiates this)."""
        if self._every is None:
            rows, at = [], 0
            for x in cols:
                rows.append(at + np.arange(x.numel()).reshape(x.shape))
                at += x.numel()
            self._every = classes_together(self.program, self.classes, self.together.dtype, self.together.device, rows)
        return self._every.values(torch.cat([x.reshape(-1) for x in cols]))


def _members(values: torch.Tensor, distinct: list):
    at = 0
    for unique, inverse in distinct:
        yield values[at : at + unique.shape[0]][inverse]
        at += unique.shape[0]


class _SharedRows(torch.autograd.Function):
    """Members' values from their classes' distinct rows; each member's gradient is its cotangent times its
    row's gradient (the rows run once with a cotangent of ones)."""

    @staticmethod
    def forward(ctx, shared: SharedTogether, inverses: list, uniques: list, *cols):
        ctx.shared, ctx.inverses = shared, inverses
        ctx.save_for_backward(*cols)
        with torch.enable_grad():
            ctx.leaves = [u.detach().requires_grad_(True) for u in uniques]
            ctx.out = shared.together.values(torch.cat([x.reshape(-1) for x in ctx.leaves]))
        return torch.cat(list(_members(ctx.out.detach(), list(zip(uniques, inverses)))))

    @staticmethod
    def backward(ctx, dy):
        cols = ctx.saved_tensors
        if torch.is_grad_enabled():  # a higher derivative: every member through its own row
            with torch.enable_grad():
                full = ctx.shared.every_member(list(cols))
                grads = torch.autograd.grad(full, cols, dy, create_graph=True)
            return (None, None, None, *grads)
        leaves, out = ctx.leaves, ctx.out
        if out is None:  # a second backward through the same graph: run the distinct rows again
            with torch.enable_grad():
                leaves = [u.detach().requires_grad_(True) for u in leaves]
                out = ctx.shared.together.values(torch.cat([x.reshape(-1) for x in leaves]))
        ctx.out = None
        with torch.enable_grad():  # a cotangent of ones as a sum: a tensor cotangent makes torch import sympy
            total = out.real.sum()
        g_rows = torch.autograd.grad(total, leaves)
        grads, at = [], 0
        for x, g, inverse in zip(cols, g_rows, ctx.inverses):
            grads.append(dy[at : at + x.shape[0]].unsqueeze(-1).to(g.dtype) * g[inverse])
            at += x.shape[0]
        return (None, None, None, *grads)


def _selection(select) -> tuple | None:
    """An operand's selection (slices and fixed positions) as a hashable key."""
    return None if select is None else tuple(None if isinstance(x, slice) else x for x in select)


__all__ = ["ClassesTogether", "SharedTogether", "classes_together", "run_together"]

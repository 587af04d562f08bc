"""A state-vector program bound to where its angles come from: the whole circuit as one autograd node.

The plain program path builds gate matrices with recorded torch ops (gather, cos/sin, stack, per-wire
fusion, Kronecker products: ~20 autograd nodes and their backward) before its adjoint node. Bound to a
gather (every gate angle is ``input.reshape(-1)[index]``), the program instead builds every matrix of one
gate kind in one batched call from the raw input columns inside the node, and its backward chains the
actions' cotangents back by hand: Kronecker blocks to their factors, fused per-wire products to their
gates (``C = A B``: ``g_A = g_C B^H``, ``g_B = A^H g_C``), gates to angles by their shift rules
(``gate_grads``), angles to inputs by one ``index_add`` per column. Single-qubit gates waiting on wires are
fused across wires in one batched matmul per chain position (wires whose chains have the same gate kinds).

Diagonal runs (``diagonal``: a QAOA cost layer, RZ / CRZ / IsingZZ / MultiRZ ...) read their angles, not
matrices: the run's angle columns ``[gates, 1, B|1]`` are gathered from the inputs in one indexing op per
input, and the run's own adjoint reduction gives their cotangents, scattered back by one ``index_add`` per
input (an unbatched gate's index repeats along the batch, so the scatter also sums over it).

``BoundProgram.bind`` returns None where the program needs the general path (stacked variants, operator
matrices, state preparation, global phases, constant angles, gates without a shift rule outside diagonal
runs, diagonal runs with a ``DiagonalQubitUnitary``).
"""

from __future__ import annotations

import torch

from . import bound_vjp, diagonal, gate_grads
from ..._gates import fixed_matrix as _constant
from .kron_tables import kron_gather as _kron, mm2
from .bound_inputs import Layout
from .kernels import Action
from .permutation import monomial_on
from .product import product_state, zero_ket as _zero_ket
from .product_stacked import STACKED_MAX_BYTES, first_columns
from .kron_blocks import kron_groups


class _Chain:
    """Every wire, in every fusion step, whose waiting gates have the same kinds in the same order: their
    fused matrices are built together, ``[entries, Bx, 2, 2]`` (Bx: the batch where a gate is batched)."""

    __slots__ = ("elems", "batched", "entries", "slots", "real", "const")

    def __init__(self):
        self.elems: list = []  # per chain position: ("g", group, positions tensor) or ("c", ops)
        self.batched = False
        self.real = True  # every gate of every entry is real-valued by kind (RY, Hadamard): see ``real_gate``
        self.const = False  # no parameter anywhere on the chain: its fused matrices are made once
        self.entries: list = []  # (step, wire)
        self.slots: list = []  # the waiting slots of each entry


class BoundProgram:
    """``program`` with its fast slots' angles gathered from inputs by ``maps`` (see the module notes)."""

    def __init__(self, program, structure, tape, groups, slot_group, chains, krons, steps, runs=()):
        self.program, self.structure, self.tape = program, structure, tape
        self.groups = groups  # [(name, batched, per parameter [(input, index [*shape]) per gate])]
        self.group_sources = [{src for col in spec for src, _ in col} for _, _, spec in groups]
        self.slot_group = slot_group  # slot -> (group, position)
        self.chains = chains
        self.krons = krons  # size -> (chain, entry indices [blocks * size]) of every block of that size
        self.steps = steps
        self.runs = list(runs)  # per diagonal run: per gate [[(input, index [B|1])]] (a [gates, 1, B|1] table)
        self.run_sources = [{row[0][0] for row in run} for run in self.runs]
        self.one_angle = [diagonal.one_element(run) for run in self.runs]  # ``diagonal.shared_values``'s runs
        self.single_source = all(len(s) == 1 for s in self.group_sources + self.run_sources)
        """Every group and run reads one input alone: gathered by ``take`` from it (``bound_inputs``)."""
        self.n = program.n
        self.signs = program.measure_signs
        self._consts: dict = {}
        self.amplitudes = (1 << self.n) * (structure.batch_size or 1)
        """State work of one run (amplitudes times batch): what decides its intra-op threads."""

    @classmethod
    def bind(cls, program, structure, maps, tape) -> "BoundProgram | None":
        if program.stack_size or program.phases or program.user_matrices or not program.unitary:
            return None
        in_runs = program.in_runs
        by_key: dict[tuple, int] = {}
        groups, slot_group = [], {}
        for si, slot in enumerate(structure.slots):
            if slot.kind == "const" or si in in_runs:
                continue
            entries = [maps[j] for j in range(*slot.params)]
            if slot.kind == "fast" and not slot.batched and entries and all(e[0] == "const" for e in entries):
                continue  # ``RY(0.3)``: a constant gate, its matrix made once per value (``_constant``)
            if slot.kind != "fast" or not gate_grads.supported(slot.name):
                return None
            if any(e[0] == "const" for e in entries) or len({tuple(e[1].shape) for e in entries}) != 1:
                return None
            # one group per gate kind and index shape, whichever inputs its angles come from (bound_inputs)
            key = (slot.name, slot.batched, len(entries), tuple(entries[0][1].shape))
            gid = by_key.get(key)
            if gid is None:
                gid = by_key[key] = len(groups)
                groups.append((slot.name, slot.batched, [[] for _ in entries]))
            spec = groups[gid][2]
            slot_group[si] = (gid, len(spec[0]))
            for k, e in enumerate(entries):
                spec[k].append((e[0], e[1]))
        steps = program.steps
        if program.measure is not None and steps and steps[-1].kind == "monomial":
            steps = steps[:-1]  # folded into the sign matrix
        sigs: dict[tuple, int] = {}
        chains: list[_Chain] = []
        blocks_by_size: dict[int, list] = {}
        compiled, runs = [], []
        for s, step in enumerate(steps):
            if step.kind not in ("product", "local", "monomial", "permute", "gate", "diagonal"):
                return None
            if step.kind == "diagonal":
                gathers = cls._run_gathers(step.data, structure, maps)
                if gathers is None:
                    return None
                compiled.append(("diagonal", (step.data, len(runs))))
                runs.append(gathers)
                continue
            if step.kind in ("monomial", "permute", "gate"):
                compiled.append((step.kind, step))
                continue
            refs = {}  # wire -> (chain, entry)
            for w in sorted(step.data):
                slots = step.data[w]
                if not slots:
                    continue
                sig = tuple(slot_group[si][0] if si in slot_group else structure.slots[si].name for si in slots)
                ci = sigs.setdefault(sig, len(chains))
                if ci == len(chains):
                    chains.append(_Chain())
                chain = chains[ci]
                refs[w] = (ci, len(chain.entries))
                chain.entries.append((s, w))
                chain.slots.append(slots)
                chain.batched = chain.batched or any(structure.slots[si].batched for si in slots)
                chain.real = chain.real and program.real_slots.issuperset(slots)
            if step.kind == "product":
                compiled.append(("product", refs))  # marked constant below, once the chains are complete
                continue
            plan = []
            for q, members in cls._blocks(refs, chains, program.kron_wires):
                if len(members) == 1:
                    plan.append(("single", q, members[0]))
                else:
                    size_blocks = blocks_by_size.setdefault(len(members), [])
                    plan.append(("block", q, len(members), len(size_blocks), members))
                    size_blocks.append(members)
            plan.extend(("lead", w, ref) for w, ref in sorted(refs.items()) if chains[ref[0]].batched)
            compiled.append(("local", plan))
        for chain in chains:
            for j in range(len(chain.slots[0])):
                column = [slots[j] for slots in chain.slots]
                if column[0] in slot_group:
                    chain.elems.append(("g", slot_group[column[0]][0], torch.tensor([slot_group[si][1] for si in column])))
                else:
                    chain.elems.append(("c", [tape.operations[structure.slots[si].op_index] for si in column]))
        for chain in chains:
            chain.const = all(e[0] == "c" for e in chain.elems)
        # a product state of parameter-free chains (Hadamards) is one constant state, made once per dtype/device
        compiled = [("product0", refs) if kind == "product" and all(chains[ci].const for ci, _ in refs.values())
                    else (kind, refs) for kind, refs in compiled]
        krons = {}
        for size, blocks in blocks_by_size.items():
            flat = [ref for block in blocks for ref in block]
            krons[size] = flat
        return cls(program, structure, tape, groups, slot_group, chains, krons, compiled, runs)

    @staticmethod
    def _run_gathers(run, structure, maps) -> list | None:
        """A diagonal run's angle columns as gathers: per gate ``[(input, index [B|1])]``, or None where a
        member is not one gathered angle (a ``DiagonalQubitUnitary``, a literal angle)."""
        if run.vectors:
            return None
        B = structure.batch_size or 1
        width = B if any(structure.slots[si].batched for si in run.angles) else 1
        rows = []
        for si in run.angles:
            slot = structure.slots[si]
            if slot.params[1] - slot.params[0] != 1:
                return None
            src, index = maps[slot.params[0]][:2]
            if src == "const" or index.ndim > 1 or (index.ndim == 1 and index.shape[0] != width):
                return None
            rows.append([(src, index.reshape(-1).expand(width))])
        return rows
    @staticmethod
    def _blocks(refs, chains, width: int) -> list:
        """Kronecker blocks of up to ``width`` adjacent unbatched wires (``kron_groups``): [(first wire, [(chain,
        entry), ...])]."""
        plain = {w: ref for w, ref in refs.items() if not chains[ref[0]].batched}
        return [(group[0], [plain[w] for w in group]) for group in kron_groups(sorted(plain), width)]

    # --- forward ---------------------------------------------------------------------------------
    def tensors(self, inputs, dtype, device, derivatives: bool = True):
        """(actions, tensors, record) for these inputs; ``record`` is what ``input_cotangents`` needs
        (``derivatives=False``: a run no backward will follow)."""
        real = dtype.to_real()
        lay = self._layout(inputs)
        flat = None if self.single_source else lay.flat(inputs, real)

        def gather(key, parts, sources):
            return lay.gather(inputs, flat, key, parts, sources, device, real)

        derivs, mats = [], []
        for gid, (name, _, spec) in enumerate(self.groups):
            cols = gather(("g", gid), spec, self.group_sources[gid])  # [k, gates, *shape], one gather
            m, dm = gate_grads.build_stacked(name, cols, dtype, device, with_derivatives=derivatives)
            mats.append(m)
            derivs.append(dm)
        fused = [self._fuse(chain, mats, dtype, device) for chain in self.chains]
        F = [partial[-1] for _, partial in fused]
        members = {size: self._members(refs, F).reshape(-1, size, 2, 2) for size, refs in self.krons.items()}
        K = {size: _kron(m).unbind(0) for size, m in members.items()}  # one unbind a size, not a select a block
        columns: dict = {}
        actions, tensors, origins = [], [], []

        def add(kind, info, ts, origin, real=False):
            actions.append(Action(kind, info, len(tensors), len(tensors) + len(ts), real))
            tensors.extend(ts)
            origins.extend(origin)

        for kind, data in self.steps:
            if kind == "product0":
                add("product", None, [self._product0(data, F, dtype, device)], [None])
            elif kind == "product" and self._stacked_product(data):
                (ci, e0) = data[0]
                if ci not in columns:  # contiguous: the stacked product reads it as a flat view, twice each way
                    columns[ci] = first_columns(F[ci], self._consts)  # [entries, 2, 1, Bx], contiguous
                V = columns[ci] if columns[ci].shape[0] == self.n else columns[ci][e0 : e0 + self.n]
                add("product", None, [V], [("vecs", ci, e0)])
            elif kind == "product":
                vectors, origin = [_zero_ket(dtype, device)] * self.n, [None] * self.n
                for w, (ci, e) in data.items():
                    if ci not in columns:
                        columns[ci] = F[ci][..., :, 0].transpose(1, 2).unsqueeze(2)  # [entries, 2, 1, Bx]
                    vectors[w] = columns[ci][e]
                    origin[w] = None if self.chains[ci].const else ("vec", ci, e)
                add("product", None, vectors, origin)
            elif kind == "local":
                for item in data:
                    if item[0] == "block":
                        _, q, size, b, refs = item
                        real_block = all(self.chains[ci].real for ci, _ in refs)
                        add("plain", (q, size), [K[size][b]], [("kron", size, b)], real_block)
                    elif item[0] == "single":
                        _, q, (ci, e) = item
                        add("plain", (q, 1), [F[ci][e, 0]], [("mat", ci, e)], self.chains[ci].real)
                    else:
                        _, w, (ci, e) = item
                        add("lead", (w, 1), [F[ci][e].unsqueeze(0)], [("lead", ci, e)])
            elif kind == "monomial":
                info = monomial_on(data, device)
                if info is not None:
                    add("monomial", info, [], [])
            elif kind == "permute":
                add("permute", data.data, [], [])
            elif kind == "diagonal":
                run, ri = data
                theta = gather(("r", ri), self.runs[ri], self.run_sources[ri])  # [gates, 1, B|1], one gather
                shared = diagonal.shared_values(run, dtype, device) if self.one_angle[ri] else None
                add("diagonal", diagonal.RunCall(run, shared), [theta], [("run", ri)])
            else:
                self._gate(data.data, mats, dtype, device, add)
        return actions, tensors, (derivs, mats, fused, origins, members, lay)

    def _layout(self, inputs) -> Layout:
        """The inputs' flat layout, made once per input shapes."""
        key = ("layout", Layout.key(inputs))
        hit = self._consts.get(key)
        if hit is None:
            hit = self._consts[key] = Layout(inputs)
        return hit

    def _members(self, refs, F) -> torch.Tensor:
        """The unbatched fused matrices ``[len(refs), 2, 2]`` of (chain, entry) ``refs``."""
        chains = {ci for ci, _ in refs}
        if len(chains) == 1:
            (ci,) = chains
            key = ("members", id(refs))
            if key not in self._consts:
                self._consts[key] = torch.tensor([e for _, e in refs])
            return F[ci][:, 0].index_select(0, self._on(self._consts[key], F[ci].device))
        return torch.stack([F[ci][e, 0] for ci, e in refs])

    def _on(self, index, device):
        if index.device == device:
            return index
        key = (id(index), device)
        if key not in self._consts:
            self._consts[key] = index.to(device)
        return self._consts[key]

    def _const(self, ops, dtype, device) -> torch.Tensor:
        key = (id(ops), dtype, device)
        if key not in self._consts:
            self._consts[key] = torch.stack([_constant(op, dtype, device) for op in ops]).unsqueeze(1)
        return self._consts[key]

    def _elem(self, e, mats, dtype, device) -> torch.Tensor:
        """One chain position as ``[entries, Bx, 2, 2]``."""
        if e[0] == "c":
            return self._const(e[1], dtype, device)
        m = mats[e[1]]
        if not bound_vjp.whole(self, e[2], len(m)):  # not every gate of the group in order: pick them
            m = m.index_select(0, self._on(e[2], device))
        return m if self.groups[e[1]][1] else m.unsqueeze(1)

    def _fuse(self, chain, mats, dtype, device) -> tuple[list, list]:
        """(chain positions, running products): the last product is the entries' fused matrices."""
        key = ("fused", id(chain), dtype, device)
        if chain.const and key in self._consts:
            return self._consts[key]
        elems = [self._elem(e, mats, dtype, device) for e in chain.elems]
        partial = [elems[0]]
        for m in elems[1:]:
            partial.append(mm2(m, partial[-1]) if m.shape[-1] == 2 else torch.matmul(m, partial[-1]))
        if chain.const:
            self._consts[key] = (elems, partial)
        return elems, partial

    def _stacked_product(self, refs) -> bool:
        """Whether a product step's vectors are one chain's consecutive entries on every wire, in wire order
        (then one ``[n, 2, 1, Bx]`` tensor: ``product_stacked``), on a state small enough for it."""
        key = ("stacked", id(refs))
        hit = self._consts.get(key)
        if hit is None:
            first = refs.get(0)
            hit = (
                self.n >= 2 and first is not None and not self.chains[first[0]].const
                and all(refs.get(w) == (first[0], first[1] + w) for w in range(self.n))
                and self.amplitudes * 16 <= STACKED_MAX_BYTES
            )
            self._consts[key] = hit
        return hit

    def _product0(self, refs, F, dtype, device) -> torch.Tensor:
        """The constant product state ``[2**n, 1, 1]`` of parameter-free chains (never written: not fresh)."""
        key = ("product0", dtype, device)
        hit = self._consts.get(key)
        if hit is None:
            vectors = [_zero_ket(dtype, device)] * self.n
            for w, (ci, e) in refs.items():
                vectors[w] = F[ci][e, 0, :, 0][:, None, None]
            hit = self._consts[key] = product_state(vectors, 1, 1, dtype, device)
        return hit

    def _gate(self, si, mats, dtype, device, add) -> None:
        slot = self.structure.slots[si]
        if si in self.slot_group:
            gid, pos = self.slot_group[si]
            m, origin = mats[gid][pos], ("gate", gid, pos)
        else:
            key = ("gate", si, dtype, device)
            m = self._consts.get(key)
            if m is None:
                m = self._consts[key] = _constant(self.tape.operations[slot.op_index], dtype, device)
            origin = None
        lead = slot.batched
        if lead:
            m = m.unsqueeze(0)
        kind, info, perm, inverse = self._placement(si, m.ndim - 2)
        if perm is not None:
            m = m.reshape(*m.shape[:-2], *(2,) * (2 * len(slot.wires))).permute(perm).reshape(m.shape)
        origin = None if origin is None else (*origin, inverse, lead)
        add(kind, info, [m], [origin], si in self.program.real_slots)

    def _placement(self, si, nl) -> tuple:
        """(action kind, info, axis permutation sorting the gate's wires or None, its inverse) of a gate slot
        whose matrix has ``nl`` lead axes, worked out once per slot."""
        key = ("placement", si)
        hit = self._consts.get(key)
        if hit is None:
            slot = self.structure.slots[si]
            wires, k = list(slot.wires), len(slot.wires)
            order = sorted(range(k), key=lambda i: wires[i])
            perm = inverse = None
            if order != list(range(k)):
                perm = list(range(nl)) + [nl + i for i in order] + [nl + k + i for i in order]
                inverse = [perm.index(i) for i in range(len(perm))]
                wires = sorted(wires)
            lead = slot.batched
            if wires == list(range(wires[0], wires[0] + k)):
                hit = ("lead" if lead else "plain", (wires[0], k), perm, inverse)
            else:
                hit = ("scattered", (tuple(wires), lead), perm, inverse)
            self._consts[key] = hit
        return hit

    def index(self, values: tuple, device) -> torch.Tensor:
        """``torch.tensor(values)`` on ``device``, made once per values and device (no host copy per step)."""
        key = ("index", values, device)
        hit = self._consts.get(key)
        if hit is None:
            hit = self._consts[key] = torch.tensor(values, device=device)
        return hit

    # --- backward --------------------------------------------------------------------------------
    def input_cotangents(self, record, grads, inputs, needs, conj_krons: bool = False) -> list:
        """Cotangents of ``inputs`` from those of the action tensors (``grads``), chained by hand (``bound_vjp``;
        ``conj_krons``: the Kronecker blocks' cotangents are given conjugated)."""
        return bound_vjp.input_cotangents(self, record, grads, inputs, needs, conj_krons)

"""A state-vector program bound to where its angles come from: the whole circuit as one autograd node.

The plain program path builds gate matrices with recorded torch ops (gather, cos/sin, stack, per-wire
fusion, Kronecker products: ~20 autograd nodes and their backward) before its adjoint node. Bound to a
gather (every gate angle is ``input.reshape(-1)[index]``), the program instead builds every matrix of one
gate kind in one batched call from the raw input columns inside the node, and its backward chains the
actions' cotangents back by hand: Kronecker blocks to their factors, fused per-wire products to their
gates (``C = A B``: ``g_A = g_C B^H``, ``g_B = A^H g_C``), gates to angles by their shift rules
(``gate_grads``), angles to inputs by one ``index_add`` per column. Single-qubit gates waiting on wires are
fused across wires in one batched matmul per chain position (wires whose chains have the same gate kinds).

``BoundProgram.bind`` returns None where the program needs the general path (stacked variants, operator
matrices, state preparation, global phases, constant angles, gates without a shift rule).
"""

from __future__ import annotations

import numpy as np
import torch

from . import gate_grads, kernels
from ..._gates import constant_matrix
from .kernels import Action
from .program import KRON_MAX_WIRES, _zero_ket


class _Chain:
    """Wires of one fusion step whose waiting gates have the same kinds in the same order."""

    __slots__ = ("wires", "elems", "batched")

    def __init__(self, wires, elems, batched):
        self.wires = wires  # list of wire positions
        self.elems = elems  # per chain position: ("g", group, positions tensor) or ("c", ops)
        self.batched = batched


class BoundProgram:
    """``program`` with its fast slots' angles gathered from inputs by ``maps`` (see the module notes)."""

    def __init__(self, program, structure, tape, groups, slot_group, steps):
        self.program, self.structure, self.tape = program, structure, tape
        self.groups = groups  # [(name, batched, [(input, index [n, *shape]) per parameter])]
        self.slot_group = slot_group  # slot -> (group, position)
        self.steps = steps
        self.n = program.n
        self.signs = program.measure_signs
        self._consts: dict = {}

    @classmethod
    def bind(cls, program, structure, maps, tape) -> "BoundProgram | None":
        if program.stack_size or program.phases or program.user_matrices or not program.unitary:
            return None
        by_key: dict[tuple, int] = {}
        groups, slot_group = [], {}
        for si, slot in enumerate(structure.slots):
            if slot.kind == "const":
                continue
            if slot.kind != "fast" or not gate_grads.supported(slot.name):
                return None
            entries = [maps[j] for j in range(*slot.params)]
            if any(e[0] == "const" for e in entries) or len({tuple(e[1].shape) for e in entries}) != 1:
                return None
            key = (slot.name, slot.batched, tuple(e[0] for e in entries), tuple(entries[0][1].shape))
            gid = by_key.get(key)
            if gid is None:
                gid = by_key[key] = len(groups)
                groups.append([slot.name, slot.batched, [(e[0], []) for e in entries]])
            spec = groups[gid][2]
            slot_group[si] = (gid, len(spec[0][1]))
            for k, e in enumerate(entries):
                spec[k][1].append(e[1])
        groups = [(name, batched, [(src, torch.stack(ix)) for src, ix in spec]) for name, batched, spec in groups]
        steps = program.steps
        if program.measure is not None and steps and steps[-1].kind == "monomial":
            steps = steps[:-1]  # folded into the sign matrix
        compiled = []
        for step in steps:
            if step.kind in ("product", "local"):
                chains = cls._chains(step.data, structure, slot_group, tape)
                compiled.append((step.kind, chains, cls._blocks(chains) if step.kind == "local" else None))
            elif step.kind in ("monomial", "gate"):
                compiled.append((step.kind, step, None))
            else:
                return None
        return cls(program, structure, tape, groups, slot_group, compiled)

    @staticmethod
    def _chains(pending, structure, slot_group, tape) -> list[_Chain]:
        sigs: dict[tuple, list[int]] = {}
        for w in sorted(pending):
            slots = pending[w]
            if slots:
                sig = tuple(("g", slot_group[si][0]) if si in slot_group else ("c", structure.slots[si].name) for si in slots)
                sigs.setdefault(sig, []).append(w)
        chains = []
        for sig, wires in sigs.items():
            elems, batched = [], False
            for j, (kind, ref) in enumerate(sig):
                if kind == "g":
                    pos = torch.tensor([slot_group[pending[w][j]][1] for w in wires])
                    elems.append(("g", ref, pos))
                    batched = batched or structure.slots[pending[wires[0]][j]].batched
                else:
                    elems.append(("c", [tape.operations[structure.slots[pending[w][j]].op_index] for w in wires]))
            chains.append(_Chain(wires, elems, batched))
        return chains

    @staticmethod
    def _blocks(chains) -> list:
        """Kronecker blocks of adjacent unbatched wires by size: [(size, [(first wire, [(chain, k), ...])])]."""
        plain = sorted((w, (ci, k)) for ci, c in enumerate(chains) if not c.batched for k, w in enumerate(c.wires))
        blocks, block = [], []
        for w, ref in plain + [(None, None)]:
            if block and (w is None or w != block[-1][0] + 1 or len(block) == KRON_MAX_WIRES):
                blocks.append((block[0][0], [r for _, r in block]))
                block = []
            if w is not None:
                block.append((w, ref))
        by_size: dict[int, list] = {}
        for q, refs in blocks:
            by_size.setdefault(len(refs), []).append((q, refs))
        return sorted(by_size.items())

    # --- forward ---------------------------------------------------------------------------------
    def tensors(self, inputs, dtype, device):
        """(actions, tensors, record) for these inputs; ``record`` is what ``input_cotangents`` needs."""
        real = torch.empty((), dtype=dtype).real.dtype
        cols, mats = [], []
        for name, _, spec in self.groups:
            c = [inputs[src].detach().reshape(-1)[self._on(index, device)].to(real) for src, index in spec]
            cols.append(c)
            mats.append(gate_grads.build(name, c, dtype, device))
        actions, tensors, origins, krons = [], [], [], []
        fused: dict = {}

        def add(kind, info, ts, origin):
            actions.append(Action(kind, info, len(tensors), len(tensors) + len(ts)))
            tensors.extend(ts)
            origins.extend(origin)

        for si_step, (kind, data, blocks) in enumerate(self.steps):
            if kind == "product":
                vectors, origin = [_zero_ket(dtype, device)] * self.n, [None] * self.n
                for ci, chain in enumerate(data):
                    fused[(si_step, ci)] = self._fuse(chain, mats, dtype, device)
                    col = fused[(si_step, ci)][1][-1][..., :, 0]  # [wires, Bx, 2]
                    for k, w in enumerate(chain.wires):
                        vectors[w] = col[k].T.unsqueeze(1)
                        origin[w] = ("vec", si_step, ci, k)
                add("product", None, vectors, origin)
            elif kind == "local":
                Fs = []
                for ci, chain in enumerate(data):
                    fused[(si_step, ci)] = self._fuse(chain, mats, dtype, device)
                    Fs.append(fused[(si_step, ci)][1][-1])
                for size, group in blocks:
                    if size == 1:
                        for q, ((ci, k),) in group:
                            add("plain", (q, 1), [Fs[ci][k, 0]], [("mat", si_step, ci, k)])
                        continue
                    # every block of one size in one batched Kronecker build
                    members = torch.stack([Fs[ci][k, 0] for _, refs in group for ci, k in refs])
                    members = members.reshape(len(group), size, 2, 2)
                    krons.append((si_step, [refs for _, refs in group], members))
                    for b, (K, (q, _)) in enumerate(zip(_kron(members).unbind(0), group)):
                        add("plain", (q, size), [K], [("kron", len(krons) - 1, b)])
                for ci, chain in enumerate(data):
                    if chain.batched:
                        for k, w in enumerate(chain.wires):
                            add("lead", (w, 1), [Fs[ci][k].unsqueeze(0)], [("lead", si_step, ci, k)])
            elif kind == "monomial":
                info = self._monomial(data, device)
                if info is not None:
                    add("monomial", info, [], [])
            else:
                self._gate(data.data, mats, dtype, device, add)
        return actions, tensors, (cols, mats, fused, origins, krons)

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
            self._consts[key] = torch.stack([constant_matrix(op, dtype, device) for op in ops]).unsqueeze(1)
        return self._consts[key]

    def _elem(self, e, mats, dtype, device) -> torch.Tensor:
        """One chain position as ``[wires, Bx, 2, 2]``."""
        if e[0] == "c":
            return self._const(e[1], dtype, device)
        m = mats[e[1]].index_select(0, self._on(e[2], device))
        return m if self.groups[e[1]][1] else m.unsqueeze(1)

    def _fuse(self, chain, mats, dtype, device) -> tuple[list, list]:
        """(chain positions, running products): the last product is the wires' fused matrices."""
        elems = [self._elem(e, mats, dtype, device) for e in chain.elems]
        partial = [elems[0]]
        for m in elems[1:]:
            partial.append(torch.matmul(m, partial[-1]))
        return elems, partial

    def _monomial(self, step, device):
        perm, phase = step.data
        if perm is None and phase is None:
            return None
        if perm is not None and perm[0].device != device:
            perm = (perm[0].to(device), perm[1].to(device))
            step.data = (perm, phase)
        if phase is not None and phase.device != device:
            phase = phase.to(device)
            step.data = (perm, phase)
        return perm, phase

    def _gate(self, si, mats, dtype, device, add) -> None:
        slot = self.structure.slots[si]
        if si in self.slot_group:
            gid, pos = self.slot_group[si]
            m, origin = mats[gid][pos], ("gate", gid, pos)
        else:
            m, origin = constant_matrix(self.tape.operations[slot.op_index], dtype, device), None
        lead = slot.batched
        if lead:
            m = m.unsqueeze(0)
        wires, k = list(slot.wires), len(slot.wires)
        order = sorted(range(k), key=lambda i: wires[i])
        perm = None
        if order != list(range(k)):
            nl = m.ndim - 2
            perm = list(range(nl)) + [nl + i for i in order] + [nl + k + i for i in order]
            m = m.reshape(*m.shape[:-2], *(2,) * (2 * k)).permute(perm).reshape(m.shape)
            wires = sorted(wires)
        origin = None if origin is None else (*origin, perm, lead)
        if wires == list(range(wires[0], wires[0] + k)):
            add("lead" if lead else "plain", (wires[0], k), [m], [origin])
        else:
            add("scattered", (tuple(wires), lead), [m], [origin])

    # --- backward --------------------------------------------------------------------------------
    def input_cotangents(self, record, grads, inputs, needs) -> list:
        """Cotangents of ``inputs`` from those of the action tensors (``grads``), chained by hand."""
        cols, mats, fused, origins, krons = record
        g_fused: dict = {}
        g_krons: dict = {}
        g_mats: list = [None] * len(mats)

        def fused_part(key, k, g):
            g_fused.setdefault(key, {})[k] = g

        for origin, g in zip(origins, grads):
            if origin is None or g is None:
                continue
            kind = origin[0]
            if kind == "vec":  # [2, 1, Bx] -> column k of the fused matrix
                _, s, ci, k = origin
                col = g[:, 0, :].T  # [Bx, 2]
                full = torch.zeros(*col.shape, 2, dtype=col.dtype, device=col.device)
                full[..., 0] = col
                fused_part((s, ci), k, full)
            elif kind == "mat":
                fused_part(origin[1:3], origin[3], g.unsqueeze(0))
            elif kind == "lead":
                fused_part(origin[1:3], origin[3], g[0])
            elif kind == "kron":
                g_krons.setdefault(origin[1], {})[origin[2]] = g
            else:  # "gate": undo the lead axis and wire order of the slot's matrix
                _, gid, pos, perm, lead = origin
                if perm is not None:
                    inverse = [int(i) for i in np.argsort(perm)]
                    g = g.reshape(*g.shape[:-2], *(2,) * (len(perm) - (g.ndim - 2))).permute(inverse).reshape(g.shape)
                if lead:
                    g = g[0]
                _accumulate(g_mats, mats, gid, torch.tensor([pos], device=g.device), g.unsqueeze(0))
        for kid, parts in g_krons.items():
            s, refs, members = krons[kid]
            g = torch.stack([parts[b] if b in parts else torch.zeros_like(parts[next(iter(parts))]) for b in range(len(refs))])
            factors = _kron_vjp(members, g)
            for b, block in enumerate(refs):
                for j, (ci, k) in enumerate(block):
                    fused_part((s, ci), k, factors[b, j].unsqueeze(0))
        for (s, ci), parts in g_fused.items():
            chain = self.steps[s][1][ci]
            elems, partial = fused[(s, ci)]
            F = partial[-1]
            gF = torch.stack([parts[k].expand(F.shape[1:]) if k in parts else torch.zeros_like(F[0]) for k in range(len(chain.wires))])
            self._chain_vjp(chain, elems, partial, gF, g_mats, mats)
        out: list = [None] * len(inputs)
        for gid, gm in enumerate(g_mats):
            name, _, spec = self.groups[gid]
            if gm is None or not any(needs[src] for src, _ in spec):
                continue
            for (src, index), gcol in zip(spec, gate_grads.angle_cotangents(name, cols[gid], gm)):
                if not needs[src]:
                    continue
                x = inputs[src]
                if out[src] is None:
                    out[src] = torch.zeros(x.numel(), dtype=gcol.dtype, device=gcol.device)
                out[src].index_add_(0, self._on(index, gcol.device).reshape(-1), gcol.reshape(-1))
        return [None if g is None else g.reshape(x.shape).to(x.dtype) for g, x in zip(out, inputs)]

    def _chain_vjp(self, chain, elems, partial, gF, g_mats, mats) -> None:
        device = gF.device
        g = gF
        for j in range(len(elems) - 1, -1, -1):
            gm = g if j == 0 else torch.matmul(g, partial[j - 1].mH)
            e = chain.elems[j]
            if e[0] == "g":
                gm = kernels.sum_to(gm, elems[j].shape)
                if not self.groups[e[1]][1]:
                    gm = gm.squeeze(1)
                _accumulate(g_mats, mats, e[1], self._on(e[2], device), gm)
            if j:
                g = kernels.sum_to(torch.matmul(elems[j].mH, g), partial[j - 1].shape)


def _accumulate(g_mats, mats, gid, positions, g) -> None:
    if g_mats[gid] is None:
        g_mats[gid] = torch.zeros_like(mats[gid])
    g_mats[gid].index_add_(0, positions, g.to(g_mats[gid].dtype))


def _kron(members: torch.Tensor) -> torch.Tensor:
    """``[blocks, k, 2, 2]`` -> ``[blocks, 2**k, 2**k]`` Kronecker products (member 0 most significant)."""
    nb, k = members.shape[:2]
    K = members[:, 0]
    for j in range(1, k):
        d = 1 << j
        K = (K[:, :, None, :, None] * members[:, j, None, :, None, :]).reshape(nb, 2 * d, 2 * d)
    return K


def _kron_vjp(members: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Cotangents ``[blocks, k, 2, 2]`` of the factors from ``g``, that of ``_kron(members)``:
    ``g_A_j = sum over the other factors' indices of g * conj(kron of the other factors)``, one two-operand
    contraction per factor (no path search)."""
    nb, k = members.shape[:2]
    out = []
    for j in range(k):
        left, right = 1 << j, 1 << (k - 1 - j)
        others = torch.cat([members[:, :j], members[:, j + 1 :]], 1)
        O = _kron(others).conj().reshape(nb, left, right, left, right)
        gk = g.reshape(nb, left, 2, right, left, 2, right)
        out.append(torch.einsum("zlarmbs,zlrms->zab", gk, O))
    return torch.stack(out, 1)

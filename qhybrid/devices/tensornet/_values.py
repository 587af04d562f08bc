"""Gate operand values for a group of variants of one structure: parameters gathered per gate kind (one\nindexing op per input column), stacked where variants differ, and the matrices built from them."""

from __future__ import annotations

from itertools import compress
from operator import is_not
from typing import Sequence

import numpy as np
import torch

from ._gates import broadcast_shape, constant_matrix, fast_matrix, generic_matrix, global_phase, state_vector
from ._gates import typed_tensor
from .._constants import literal
from .engines.network.network import BATCH, STACK
from ..._variant import Variant
from ._structure import TapeStructure
from ._options import SimOptions


_PAULI = {
    "I": [[1, 0], [0, 1]],
    "X": [[0, 1], [1, 0]],
    "Y": [[0, -1j], [1j, 0]],
    "Z": [[1, 0], [0, -1]],
    "0": [1, 0],  # the zero ket: a network's input, cached like the Pauli letters (one per qubit per call)
}


def _expand_lead(t: torch.Tensor, present: tuple, lead_shape: tuple) -> torch.Tensor:
    """Give a result every lead axis (stack, batch) even where its light cone did not reach them."""
    want = len(lead_shape)
    if len(present) == want:
        return t
    full = (STACK, BATCH)[2 - want :] if want < 2 else (STACK, BATCH)
    for axis, ix in enumerate(full):
        if ix not in present:
            t = t.unsqueeze(axis)
    return t.expand(*lead_shape, *t.shape[want:])


_PAULI_TENSORS: dict[tuple, torch.Tensor] = {}
_DIFF_CACHE: dict = {}


class _Values:
    """Tensor values of one group's operands; each slot built once, bra sides by conjugation."""

    def __init__(self, structure: TapeStructure, group: Sequence[Variant], stacked: frozenset, opts: SimOptions):
        self.structure, self.group, self.stacked = structure, group, stacked
        self.dtype, self.device = opts.dtype, opts.device
        self.real_dtype = opts.dtype.to_real()
        self._slots: dict[int, torch.Tensor] = {}
        self._matrices: dict[int, torch.Tensor] = {}
        self._stacks: dict[int, tuple[torch.Tensor, int]] = {}  # slot -> (its kind's matrices, position)
        self._table = None  # (position -> column, [S, P] table) of the stacked scalar parameters

    def _stack_table(self) -> dict:
        """Every differing scalar parameter's column over the stack, built in a few ops for the whole
        group: a [S, P] table of row 0's values with the other rows' values scattered in. Empty where
        some differing value is not a 0-dim real tensor (then columns are built one by one)."""
        if self._table is not None:
            return self._table
        self._table = {}
        rows = _differences(self.group)
        first = self.group[0].params
        positions = sorted(rows)
        if len(positions) < 2:
            return self._table
        scalar = lambda p: isinstance(p, torch.Tensor) and p.ndim == 0 and p.dtype.is_floating_point  # noqa: E731
        entries = [(k, r) for k, j in enumerate(positions) for r in rows[j]]
        values = [self.group[r].params[positions[k]] for k, r in entries]
        base = [first[j] for j in positions]
        if not all(map(scalar, values)) or not all(map(scalar, base)):
            return self._table
        device = base[0].device
        if any(p.device != device for p in values) or any(p.device != device for p in base):
            return self._table
        table = torch.stack(base).to(self.real_dtype).expand(len(self.group), len(positions))
        r_idx = literal(tuple(r for _, r in entries), device, torch.long)
        k_idx = literal(tuple(k for k, _ in entries), device, torch.long)
        table = table.index_put((r_idx, k_idx), torch.stack(values).to(self.real_dtype))
        if device != self.device:
            table = table.to(self.device)
        self._table = {j: table[:, k] for k, j in enumerate(positions)}
        return self._table

    def _params(self, si: int) -> list:
        """The slot's parameters; those that differ across stacked variants get a leading stack axis.

        A differing column is the first variant's value expanded along the stack axis with the other
        variants' values scattered in (parameter-shift variants differ in one parameter each), not a
        stack of one scalar per variant."""
        slot = self.structure.slots[si]
        a, b = slot.params
        first = self.group[0].params
        if si not in self.stacked:
            return first[a:b]
        rows = _differences(self.group)
        table = self._stack_table()
        out = []
        for j in range(a, b):
            changed = rows.get(j)
            if not changed:
                out.append(first[j])
                continue
            column = table.get(j)
            if column is not None:
                out.append(column.unsqueeze(-1) if slot.batched else column)
                continue
            # complex data (a channel's Kraus matrices, a unitary) stay complex: as real numbers their imaginary parts
            # were dropped (a batch of two equal tapes with a complex QubitChannel: -0.176 for 0.210)
            kind = self.real_dtype if not any(_complex(self.group[r].params[j]) for r in (0, *changed)) else self.dtype
            base = typed_tensor(first[j], kind, self.device)
            if len(changed) == len(self.group) - 1:
                column = torch.stack([base, *(typed_tensor(self.group[r].params[j], kind, self.device) for r in changed)])
            else:
                vals = torch.stack([typed_tensor(self.group[r].params[j], kind, self.device) for r in changed])
                index = literal(tuple(changed), self.device, torch.long)  # (made once per device)
                column = base.expand(len(self.group), *base.shape).index_put((index,), vals)
            if slot.batched and column.ndim == 1:
                column = column.unsqueeze(-1)  # a stacked scalar broadcasts against the batch axis
            out.append(column)
        return out

    def angle(self, si: int) -> torch.Tensor:
        """The slot's one real parameter with lead axes ``[S|1, B|1]`` (angles of diagonal runs)."""
        p = typed_tensor(self._params(si)[0], self.real_dtype, self.device)
        if si in self.stacked and self.structure.slots[si].params[0] in _differences(self.group):
            return p.reshape(len(self.group), -1)
        return p.reshape(1, -1)

    def changed_rows(self, si: int) -> set | None:
        """Stack rows whose parameters of slot ``si`` are not row 0's; None where rows may differ in more
        than parameters (operator settings of matrix / prep / phase slots)."""
        slot = self.structure.slots[si]
        if slot.kind != "fast":
            return None
        rows = _differences(self.group)
        out: set = set()
        for j in range(*slot.params):
            out.update(rows.get(j, ()))
        return out

    def _per_variant(self, si: int, fn) -> torch.Tensor:
        """``fn(operator, params)`` for the slot, stacked over variants when they differ."""
        slot = self.structure.slots[si]
        members = self.group if si in self.stacked else self.group[:1]
        values = [fn(v.tape.operations[slot.op_index], v.params[slot.params[0] : slot.params[1]]) for v in members]
        return torch.stack(values) if si in self.stacked else values[0]

    def _broadcast_matrix(self, si: int) -> torch.Tensor | None:
        """A stacked slot of scalar-angle operators (PauliRot, MultiRZ, ...) in one PennyLane matrix call
        with the stack as PennyLane's broadcast axis, instead of one call per variant (operators of one
        structure differ only in their parameters); None where that does not apply."""
        slot = self.structure.slots[si]
        if si not in self.stacked or slot.batched:
            return None
        op = self.group[0].tape.operations[slot.op_index]
        try:
            scalar = all(nd == 0 for nd in op.ndim_params)
        except (AttributeError, TypeError, ValueError):
            return None
        if not scalar:
            return None
        n = len(self.group)
        columns = []
        for p in self._params(si):
            p = typed_tensor(p, self.real_dtype, self.device)
            columns.append(p.expand(n) if p.ndim == 0 else p)
        if any(c.shape != (n,) for c in columns):
            return None
        m = generic_matrix(op, columns, self.dtype, self.device)
        return m if m.ndim == 3 and m.shape[0] == n else None

    def prefetch(self, indices: Sequence[int]) -> None:
        """Build the matrices of every closed-form ("fast") slot among ``indices``: one builder call per
        gate kind and lead layout, however many gates of that kind the circuit has."""
        groups: dict[tuple, list[int]] = {}
        for si in indices:
            slot = self.structure.slots[si]
            if slot.kind == "fast" and si not in self._matrices and si not in self._stacks:
                groups.setdefault((slot.name, si in self.stacked, slot.batched), []).append(si)
        for (name, stacked_kind, _), members in groups.items():
            if len(members) == 1:
                continue
            stacked = None if stacked_kind else self._gathered_columns(members)
            if stacked is None:
                columns = [[typed_tensor(p, self.real_dtype, self.device) for p in self._params(si)] for si in members]
                shape = broadcast_shape(*(p.shape for col in columns for p in col))
                n_params = len(columns[0])
                # an expand to the same shape is still an autograd node (and a reduction in the backward)
                stacked = [
                    torch.stack([col[k] if col[k].shape == shape else col[k].expand(shape) for col in columns])
                    for k in range(n_params)
                ]
            # split into per-slot views only when a slot's own matrix is read (``matrix``): the closed networks
            # read them stacked, and Q100 p=3 split its 750 every step for views never read (~2 ms a step)
            whole = fast_matrix(name, stacked, self.dtype, self.device)
            for k, si in enumerate(members):
                self._stacks[si] = (whole, k)

    def _gathered_columns(self, members: list[int]) -> list[torch.Tensor] | None:
        """The parameter columns of same-kind slots read straight from the inputs the variant's parameters
        were gathered from (one indexing op per column), where each column comes from one input."""
        gather = self.group[0].gather
        if gather is None or len(self.group) > 1:
            return None
        key = ("columns", tuple(members))
        if key not in gather.memo:
            gather.memo[key] = _column_index(self.structure, gather.maps, members)
        spec = gather.memo[key]
        if spec is None:
            return None
        out = []
        for src, index in spec:
            x = gather.inputs[src]
            if not isinstance(x, torch.Tensor):
                return None
            out.append(x.reshape(-1)[gather.index_on(index, x.device)].to(device=self.device, dtype=self.real_dtype))
        # [gates, *its shape] per column: a scalar column must meet a broadcast one along the broadcast axis (as the
        # per-gate expand above does), not along the gates' axis, which a bare [gates] would align with
        shape = broadcast_shape(*(c.shape[1:] for c in out))
        return [c.reshape(c.shape[0], *(1,) * (len(shape) - c.dim() + 1), *c.shape[1:]).expand(c.shape[0], *shape)
                if c.shape[1:] != shape else c for c in out]

    def stacked_matrix(self, si: int) -> tuple[torch.Tensor, int] | None:
        """``(matrices, k)`` when ``prefetch`` built the slot's matrix as ``matrices[k]`` of one builder call
        for its gate kind, else None."""
        return self._stacks.get(si)

    def matrix(self, si: int) -> torch.Tensor:
        """The slot's matrix, shape ``lead + (D, D)`` (lead: stack then batch axes where present)."""
        m = self._matrices.get(si)
        if m is not None:
            return m
        stack = self._stacks.get(si)
        if stack is not None:  # every slot of its kind at once: one unbind (one autograd node), not a select each
            whole = stack[0]
            members = sorted((k, sj) for sj, (w, k) in self._stacks.items() if w is whole)
            for (_, sj), m in zip(members, whole.unbind(0)):
                self._matrices[sj] = m
            return self._matrices[si]
        slot = self.structure.slots[si]
        dtype, device = self.dtype, self.device
        if slot.kind == "fast":
            m = fast_matrix(slot.name, self._params(si), dtype, device)
        elif slot.kind == "const":
            m = constant_matrix(self.group[0].tape.operations[slot.op_index], dtype, device)
        elif slot.kind == "matrix":
            m = self._broadcast_matrix(si)
            if m is None:
                m = self._per_variant(si, lambda op, p: generic_matrix(op, p, dtype, device))
        else:  # pragma: no cover - only gate kinds have matrices
            raise AssertionError(slot.kind)
        self._matrices[si] = m
        return m

    def slot(self, si: int) -> torch.Tensor:
        t = self._slots.get(si)
        if t is not None:
            return t
        slot = self.structure.slots[si]
        dtype, device = self.dtype, self.device
        if slot.kind in ("fast", "const", "matrix"):
            m = self.matrix(si)
            m = m.reshape(*m.shape[:-2], *(2,) * (2 * len(slot.wires)))
        elif slot.kind == "prep":
            m = self._per_variant(si, lambda op, p: state_vector(op, p, dtype, device))
        elif slot.kind == "phase":
            m = self._per_variant(si, lambda op, p: global_phase(p, dtype, device))
        else:  # pragma: no cover - the structure only makes the kinds above
            raise AssertionError(slot.kind)
        self._slots[si] = m
        return m

    def operand(self, o, matrix=None) -> torch.Tensor:
        """Operand ``o`` of a network: a gate's tensor, the zero ket, a Pauli letter, an MPO block or an
        observable's own matrix."""
        t = self.operand_base(o, matrix)
        if o.select is not None:
            t = t[o.select]
        return t.conj() if o.conj else t

    def operand_base(self, o, matrix=None) -> torch.Tensor:
        """Operand ``o`` before its selection and conjugation: the tensor operands with the same
        ``(kind, slot, diagonal, letter)`` share."""
        dtype, device = self.dtype, self.device
        if o.kind == "slot":
            return self.diagonal(o.slot) if o.diagonal else self.slot(o.slot)
        if o.kind == "zero":
            t = _pauli_tensor("0", dtype, device)
        elif o.kind == "pauli":
            t = _pauli_tensor(o.letter, dtype, device)
        elif o.kind == "mpo":
            t = _mpo_tensor(o.data, dtype, device)
        else:  # "matrix": the observable's own matrix, bra indices first
            m = typed_tensor(matrix, dtype, device)
            k = m.shape[-1].bit_length() - 1
            t = m.reshape((2,) * (2 * k))
        if o.diagonal:  # a cap diagonal on its wire: [.., bra, ket] -> [.., ket]
            t = torch.diagonal(t, dim1=-2, dim2=-1)
        return t

    def diagonal(self, si: int) -> torch.Tensor:
        """A diagonal gate's diagonal, shape ``lead + (2,) * k`` (one axis per wire, a hyperedge tensor)."""
        key = -1 - si  # kept beside the dense slot tensors
        t = self._slots.get(key)
        if t is None:
            m = self.matrix(si)
            k = len(self.structure.slots[si].wires)
            t = torch.diagonal(m, dim1=-2, dim2=-1).reshape(*m.shape[:-2], *(2,) * k)
            self._slots[key] = t
        return t


def _column_index(structure: TapeStructure, maps, members: list[int]):
    """Per parameter of the gate kind: (input, [gates, ...] flat indices) when every gate's value comes from
    the same input with the same shape; else None."""
    n_params = structure.slots[members[0]].params[1] - structure.slots[members[0]].params[0]
    spec = []
    for k in range(n_params):
        entries = [maps[structure.slots[si].params[0] + k] for si in members]
        srcs = {e[0] for e in entries}
        if len(srcs) != 1 or "const" in srcs or len({tuple(e[1].shape) for e in entries}) != 1:
            return None
        spec.append((entries[0][0], torch.stack([e[1] for e in entries])))
    return spec


def _mpo_tensor(data, dtype, device) -> torch.Tensor:
    """One site of a Pauli-sentence MPO, [left, right, bra, ket] without its size-1 boundary axes."""
    key = ("mpo", data, dtype, str(device))
    t = _PAULI_TENSORS.get(key)
    if t is None:
        (nl, nr), entries = data
        t = torch.zeros(nl, nr, 2, 2, dtype=dtype)
        for l, r, letter, c in entries:
            t[l, r] += c * torch.tensor(_PAULI[letter], dtype=dtype)
        t = t.reshape(*[d for d in (nl, nr) if d > 1], 2, 2).to(device)
        if len(_PAULI_TENSORS) < 4096:
            _PAULI_TENSORS[key] = t
    return t


def _pauli_tensor(letters: str, dtype, device) -> torch.Tensor:
    """One Pauli matrix for a single letter; a [terms, 2, 2] stack for a string (cached constants)."""
    key = (letters, dtype, str(device))
    t = _PAULI_TENSORS.get(key)
    if t is None:
        mats = [_PAULI[c] for c in letters]
        t = torch.tensor(mats[0] if len(letters) == 1 and letters != "I" else mats, dtype=dtype, device=device)
        if len(_PAULI_TENSORS) < 4096:
            _PAULI_TENSORS[key] = t
    return t


def _differences(group: Sequence[Variant]) -> dict[int, list[int]]:
    """For each flat parameter position, the variants (by index, first excluded) whose value object is
    not the first variant's; identity checks run at C speed (map / compress)."""
    key = id(group)
    hit = _DIFF_CACHE.get(key)
    if hit is not None and hit[0] is group:
        return hit[1]
    first = group[0].params
    rows: dict[int, list[int]] = {}
    positions = range(len(first))
    for r in range(1, len(group)):
        params = group[r].params
        if params is first:
            continue
        for j in compress(positions, map(is_not, params, first)):
            rows.setdefault(j, []).append(r)
    _DIFF_CACHE.clear()
    _DIFF_CACHE[key] = (group, rows)
    return rows


def _stacked_slots(structure: TapeStructure, group: Sequence[Variant]) -> frozenset:
    if len(group) == 1:
        return frozenset()
    rows = _differences(group)
    ops0 = group[0].tape.operations
    out = set()
    for si, slot in enumerate(structure.slots):
        a, b = slot.params
        if any(j in rows for j in range(a, b)):
            out.add(si)
        elif slot.kind in ("matrix", "prep", "phase") and any(
            v.tape.operations[slot.op_index] is not ops0[slot.op_index] for v in group[1:]
        ):
            out.add(si)  # per-variant operators may differ in settings the structure key ignores
    return frozenset(out)


def _complex(p) -> bool:
    return p.is_complex() if isinstance(p, torch.Tensor) else bool(np.iscomplexobj(p))

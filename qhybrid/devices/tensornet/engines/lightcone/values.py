"""Gate operands of one cone class: its members' parameters, gathered from the whole circuit's, stacked.

A class's sub-tape has one slot per kept gate; every member reads that gate's parameters from its own
gate of the full circuit. ``ConeValues`` offers the interface the state-vector and network programs read
(``matrix``, ``slot``, ``operand``, ``prefetch``) over parameter columns with a leading stack axis (one row
per member and stacked variant), built per gate kind in one builder call.
"""

from __future__ import annotations

import torch

from ..._gates import constant_matrix, fast_matrix, generic_matrix
from ..._structure import TapeStructure
from ..._values import network_operand


class ConeValues:
    """Operands of ``structure`` (a class's sub-tape) from ``columns``: ``[K, P]`` or ``[K, P, B]``
    parameters (K stacked rows, P the sub-tape's gate parameters, B the broadcast batch), or ``[P]`` /
    ``[P, B]`` when nothing is stacked."""

    def __init__(self, structure: TapeStructure, tape, columns: torch.Tensor, stacked: bool, dtype, device):
        self.structure, self.tape, self.columns, self.stacked_rows = structure, tape, columns, stacked
        self.dtype, self.device = dtype, device
        self.real_dtype = torch.empty((), dtype=dtype).real.dtype
        self._matrices: dict[int, torch.Tensor] = {}
        self._slots: dict[int, torch.Tensor] = {}

    def _column(self, j: int, batched: bool) -> torch.Tensor:
        c = self.columns[:, j] if self.stacked_rows else self.columns[j]
        if self.columns.ndim == (3 if self.stacked_rows else 2):  # a batch axis: unbatched gates take one entry
            c = c if batched else c[..., 0]
        return c

    def _params(self, si: int) -> list[torch.Tensor]:
        slot = self.structure.slots[si]
        return [self._column(j, slot.batched) for j in range(*slot.params)]

    def angle(self, si: int) -> torch.Tensor:
        """The slot's one real parameter with lead axes ``[K|1, B|1]`` (the angles of diagonal runs)."""
        p = self._params(si)[0].to(self.real_dtype)
        return p.reshape(p.shape[0], -1) if self.stacked_rows else p.reshape(1, -1)

    def changed_rows(self, si: int):
        return None  # rows differ anywhere: no sparse redo

    def prefetch(self, indices) -> None:
        """Matrices of every closed-form slot among ``indices``, one builder call per gate kind."""
        groups: dict[tuple, list[int]] = {}
        for si in indices:
            slot = self.structure.slots[si]
            if slot.kind == "fast" and si not in self._matrices:
                groups.setdefault((slot.name, slot.batched), []).append(si)
        for (name, _), members in groups.items():
            if len(members) == 1:
                continue
            n_params = self.structure.slots[members[0]].params[1] - self.structure.slots[members[0]].params[0]
            stacked = [torch.stack([self._params(si)[k] for si in members]) for k in range(n_params)]
            for si, m in zip(members, fast_matrix(name, stacked, self.dtype, self.device).unbind(0)):
                self._matrices[si] = m

    def matrix(self, si: int) -> torch.Tensor:
        m = self._matrices.get(si)
        if m is not None:
            return m
        slot = self.structure.slots[si]
        op = self.tape.operations[slot.op_index]
        if slot.kind == "fast":
            m = fast_matrix(slot.name, self._params(si), self.dtype, self.device)
        elif slot.kind == "const":
            m = constant_matrix(op, self.dtype, self.device)
        else:  # scalar-angle operators without a closed form: PennyLane's matrix, broadcast over the rows
            params = self._params(si)
            lead = params[0].shape if params else ()
            flat = [p.reshape(-1) if p.ndim else p for p in params]
            m = generic_matrix(op, flat, self.dtype, self.device)
            m = m.reshape(*lead, *m.shape[-2:])
        self._matrices[si] = m
        return m

    def slot(self, si: int) -> torch.Tensor:
        t = self._slots.get(si)
        if t is None:
            m = self.matrix(si)
            k = len(self.structure.slots[si].wires)
            t = self._slots[si] = m.reshape(*m.shape[:-2], *(2,) * (2 * k))
        return t

    def operand(self, o, matrix=None) -> torch.Tensor:
        return network_operand(self, o, matrix)


__all__ = ["ConeValues"]

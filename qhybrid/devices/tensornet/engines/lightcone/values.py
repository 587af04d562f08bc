"""Gate operands of one cone class: its members' parameters, gathered from the whole circuit's, stacked.

A class's sub-tape has one slot per kept gate; every member reads that gate's parameters from its own
gate of the full circuit. ``ConeValues`` is the simulator's ``_Values`` (matrices built once per slot, one
builder call per gate kind, network operands) over parameter *columns* with a leading stack axis (one row
per member and stacked variant) instead of a group of variants: it overrides only where the parameters
come from (``_params``, ``angle``, ``changed_rows``) and how a matrix-only gate is built over the rows.
"""

from __future__ import annotations

import torch

from ..._gates import generic_matrix
from ..._structure import TapeStructure
from ..._values import _Values


class _TapeOnly:
    """A stand-in variant for ``_Values``' readers of operator settings (``group[0].tape``)."""

    gather = None

    def __init__(self, tape):
        self.tape = tape


class ConeValues(_Values):
    """Operands of ``structure`` (a class's sub-tape) from ``columns``: ``[K, P]`` or ``[K, P, B]``
    parameters (K stacked rows, P the sub-tape's gate parameters, B the broadcast batch), or ``[P]`` /
    ``[P, B]`` when nothing is stacked."""

    def __init__(self, structure: TapeStructure, tape, columns: torch.Tensor, stacked: bool, dtype, device):
        # every slot is "stacked" when the rows are: _Values then builds its matrices from whole columns
        self.structure, self.group = structure, [_TapeOnly(tape)]
        self.stacked = frozenset(range(len(structure.slots))) if stacked else frozenset()
        self.tape, self.columns, self.stacked_rows = tape, columns, stacked
        self.dtype, self.device = dtype, device
        self.real_dtype = dtype.to_real()
        self._slots: dict[int, torch.Tensor] = {}
        self._matrices: dict[int, torch.Tensor] = {}
        self._stacks: dict[int, tuple[torch.Tensor, int]] = {}  # slot -> (its kind's matrices, position)
        self._unbound: tuple | None = None  # the columns, unbound at the first read

    def _column(self, j: int, batched: bool) -> torch.Tensor:
        if self._unbound is None:  # every column in one op (one autograd node), not a select per parameter
            self._unbound = self.columns.unbind(1 if self.stacked_rows else 0)
        c = self._unbound[j]
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

    def _gathered_columns(self, members):
        return None  # the columns are at hand

    def _broadcast_matrix(self, si: int) -> torch.Tensor:
        """Scalar-angle operators without a closed form: PennyLane's matrix, broadcast over the rows."""
        op = self.tape.operations[self.structure.slots[si].op_index]
        params = self._params(si)
        lead = params[0].shape if params else ()
        flat = [p.reshape(-1) if p.ndim else p for p in params]
        m = generic_matrix(op, flat, self.dtype, self.device)
        return m.reshape(*lead, *m.shape[-2:])


__all__ = ["ConeValues"]

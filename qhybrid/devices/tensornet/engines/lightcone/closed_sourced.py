"""Closed classes whose members read equal parameters known from the plan, all run in a few ops a step.

Where the plan shows which parameters are equal (``parameters.row_sources``: each entry of the parameter row
is gathered from a known input), which members of a closed class share a row is fixed too
(``shared.member_groups``). Then the whole step of those classes is three gathers: the distinct rows of every
class from the parameter row (ONE ``index_select``, through the first member of each group), every network
of those rows in one ``ManyTrees`` pass (``closed_classes.classes_together``), each member's value from its
row's (ONE ``index_select``), split per class (ONE ``split``). Plain autograd differentiates it: a group's
members' cotangents add up on its first member's parameters, which read the very inputs the others read, so
the inputs' gradients are the same sums (an 8x8 lattice QAOA p=3: ~240 of a step's ops were 15 classes' own
gathers, slices and products, forward and backward, in ``closed_classes.SharedTogether``). Classes whose members
read pairwise distinct rows (one-member classes among them) join that pass, a group per member: Q100 p=3 ran them
in a second pass before, its step's ops 1,431 -> 835.

>>> # exercised through ``ConeProgram`` (tests/devices/tensornet/test_closed_classes.py)
"""

from __future__ import annotations

import numpy as np
import torch

from ...._collector import collector_paused
from ...._constants import on_device
from .shared import member_groups


class SourcedShared:
    """The shared classes of one program, parameter plan, dtype and device (see the module)."""

    def __init__(self, together, classes: list, first: np.ndarray, members: np.ndarray, counts: list, device):
        self.together, self.classes, self.counts = together, classes, counts
        self.first = torch.from_numpy(first).to(device)  # parameter positions of every distinct row, end to end
        self.members = torch.from_numpy(members).to(device)  # each member's row, class after class
        self.rows = len(together.trees._roots)

    def run(self, params: torch.Tensor) -> dict[int, torch.Tensor]:
        """Per class ``id``: its members' ``[1, members, 1]`` values from the parameter row ``params``."""
        every = self.together.values(params.index_select(0, self.first))
        parts = every.index_select(0, self.members).view(1, -1, 1).split(self.counts, dim=1)
        return {id(c): p for c, p in zip(self.classes, parts)}


def sourced(program, sources: torch.Tensor, dtype, device, build) -> tuple:
    """``(distinct classes, SourcedShared or None)`` of the program's closed classes under ``sources`` (made
    once per parameter plan, dtype and device); None in place of a ``SourcedShared`` where the shared classes
    cannot run together (they run class by class). ``build(classes, rows)``: their ``ClassesTogether`` over
    class-local ``rows``, or None."""
    memo = program.__dict__.setdefault("_sourced", {})
    key = (dtype, str(device))
    hit = memo.get(key)
    if hit is not None and hit[0] is sources:
        return hit[1]
    distinct, shared = [], []
    for c in program.classes:
        if not program._closed_class[id(c)]:
            continue
        groups = None if len(c.terms) == 1 else member_groups(sources, c.table, device)
        if c.table.shape[1] == 0 and len(c.terms) > 1:  # every member the same circuit without parameters
            continue
        if groups is None:
            # members of pairwise distinct rows, a group each, in the same pass as the shared classes: one pass
            # for all (Q100 p=3, 57 classes of which 20 share rows: 1,431 -> 835 ops a step, 23.1 -> 18.4 ms)
            distinct.append(c)
            each = torch.arange(len(c.terms))
            groups = (each, each)
        shared.append((c, groups))
    plan = (distinct, None)  # (where the shared pass cannot be built, these still run together, apart)
    if shared:
        firsts, members, rows, counts, at, row_at = [], [], [], [], 0, 0
        for c, (first, inverse) in shared:
            table = c.table.cpu()[first.cpu()].numpy()  # [distinct rows, class parameters]
            firsts.append(table.reshape(-1))
            rows.append(at + np.arange(table.size).reshape(table.shape))
            members.append(row_at + inverse.cpu().numpy())
            counts.append(len(c.terms))
            at, row_at = at + table.size, row_at + table.shape[0]
        classes = [c for c, _ in shared]
        with collector_paused():
            together = build(classes, rows)
        if together is not None:  # (else they run class by class, as ``ConeProgram`` runs what is not done here)
            plan = ([], SourcedShared(together, classes, np.concatenate(firsts), np.concatenate(members), counts, device))
    memo[key] = (sources, plan)
    return plan


__all__ = ["SourcedShared", "sourced"]

"""Memory of ``method="mps"`` before it is allocated: the bonds a routing plan can reach, and a guard that refuses
the split that would take the state past the device's ``max_memory``, with the numbers and the fix.

A block on sites ``lo .. hi - 1`` between bonds ``left`` and ``right`` splits into bonds no larger than
``min(left * 2**j, right * 2**(width - j), 2**min(cut, n - cut), max_bond_dim)`` at its j-th inner cut: from
the plan alone (:func:`worst_case`, once per plan) the largest site tensors and split workspaces are known.
Without a bond cap that bound is the exact state's 2**(n/2) for any deep circuit, although the cutoff keeps
the true bonds (the Schmidt ranks) far lower in many of them (30 wires at depth 10: bonds of 32 where the
bound is 1024), so it does not refuse by itself: where it fits ``max_memory`` nothing more is checked, and
where it does not, :class:`MemoryGuard` checks each split against the bonds actually reached, before the
split allocates, and refuses the first one that would not fit (naming the worst case and the bond cap that
keeps it within ``max_memory``). What is counted: every site tensor, the block's new sites, and
:data:`STEP_COPIES` copies of the merged block; reverse mode keeps each step's tensors for the backward on
top of this (as the exact engines' ``max_memory`` bounds their state, not autograd's tape).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .....errors import ContractionTooLargeError
from ..network.plan import _fmt_bytes

STEP_COPIES = 6
"""Block-sized tensors one split holds at once: the merged block before and after its gate, the Gram matrix
(or the SVD's factors), the eigenvectors, ``U^H theta``, and the solver's workspace."""


@dataclass(frozen=True)
class Bound:
    """The worst case of a plan: ``peak`` elements per batch member (sites plus one split's workspace) and the
    largest bond."""

    peak: int
    bond: int


def _inner_bonds(left: int, right: int, lo: int, width: int, n: int, cap: int | None) -> list[int]:
    """Bounds of the bonds inside a block of ``width`` sites from ``lo`` between bonds ``left`` and ``right``."""
    out = []
    for j in range(1, width):
        cut = lo + j
        b = min(left << j, right << (width - j), 1 << min(cut, n - cut))
        out.append(b if cap is None else min(b, cap))
    return out


@functools.lru_cache(maxsize=256)
def worst_case(spans: tuple[tuple[int, int], ...], n: int, cap: int | None) -> Bound:
    """The bound of a plan's multi-site blocks ``spans`` (``(start, width)``) on ``n`` sites at bond cap ``cap``.

    >>> worst_case(((0, 2), (1, 2), (0, 2)), 3, None)
    Bound(peak=76, bond=2)
    """
    bonds = [1] * (n + 1)  # bonds[i]: the bond left of site i (bonds[0] = bonds[n] = 1)
    sites = 2 * n
    peak, top = sites, 1
    for lo, width in spans:
        hi = lo + width
        left, right = bonds[lo], bonds[hi]
        inner = _inner_bonds(left, right, lo, width, n, cap)
        new = [left, *inner, right]
        old_sites = sum(2 * bonds[i] * bonds[i + 1] for i in range(lo, hi))
        new_sites = sum(2 * new[j] * new[j + 1] for j in range(width))
        peak = max(peak, sites + new_sites + STEP_COPIES * (left << width) * right)
        sites += new_sites - old_sites
        bonds[lo + 1 : hi] = inner
        top = max([top, *inner])
    return Bound(peak, top)


def fitting_cap(spans, n: int, per_element: int, max_memory: float) -> int | None:
    """The largest bond cap whose worst case fits ``max_memory`` (``per_element``: batch times item size), or
    None where not even a cap of 1 does."""
    if worst_case(spans, n, 1).peak * per_element > max_memory:
        return None
    lo, hi = 1, max(worst_case(spans, n, None).bond, 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if worst_case(spans, n, mid).peak * per_element <= max_memory else (lo, mid - 1)
    return lo


class MemoryGuard:
    """Checks each split of one run against ``max_memory`` (see the module notes); built only where the plan's
    worst case does not fit."""

    def __init__(self, spans, n: int, cap: int | None, cutoff: float, batch: int, itemsize: int, max_memory: float):
        self.spans, self.n, self.cap, self.cutoff = spans, n, cap, cutoff
        self.per_element, self.max_memory = batch * itemsize, max_memory
        self.steps = len(spans)
        self.done = 0

    @classmethod
    def for_plan(cls, spans, n: int, cap, cutoff: float, batch: int, itemsize: int, max_memory: float | None):
        """A guard for the plan, or None where its worst case fits ``max_memory`` (or there is no limit)."""
        if max_memory is None or worst_case(spans, n, cap).peak * batch * itemsize <= max_memory:
            return None
        return cls(spans, n, cap, cutoff, batch, itemsize, max_memory)

    def check(self, sites: list, lo: int, width: int) -> None:
        """Before the split of sites ``lo .. lo + width - 1`` (site tensors ``[B, left, 2, right]``)."""
        self.done += 1
        hi = lo + width
        left, right = sites[lo].shape[1], sites[hi - 1].shape[-1]
        inner = _inner_bonds(left, right, lo, width, self.n, self.cap)
        new = [left, *inner, right]
        held = sum(a.shape[1] * a.shape[2] * a.shape[3] for a in sites)
        need = held + sum(2 * new[j] * new[j + 1] for j in range(width)) + STEP_COPIES * (left << width) * right
        if need * self.per_element > self.max_memory:
            raise ContractionTooLargeError(self._message(need, held, max(a.shape[-1] for a in sites)))

    def _message(self, need: int, held: int, reached: int) -> str:
        worst = worst_case(self.spans, self.n, self.cap)
        fits = fitting_cap(self.spans, self.n, self.per_element, self.max_memory)
        limit = "no bond cap" if self.cap is None else f"max_bond_dim={self.cap}"
        cap = (f"set max_bond_dim={fits} (its worst case fits)" if fits is not None
               else "no bond cap fits (use fewer wires or a smaller batch)")
        return (
            f"method='mps' needs about {_fmt_bytes(need * self.per_element)} at split {self.done} of {self.steps} of "
            f"this circuit on {self.n} wires (site tensors {_fmt_bytes(held * self.per_element)}, bonds reached "
            f"{reached}, and the split's workspace), above max_memory={_fmt_bytes(self.max_memory)}: refused before "
            f"allocating it. With {limit} and cutoff={self.cutoff:g}, its bonds may grow to {worst.bond} "
            f"(about {_fmt_bytes(worst.peak * self.per_element)} in the worst case). To truncate, {cap}, or raise "
            "cutoff= (e.g. 1e-8: Schmidt values below that times the largest dropped; dev.last_truncation reports "
            "what is lost); or raise the device's max_memory."
        )

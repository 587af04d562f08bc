"""A ``ManyTrees``' large steps over buffers kept from step to step (``many_arena``'s for the sequence).

A large step (``many_sequence``) reads each operand as a view, a permuted copy or a gather, multiplies them,
and its backward makes two products and hands each cotangent back through the inverse read: ~24 ops a step,
most of them views, transposes and reshapes of fresh tensors (an 8x8 lattice QAOA p=3: 277 steps, ~6,500 of a
step's ops). Here every step's result, operands, cotangents and their views are made once: a read is one
``copy_`` (a permutation), one ``index_select`` (a table), or nothing (read as it lies), a product one ``bmm``
into its result, and each cotangent one ``bmm`` into a buffer laid out as its fetch reads, given back by one
``copy_``, ``index_select`` or ``index_add_`` (or nothing). The same products as ``Sequence``: values and
gradients equal to rounding.
"""

from __future__ import annotations

import torch


def sequence_elements(sequence) -> int:
    """Elements an arena holds for ``sequence``: results and their cotangents, operands and theirs."""
    return sum(2 * st.rows * st.m * st.n + 2 * st.rows * st.k * (st.m + st.n) for st in sequence.steps)


class SequenceArena:
    """Buffers and views of one sequence on one device and dtype (see the module)."""

    def __init__(self, sequence, dtype, device):
        new = lambda *shape: torch.empty(*shape, dtype=dtype, device=device)  # noqa: E731
        steps = sequence.steps
        self.held = [new(st.rows, st.m, st.n) for st in steps]
        self.cot = [new(st.rows * st.m * st.n) for st in steps]
        self.forward, self.backward = [], []
        self.views = []  # per step: (its cotangent's flat buffer, as [rows, m, n], transposed)
        for s, st in enumerate(steps):
            gc = self.cot[s].view(st.rows, st.m, st.n)
            self.views.append((self.cot[s], gc, gc.mT))
        for s, st in enumerate(steps):
            a, read_a = self._operand(st.a, st.rows, st.k, st.m, new)
            b, read_b = self._operand(st.b, st.rows, st.k, st.n, new)
            self.forward.append((read_a, read_b, a.mT, b, self.held[s]))
            ga = new(st.rows, st.k, st.m) if st.a.grad else None  # in the fetch's order: B gc^T
            gb = new(st.rows, st.k, st.n) if st.b.grad else None
            give_a = self._give(st.a, ga) if ga is not None else None
            give_b = self._give(st.b, gb) if gb is not None else None
            self.backward.append((b, ga, give_a, a, gb, give_b))
            for give in (give_a, give_b):
                if give is not None and give[0] == "alias":  # the producer's cotangent IS this buffer
                    slot = steps[give[1]]
                    gc = give[2].view(slot.rows, slot.m, slot.n)
                    self.views[give[1]] = (give[2], gc, gc.mT)

    def _operand(self, fetch, rows: int, k: int, free: int, new) -> tuple:
        """``(buffer [rows, k, free], how to fill it)``: ``None`` where it is a view of a held result."""
        if fetch.slot < 0:
            buf = new(rows, k, free)
            return buf, ("gather", None, fetch.index, buf.view(-1))
        src = self.held[fetch.slot]
        if fetch.index is not None:
            buf = new(rows, k, free)
            return buf, ("gather", src.view(-1), fetch.index, buf.view(-1))
        if fetch.perm is None:
            return src.view(rows, k, free), None
        permuted = src.view(fetch.shape).permute(fetch.perm)
        buf = new(rows, k, free)
        return buf, ("copy", buf.view(permuted.shape), permuted)

    def _give(self, fetch, g: torch.Tensor) -> tuple:
        """How cotangent ``g`` (``[rows, k, free]``) goes back to where the fetch read."""
        if fetch.slot < 0:
            return ("add", fetch.index, g.view(-1))
        target = self.cot[fetch.slot]
        if fetch.index is not None:
            return ("gather", fetch.slot, g.view(-1), fetch.inverse, target)
        if fetch.perm is None:
            return ("alias", fetch.slot, g.view(-1))
        shape = [fetch.shape[p] for p in fetch.perm]
        return ("copy", fetch.slot, target.view(fetch.shape).permute(fetch.perm), g.view(shape), target)

    def run_forward(self, small: torch.Tensor) -> list:
        """Every step's result (the arena's own buffers)."""
        for read_a, read_b, aT, b, out in self.forward:
            for read in (read_a, read_b):
                if read is None:
                    continue
                if read[0] == "gather":
                    torch.index_select(small if read[1] is None else read[1], 0, read[2], out=read[3])
                else:
                    read[1].copy_(read[2])
            torch.bmm(aT, b, out=out)
        return self.held

    def run_backward(self, cot_held: list, cot_small: torch.Tensor) -> None:
        """``Sequence.backward`` over the arena (``cot_held``: the roots' cotangents, filled here for the rest)."""
        for s in range(len(self.backward) - 1, -1, -1):
            t = cot_held[s]
            cot_held[s] = None
            if t is None:
                continue
            mine, gc, gcT = self.views[s]
            if t is not mine:  # a root's cotangent: a fresh tensor
                gc = t.view(gc.shape)
                gcT = gc.mT
            b, ga, give_a, a, gb, give_b = self.backward[s]
            if ga is not None:
                torch.bmm(b, gcT, out=ga)
                _give(give_a, cot_held, cot_small)
            if gb is not None:
                torch.bmm(a, gc, out=gb)
                _give(give_b, cot_held, cot_small)


def _give(how: tuple, cot_held: list, cot_small: torch.Tensor) -> None:
    kind = how[0]
    if kind == "add":
        cot_small.index_add_(0, how[1], how[2])
    elif kind == "alias":
        cot_held[how[1]] = how[2]
    elif kind == "gather":
        cot_held[how[1]] = torch.index_select(how[2], 0, how[3], out=how[4])
    else:
        how[2].copy_(how[3])
        cot_held[how[1]] = how[4]


__all__ = ["SequenceArena", "sequence_elements"]

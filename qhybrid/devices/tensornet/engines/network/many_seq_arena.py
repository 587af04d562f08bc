"""A ``ManyTrees``' large steps over buffers kept from step to step (``many_arena``'s for the sequence).

A large step (``many_sequence``) reads each operand as a view, a permuted copy or a gather, multiplies them,
and its backward makes two products and hands each cotangent back through the inverse read: ~24 ops a step,
most of them views, transposes and reshapes of fresh tensors (an 8x8 lattice QAOA p=3: 277 steps, ~6,500 of a
step's ops). Here every step's result, operands, cotangents and their views are made once: a read is one
``copy_`` (a permutation), one ``index_select`` (a table), or nothing (read as it lies), a product one ``bmm``
into its result, and each cotangent one ``bmm`` into a buffer laid out as its fetch reads, given back by one
``copy_`` or ``index_select`` (or nothing). The same products as ``Sequence``: values and gradients equal to
rounding.

Operands read from the small buffer (a gate, a wave's result: 292 of the lattice's 554 reads) lie end to end
in one buffer filled by ONE gather before the first step, and their cotangents end to end in another, added
back by ONE ``index_add_`` after the last: two ops a step where there were two a read. The networks' roots
that are held results lie end to end too (``roots``: the ``RootLayout``), read out and given their cotangents
by one op each (``joined``).
"""

from __future__ import annotations

import torch


def sequence_elements(sequence) -> int:
    """Elements an arena holds for ``sequence``: results and their cotangents, operands and theirs."""
    return sum(2 * st.rows * st.m * st.n + 2 * st.rows * st.k * (st.m + st.n) for st in sequence.steps)


class SequenceArena:
    """Buffers and views of one sequence on one device and dtype (see the module)."""

    def __init__(self, sequence, dtype, device, roots=None):
        new = lambda *shape: torch.empty(*shape, dtype=dtype, device=device)  # noqa: E731
        steps = sequence.steps
        reads = [(s, f, st.rows * st.k * (st.m if f is st.a else st.n)) for s, st in enumerate(steps) for f in (st.a, st.b) if f.slot < 0]
        self.small_index, small_ops = _joined([f.index for _, f, _ in reads], new, device)
        self.cot_index, small_cots = _joined([f.index for _, f, _ in reads if f.grad], new, device)
        self._small_ops, self._small_cots = small_ops, small_cots
        ops = dict(zip(((s, id(f)) for s, f, _ in reads), small_ops.split([n for _, _, n in reads])))
        cots = dict(zip(((s, id(f)) for s, f, _ in reads if f.grad), small_cots.split([n for _, f, n in reads if f.grad])))
        self._given_small = {s for s, f, _ in reads if f.grad}  # steps whose cotangent reaches the small buffer
        self.joined = roots is not None and bool(roots.held) and all(p == tuple(range(len(p))) for _, _, p in roots.held)
        sizes = [st.rows * st.m * st.n for st in steps]
        self.held, self.cot = [None] * len(steps), [None] * len(steps)
        self.roots, self.root_out, self.root_cot = roots, None, None
        if self.joined:  # the roots' results (and cotangents) are slices of one buffer, in the roots' order
            slots = [slot for slot, _, _ in roots.held]
            self.root_out, self.root_cot = new(sum(sizes[s] for s in slots)), new(sum(sizes[s] for s in slots))
            for s, out, cot in zip(slots, self.root_out.split([sizes[s] for s in slots]), self.root_cot.split([sizes[s] for s in slots])):
                self.held[s], self.cot[s] = out, cot
            self._root_slots = slots
        for s, st in enumerate(steps):
            self.held[s] = new(sizes[s]) if self.held[s] is None else self.held[s]
            self.cot[s] = new(sizes[s]) if self.cot[s] is None else self.cot[s]
        self.held = [h.view(st.rows, st.m, st.n) for h, st in zip(self.held, steps)]
        self.forward, self.backward = [], []
        self.views = []  # per step: (its cotangent's flat buffer, as [rows, m, n], transposed)
        for s, st in enumerate(steps):
            gc = self.cot[s].view(st.rows, st.m, st.n)
            self.views.append((self.cot[s], gc, gc.mT))
        for s, st in enumerate(steps):
            a, read_a = self._operand(st.a, st.rows, st.k, st.m, new, ops.get((s, id(st.a))))
            b, read_b = self._operand(st.b, st.rows, st.k, st.n, new, ops.get((s, id(st.b))))
            self.forward.append((read_a, read_b, a.mT, b, self.held[s]))
            ga, give_a = self._cotangent(st.a, st.rows, st.k, st.m, new, cots.get((s, id(st.a))))
            gb, give_b = self._cotangent(st.b, st.rows, st.k, st.n, new, cots.get((s, id(st.b))))
            self.backward.append((b, ga, give_a, a, gb, give_b))
            for give in (give_a, give_b):
                if give is not None and give[0] == "alias":  # the producer's cotangent IS this buffer
                    slot = steps[give[1]]
                    gc = give[2].view(slot.rows, slot.m, slot.n)
                    self.views[give[1]] = (give[2], gc, gc.mT)
        self._zero = [(s, [cots[(s, id(f))] for f in (steps[s].a, steps[s].b) if (s, id(f)) in cots]) for s in self._given_small]

    def _operand(self, fetch, rows: int, k: int, free: int, new, joined) -> tuple:
        """``(buffer [rows, k, free], how to fill it)``: ``None`` where it is a view of a held result or of
        the joined gather of the small buffer's operands (``joined``)."""
        if fetch.slot < 0:
            return joined.view(rows, k, free), None
        src = self.held[fetch.slot]
        if fetch.index is not None:
            buf = new(rows, k, free)
            return buf, ("gather", src.view(-1), fetch.index, buf.view(-1))
        if fetch.perm is None:
            return src.view(rows, k, free), None
        permuted = src.view(fetch.shape).permute(fetch.perm)
        buf = new(rows, k, free)
        return buf, ("copy", buf.view(permuted.shape), permuted)

    def _cotangent(self, fetch, rows: int, k: int, free: int, new, joined) -> tuple:
        """``(buffer [rows, k, free] or None, how it goes back)`` for one operand's cotangent."""
        if not fetch.grad:
            return None, None
        if fetch.slot < 0:  # a view of the joined cotangents, added back after the last step
            return joined.view(rows, k, free), None
        g = new(rows, k, free)
        target = self.cot[fetch.slot]
        if fetch.index is not None:
            return g, ("gather", fetch.slot, g.view(-1), fetch.inverse, target)
        if fetch.perm is None:
            return g, ("alias", fetch.slot, g.view(-1))
        shape = [fetch.shape[p] for p in fetch.perm]
        return g, ("copy", fetch.slot, target.view(fetch.shape).permute(fetch.perm), g.view(shape), target)

    def run_forward(self, small: torch.Tensor) -> list:
        """Every step's result (the arena's own buffers)."""
        if self.small_index is not None:
            torch.index_select(small, 0, self.small_index, out=self._small_ops)
        for read_a, read_b, aT, b, out in self.forward:
            for read in (read_a, read_b):
                if read is None:
                    continue
                if read[0] == "gather":
                    torch.index_select(read[1], 0, read[2], out=read[3])
                else:
                    read[1].copy_(read[2])
            torch.bmm(aT, b, out=out)
        return self.held

    def outputs(self, small: torch.Tensor) -> torch.Tensor:
        """Every network's result (``joined`` roots: their slices of one buffer, read at once)."""
        r = self.roots
        out = self.root_out if r.small is None else torch.cat([small.index_select(0, r.small), self.root_out])
        return out if r.order is None else out.index_select(0, r.order)

    def give_roots(self, grad: torch.Tensor, cot_small: torch.Tensor, cot_held: list) -> None:
        """``outputs``' cotangent ``grad`` into ``cot_small`` and the joined roots' cotangent buffer."""
        r = self.roots
        if r.inverse is not None:
            grad = grad.index_select(0, r.inverse)
        n = 0 if r.small is None else len(r.small)
        if n:
            cot_small.index_add_(0, r.small, grad[:n])
        self.root_cot.copy_(grad[n:] if n else grad)
        for s in self._root_slots:
            cot_held[s] = self.cot[s]

    def run_backward(self, cot_held: list, cot_small: torch.Tensor) -> None:
        """``Sequence.backward`` over the arena (``cot_held``: the roots' cotangents, filled here for the rest)."""
        for s in range(len(self.backward) - 1, -1, -1):
            t = cot_held[s]
            cot_held[s] = None
            if t is None:
                if s in self._given_small:  # (no cotangent reached it: nothing of it may be added back)
                    for view in dict(self._zero)[s]:
                        view.zero_()
                continue
            mine, gc, gcT = self.views[s]
            if t is not mine:  # a root's cotangent: a fresh tensor
                gc = t.view(gc.shape)
                gcT = gc.mT
            b, ga, give_a, a, gb, give_b = self.backward[s]
            if ga is not None:
                torch.bmm(b, gcT, out=ga)
                _give(give_a, cot_held)
            if gb is not None:
                torch.bmm(a, gc, out=gb)
                _give(give_b, cot_held)
        if self.cot_index is not None:
            cot_small.index_add_(0, self.cot_index, self._small_cots)


def _joined(indices: list, new, device) -> tuple:
    """``(the tables laid end to end, a buffer of as many elements)``; ``(None, empty)`` where none."""
    if not indices:
        return None, new(0)
    index = torch.cat([i.to(device) for i in indices])
    return index, new(len(index))


def _give(how: tuple | None, cot_held: list) -> None:
    if how is None:
        return
    kind = how[0]
    if kind == "alias":
        cot_held[how[1]] = how[2]
    elif kind == "gather":
        cot_held[how[1]] = torch.index_select(how[2], 0, how[3], out=how[4])
    else:
        how[2].copy_(how[3])
        cot_held[how[1]] = how[4]


__all__ = ["SequenceArena", "sequence_elements"]

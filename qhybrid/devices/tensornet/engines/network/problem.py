"""One network to plan (:class:`Problem`), a path found for it (:class:`Found`), and what a linear path
costs (:func:`_evaluate`): the vocabulary the path search and slicing share.

>>> p = Problem.of([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
>>> _evaluate(p, [(0, 1)]).largest
8
"""

from __future__ import annotations

from dataclasses import dataclass

WRITE_WEIGHT = 64
"""Flops one written element is worth when trees are ranked (``Found.cost``): on a CPU a large intermediate
costs its page faults and torch's permuted copies (in the forward and again in the backward) more than its
arithmetic. Measured on 8x8 lattice QAOA p=4 cone classes (2026-11-27, one thread, value + gradient): a class
whose flops-ranked tree held 2^29.8 flops and wrote 2^26.2 elements took 11.8 s, the same tree reconfigured
for flops + 64 writes (2^30.2 flops, 2^24.1 written) 2.8 s; two others 8.3 -> 3.8 s and 12.8 -> 6.9 s; a
class dominated by its large products 14.9 -> 14.6 s. Weights 16 and 4 gained about half as much, 128 and 256
about as much. cotengra's ``combo`` objective with this factor (``COMBO``) is what the searches minimise."""

COMBO = f"combo-{WRITE_WEIGHT}"
"""cotengra's objective for the same cost (flops + ``WRITE_WEIGHT`` x elements written)."""

FLOP_RATE = 1e9
"""Flops per second assumed when judging whether a path search pays (a modest CPU; a GPU is faster, so a search
judged worth it there is, if anything, over-generous): read by ``pathfind`` and ``hyper``."""

MAX_STEP_INDICES = 52
"""Distinct indices one pairwise step may touch (``torch.einsum`` has 52 letters)."""


@dataclass(frozen=True)
class Problem:
    """One network to plan: each tensor's indices, the output's, index extents, wire positions, memo key."""

    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    sizes: dict
    positions: tuple[int, ...] | None = None
    key: tuple | None = None  # topology without the varying (batch) extent; None: not memoised

    @classmethod
    def of(cls, inputs, output, sizes: dict[int, int], positions=None, vary: int | None = None) -> "Problem":
        """From index tuples; ``vary`` names an index whose extent is left out of the memo key."""
        inputs = tuple(tuple(ix) for ix in inputs)
        fixed = tuple(sorted((i, s) for i, s in sizes.items() if i != vary))
        key = (inputs, tuple(output), fixed)
        return cls(inputs, tuple(output), dict(sizes), None if positions is None else tuple(positions), key)

    @property
    def n(self) -> int:
        return len(self.inputs)

    def sets(self) -> tuple[list[frozenset], frozenset]:
        """Inputs and output as opt_einsum's path optimisers take them."""
        return [frozenset(ix) for ix in self.inputs], frozenset(self.output)

    def symbolic(self) -> tuple[list[tuple[str, ...]], tuple[str, ...], dict[str, int]]:
        """Inputs, output and extents with every index a one-character symbol (``opt_einsum.get_symbol``),
        as cotengra takes them: its Rust backend (``cotengrust``, used whenever installed) refuses integer
        indices, and so do cotengra's tree refinements that call it.

        >>> Problem.of([(0, 1)], (1,), {0: 2, 1: 3}).symbolic()
        ([('a', 'b')], ('b',), {'a': 2, 'b': 3})
        """
        from opt_einsum import get_symbol

        inputs = [tuple(get_symbol(i) for i in ix) for ix in self.inputs]
        sizes = {get_symbol(i): int(s) for i, s in self.sizes.items()}
        return inputs, tuple(get_symbol(i) for i in self.output), sizes


@dataclass(frozen=True)
class Found:
    path: tuple[tuple[int, ...], ...]
    flops: int
    largest: int
    searched: bool = False  # settled: planned within a budget (or taken from such a plan, via memo or disk)
    widest: int = 0  # most distinct indices one step touches
    sliced: tuple = ()  # indices summed outside the path, one slice per value (``flops`` counts every slice)
    write: int = 0  # elements the steps write (every slice counted)

    @property
    def cost(self) -> int:
        """What paths are ranked by: flops plus ``WRITE_WEIGHT`` per written element."""
        return self.flops + WRITE_WEIGHT * self.write

    def fits(self, max_elements: float) -> bool:
        return self.largest <= max_elements and self.widest <= MAX_STEP_INDICES


def _evaluate(problem: Problem, path) -> Found:
    """Flops (opt_einsum's count: every index's extent, doubled where one is summed), elements written,
    largest intermediate and widest step of a linear path; computed here because opt_einsum's
    ``contract_path`` spends far longer describing a large network's steps than finding its greedy path. Index sets are int bitsets
    (a 400-tensor cone's path in ~2 ms, 5-8x faster than with frozensets).

    A pairwise step touches, index by index, only the indices both operands hold: an index one operand
    holds keeps its count of holders (it moves to the result) and is summed only where that operand was
    its last holder, which the bitset of indices with one holder (``solo``) tells at once. Counting every
    index of both operands down and the result's up (as a step of three or more tensors still does)
    made a deep cone's greedy path, whose intermediates hold 20-30 indices, cost ~10 ms to evaluate
    (Q100 p=4's pricing: 298 evaluations, 3 s of 4.9)."""
    number: dict = {}
    working = []
    for ix in problem.inputs:
        mask = 0
        for i in ix:
            bit = number.get(i)
            if bit is None:
                bit = number[i] = len(number)
            mask |= 1 << bit
        working.append(mask)
    output = 0
    for i in problem.output:
        if i in number:
            output |= 1 << number[i]
    numel = _numel_of([problem.sizes[i] for i in number])
    count = [0] * len(number)
    for mask in working:
        while mask:
            low = mask & -mask
            count[low.bit_length() - 1] += 1
            mask ^= low
    solo = 0  # indices outside the output with exactly one holder
    for bit, c in enumerate(count):
        if c == 1:
            solo |= 1 << bit
    solo &= ~output
    flops = largest = widest = write = 0
    for step in path:
        if len(step) == 2:
            p, q = step
            a, b = (working.pop(p), working.pop(q)) if p > q else (working.pop(q), working.pop(p))
            every, single = a | b, a ^ b
            kept = single & ~solo  # held by one operand: summed only where that operand held it alone
            solo &= ~single
            shared = a & b  # (held by two or more: never one holder after the step)
            while shared:
                low = shared & -shared
                bit = low.bit_length() - 1
                left = count[bit] - 2  # other holders
                if left > 0 or low & output:
                    kept |= low
                    count[bit] = left + 1
                else:
                    count[bit] = 0
                shared ^= low
        else:
            taken = [working.pop(p) for p in sorted(step, reverse=True)]
            every = 0
            for mask in taken:
                every |= mask
                while mask:
                    low = mask & -mask
                    count[low.bit_length() - 1] -= 1
                    mask ^= low
            kept, rest = every & output, every & ~output
            while rest:
                low = rest & -rest
                if count[low.bit_length() - 1] > 0:
                    kept |= low
                rest ^= low
            rest = every
            while rest:
                low = rest & -rest
                bit = low.bit_length() - 1
                if low & kept:
                    count[bit] += 1
                if count[bit] == 1 and not low & output:
                    solo |= low
                else:
                    solo &= ~low
                rest ^= low
        working.append(kept)
        flops += numel(every) * (2 if kept != every else 1)
        size = numel(kept)
        write += size
        largest = max(largest, size)
        widest = max(widest, every.bit_count())
    return Found(tuple(tuple(p) for p in path), flops, largest, widest=widest, write=write)


def _numel_of(extents: list):
    """``numel(mask)``: the elements of a tensor holding the indices in ``mask`` (bit ``k``: extent
    ``extents[k]``), one ``bit_count`` per distinct extent."""
    groups: dict[int, int] = {}
    for bit, e in enumerate(extents):
        groups[e] = groups.get(e, 0) | (1 << bit)
    if len(groups) == 1:
        (e,) = groups
        return lambda mask: e ** mask.bit_count()
    pairs = [(e, m) for e, m in groups.items() if e != 1]

    def numel(mask: int) -> int:
        n = 1
        for e, m in pairs:
            n *= e ** (mask & m).bit_count()
        return n

    return numel


def _numel(ix, sizes) -> int:
    n = 1
    for i in ix:
        n *= sizes[i]
    return n

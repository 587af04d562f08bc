"""One network to plan (:class:`Problem`), a path found for it (:class:`Found`), and what a linear path
costs (:func:`_evaluate`): the vocabulary the path search and slicing share.

>>> p = Problem.of([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
>>> _evaluate(p, [(0, 1)]).largest
8
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def fits(self, max_elements: float) -> bool:
        return self.largest <= max_elements and self.widest <= MAX_STEP_INDICES


def _evaluate(problem: Problem, path) -> Found:
    """Flops (opt_einsum's count: every index's extent, doubled where one is summed), largest intermediate
    and widest step of a linear path; computed here because opt_einsum's ``contract_path`` spends far
    longer describing a large network's steps than finding its greedy path. Index sets are int bitsets
    (a 400-tensor cone's path in ~2 ms, 5-8x faster than with frozensets)."""
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
    extents = [problem.sizes[i] for i in number]
    same = extents[0] if extents and all(e == extents[0] for e in extents) else None

    def numel(mask: int) -> int:
        if same is not None:
            return same ** mask.bit_count()
        n = 1
        while mask:
            low = mask & -mask
            n *= extents[low.bit_length() - 1]
            mask ^= low
        return n

    count = [0] * len(number)
    for mask in working:
        while mask:
            low = mask & -mask
            count[low.bit_length() - 1] += 1
            mask ^= low
    flops = largest = widest = 0
    for step in path:
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
        rest = kept
        while rest:
            low = rest & -rest
            count[low.bit_length() - 1] += 1
            rest ^= low
        working.append(kept)
        flops += numel(every) * (2 if kept != every else 1)
        largest = max(largest, numel(kept))
        widest = max(widest, every.bit_count())
    return Found(tuple(tuple(p) for p in path), flops, largest, widest=widest)


def _numel(ix, sizes) -> int:
    n = 1
    for i in ix:
        n *= sizes[i]
    return n

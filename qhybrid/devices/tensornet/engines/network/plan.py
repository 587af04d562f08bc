"""Contraction plans: a path found once per network shape, replayed as a list of pairwise einsums.

Paths come from ``pathfind`` (cotengra's greedy path at once, a hyper-optimised search within the
device's ``plan_time`` where it pays, paths kept on disk by structure) on the real index sizes, so a
batch index (a hyperedge shared by every data-dependent tensor) steers the planner towards contracting
the data-independent part once. The plan records the largest intermediate so that a contraction that
would not fit in memory is refused before anything is allocated (a step too wide for einsum is refused
when contracted, after the memory guard has had its say).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable, Sequence

import torch
from torch import _VF  # torch.einsum's C++ entry, which takes a contraction path

from .....errors import ContractionTooLargeError
from .pathfind import DEFAULT_PLAN_TIME, Found, PathSettings, Problem, find_paths
from .tree import _EINSUM_CHARS, CHUNK_LETTERS, _binary_tree, _chunks, _Step  # noqa: F401 (re-exported)


class ContractionPlan:
    """A contraction path for one network shape, replayable on any operands of that shape.

    >>> plan = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
    >>> plan.contract([torch.ones(2, 3), torch.ones(3, 4)]).shape
    torch.Size([2, 4])
    """

    def __init__(
        self,
        inputs: Sequence[tuple[int, ...]],
        output: tuple[int, ...],
        sizes: dict[int, int],
        optimizer: "str | PathSettings" = "auto",
        positions: Sequence[int] | None = None,
        *,
        plan_time: float = DEFAULT_PLAN_TIME,
        found: Found | None = None,
    ):
        self.inputs = [tuple(ix) for ix in inputs]
        self.output = tuple(output)
        self._sizes = dict(sizes)
        if found is None:
            found = find_paths([Problem.of(self.inputs, self.output, sizes, positions)], optimizer, plan_time)[0]
        self.flops = found.flops
        """Total flops of the chosen tree (opt_einsum's count; every slice included): the plan's cost
        estimate, comparable across engines (a state vector's gate count times 2**wires, say)."""
        self.largest_intermediate = max(
            found.largest, _numel(self.output, sizes), *(_numel(ix, sizes) for ix in self.inputs)
        )
        """Elements of the largest tensor the contraction holds at once (per slice where sliced), inputs and
        output included: its peak size, checked against ``max_memory`` before anything is allocated."""
        self.path = found.path
        self.sliced = tuple(found.sliced)
        """Indices summed outside the steps, one contraction of the rest per value (``slicing.sliced_path``):
        the memory target holds for each slice."""
        self.slices = 1
        self._inner = None
        if self.sliced:
            self.slices = math.prod(sizes[i] for i in self.sliced)
            rest = [tuple(i for i in ix if i not in self.sliced) for ix in self.inputs]
            self._inner = ContractionPlan(rest, self.output, sizes, found=replace(found, sliced=()))
            self._inner.flops = found.flops // self.slices
        self._steps: list[_Step] | None = None  # compiled at first use (``steps``)
        self._widest = found.widest
        self._tree = None
        self._tape = None
        self._held = None

    @property
    def steps(self) -> list[_Step]:
        """The einsum calls (``_chunks``), compiled at first use: a plan contracted only through its binary
        tree (``ManyTrees``, ``tree_grad``) never needs them (Q100 p=4's 149 plans: ~0.7 s of a first step
        and of a second process's)."""
        if self._steps is None:
            self._steps = self._compile(self.path) if not self.sliced else self._inner.steps
        return self._steps

    def _compile(self, path) -> list[_Step]:
        """The path as a binary tree, cut into einsum calls of at most ``CHUNK_LETTERS`` indices each."""
        self._tree = _binary_tree(self.inputs, self.output, path)
        return _chunks(len(self.inputs), *self._tree)

    def binary_tree(self) -> tuple[dict, dict]:
        """The path as a binary tree: ``nodes[id] = (left, right)`` (right -1 for a one-tensor step), ids of
        inputs first, and every tensor's indices (built once; read, never changed, by its users)."""
        if self._tree is None:
            self._tree = _binary_tree(self.inputs, self.output, self.path)
        return self._tree

    @property
    def held_elements(self) -> int:
        """Elements of every intermediate (the result included) the tree's backward keeps from its forward
        (``tree_grad``); 0 for a sliced plan, whose slices are recomputed one at a time in the backward."""
        if self._held is None:
            if self.sliced:
                self._held = 0
            else:
                nodes, indices = self.binary_tree()
                self._held = sum(_numel(indices[k], self._sizes) for k in nodes)
        return self._held

    def tree_tape(self):
        """The pairwise steps with their cotangent equations (``tree_grad``), built once per plan."""
        if self._tape is None:
            from .tree_grad import TreeTape

            self._tape = TreeTape(self)
        return self._tape

    def contract(self, operands: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.sliced:
            return self.contract_slices(operands, self._inner.contract)
        working = list(operands)
        if self.too_wide:
            raise ContractionTooLargeError(
                "A contraction step touches more than 52 indices; the network is too wide to contract on this "
                "backend. Measure local observables (their light cones are smaller), use fewer wires, or simulate it "
                "approximately as a matrix product state: qhybrid.device('tensornet', ..., method=\"mps\", max_bond_dim=64)."
            )
        for step in self.steps:
            taken = [working.pop(p) for p in step.operands]
            if step.order is not None:
                taken = [taken[k] for k in step.order]
            if step.pairs:  # torch.einsum's own C++ call, along our path (torch would plan it again)
                working.append(_VF.einsum(step.equation, taken, path=step.pairs))
            else:
                working.append(_VF.einsum(step.equation, taken))
        return working[0]

    def contract_slices(
        self, operands: Sequence[torch.Tensor], run: Callable, share: range | None = None
    ) -> torch.Tensor | None:
        """The sum over every value of the sliced indices of ``run`` (a contraction of the plan without them)
        on the operands read at that value (an axis of extent 1, broadcast, is read at 0); ``share``: only
        the slices of these numbers (None where it holds none)."""
        axes = [[(p, i) for p, i in enumerate(ix) if i in self.sliced] for ix in self.inputs]
        total = None
        every = itertools.product(*(range(self._sizes[i]) for i in self.sliced))
        for values in every if share is None else itertools.islice(every, share.start, share.stop):
            at = dict(zip(self.sliced, values))
            taken = []
            for o, ax in zip(operands, axes):
                if ax:
                    index = [slice(None)] * o.dim()
                    for p, i in ax:
                        index[p] = at[i] if o.shape[p] != 1 else 0
                    o = o[tuple(index)]
                taken.append(o)
            part = run(taken)
            total = part if total is None else total + part
        return total

    @property
    def too_wide(self) -> bool:
        """Whether some step names more indices than einsum has letters (refused when contracted). Known
        without compiling the steps where the path's widest pairwise step (``Found.widest``) has few
        enough: a call of more than ``CHUNK_LETTERS`` letters is one pairwise step."""
        if self._steps is None and not self.sliced and 0 < self._widest <= len(_EINSUM_CHARS):
            return False
        return any(not step.equation for step in self.steps)

    def check_memory(self, itemsize: int, max_memory: float, what: str) -> None:
        """Refuse, before allocating, a contraction whose largest intermediate exceeds ``max_memory``."""
        need = self.largest_intermediate * itemsize
        if need > max_memory:
            raise ContractionTooLargeError(
                f"Contracting {what} needs an intermediate of about {_fmt_bytes(need)} "
                f"({self.largest_intermediate} elements x {itemsize} bytes), above max_memory="
                f"{_fmt_bytes(max_memory)}. Use fewer wires or a smaller batch, measure local observables "
                "(their light cones are smaller), raise the device's max_memory, or simulate it approximately as a "
                "matrix product state: qhybrid.device('tensornet', ..., method=\"mps\", max_bond_dim=64)."
            )


def plan_networks(
    networks: Sequence,
    optimizer: "str | PathSettings" = "auto",
    plan_time: float = DEFAULT_PLAN_TIME,
    vary: int | None = None,
) -> list[ContractionPlan]:
    """Plans for several networks (objects with ``inputs``, ``output``, ``sizes``, ``positions``) that share
    one planning budget of ``plan_time`` seconds; ``vary`` names an index (the batch index) whose extent
    may change without changing the best path, so searched paths are reused across its sizes.
    ``optimizer`` is a method name or :class:`~.pathfind.PathSettings` (memory limit, disk store).
    """
    problems = [Problem.of(n.inputs, n.output, n.sizes, n.positions, vary) for n in networks]
    found = find_paths(problems, optimizer, plan_time)
    return [ContractionPlan(n.inputs, n.output, n.sizes, found=f) for n, f in zip(networks, found)]


STEP_FLOPS = 2e4
"""What one pairwise step costs beyond its flops (a kernel launch, about 20 us at 1 Gflop/s), in flops."""

SPLIT_MIN_COST = 1e8
"""A whole network that fits in memory and costs less than this (flops plus steps; 0.1 s at 1 Gflop/s) is
kept whole without building its parts: splitting it could save little."""


def cheaper_apart(whole, parts: Callable[[], Sequence], optimizer: "str | PathSettings" = "auto") -> bool:
    """Whether contracting the networks ``parts()`` one by one costs less than the one network ``whole`` they
    sum to (greedy paths, flops plus a per-step cost; a whole that would not fit in memory always loses).
    ``parts`` builds them, called only when the whole is costly.
    A Pauli sentence's united light cone can be far wider than each word's: 150 two-qubit words of a
    100-node QAOA p=1 span the whole graph, while each word's cone has at most 8 qubits.

    >>> class N: inputs, output, sizes, positions = [(0, 1), (1, 2)], (), {0: 2, 1: 2, 2: 2}, None
    >>> cheaper_apart(N, lambda: [N, N])
    False
    """
    settings = PathSettings.of(optimizer)
    # no search (plan_time 0), but the store: paths it has are taken, greedy paths found are kept for the plan
    (one,) = find_paths([Problem.of(whole.inputs, whole.output, whole.sizes, whole.positions)], settings, 0.0)
    fits = one.fits(settings.max_elements)
    if fits and _cost(one) <= SPLIT_MIN_COST:
        return False
    parts = parts()
    if fits and _cost(one) <= STEP_FLOPS * sum(len(n.inputs) - 1 for n in parts):
        return False  # the parts' steps alone would cost more: no need to plan them
    found = find_paths([Problem.of(n.inputs, n.output, n.sizes, n.positions) for n in parts], settings, 0.0)
    if not fits:
        return all(f.fits(settings.max_elements) for f in found)
    return sum(_cost(f) for f in found) < _cost(one)


def _cost(found: Found) -> float:
    return found.flops + STEP_FLOPS * len(found.path)


def _numel(ix, sizes) -> int:
    n = 1
    for i in ix:
        n *= sizes[i]
    return n


def _fmt_bytes(n: float) -> str:
    if n >= 1 << 60:
        return f"2^{math.log2(n):.1f} bytes"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"

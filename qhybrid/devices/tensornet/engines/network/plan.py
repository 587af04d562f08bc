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
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch
from torch import _VF  # torch.einsum's C++ entry, which takes a contraction path

from .....errors import ContractionTooLargeError
from .pathfind import DEFAULT_PLAN_TIME, Found, PathSettings, Problem, find_paths

from string import ascii_letters as _EINSUM_CHARS  # einsum's index letters
CHUNK_LETTERS = 8
"""A subtree of the contraction tree runs as one ``torch.einsum`` call (its pairwise steps in C++) while its
tensors name at most this many indices: C++ einsum aligns every operand to all of a call's indices, so
wide calls cost more than they save (a Q100 p=3 light cone: 6-10 letters 1.5x faster than pairwise, 52
letters 4x slower)."""


@dataclass(frozen=True)
class _Step:
    """One ``torch.einsum`` call: a subtree of the contraction tree whose tensors name at most 52 indices,
    run by torch's C++ einsum along the subtree's own pairwise order (``pairs``, a flat linear path)."""

    operands: tuple[int, ...]  # positions in the working list, popped in descending order
    equation: str  # "" for a step too wide for einsum (refused when contracted)
    order: tuple[int, ...] | None = None  # the popped tensors in the equation's order (None: as popped)
    pairs: tuple[int, ...] = ()  # the subtree's pairwise order over its operands (empty: two operands)


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


def _binary_tree(inputs, output, path) -> tuple[dict, dict]:
    """A linear path (steps of two or more working-list positions; a longer step contracts left to right in
    its order) as a binary tree: ``nodes[id] = (left, right)`` for ids from ``len(inputs)`` on, and every
    node's indices (a result keeps those the output or a tensor not yet contracted holds)."""
    indices = {k: tuple(ix) for k, ix in enumerate(inputs)}
    holders: dict[int, int] = dict.fromkeys(output, 1)
    for ix in inputs:
        for i in set(ix):
            holders[i] = holders.get(i, 0) + 1
    working = list(range(len(inputs)))
    nodes: dict[int, tuple[int, int]] = {}
    last = len(path) - 1
    for n_step, step in enumerate(path):
        if len(step) == 2 and n_step != last:
            done = _pair_step(step, working, indices, holders)
            if done is not None:
                nodes[done[0]] = done[1]
                continue
        ids = [working[p] for p in step]
        for p in sorted(step, reverse=True):
            working.pop(p)
        for t in ids:
            for i in set(indices[t]):
                holders[i] -= 1
        acc = ids[0]
        for k, t in enumerate(ids[1:], 2):
            later = {i for u in ids[k:] for i in indices[u]}
            node = len(indices)
            if n_step == last and k == len(ids):
                result = tuple(output)
            else:
                every = dict.fromkeys((*indices[acc], *indices[t]))
                result = tuple(i for i in every if holders[i] > 0 or i in later)
            nodes[node] = (acc, t)
            indices[node] = result
            acc = node
        if len(ids) == 1:  # a one-tensor network: its traces and the output's order
            node = len(indices)
            nodes[node] = (acc, -1)
            indices[node] = tuple(output) if n_step == last else indices[acc]
            acc = node
        for i in set(indices[acc]):
            holders[i] += 1
        working.append(acc)
    return nodes, indices


def _pair_step(step, working: list, indices: dict, holders: dict) -> tuple | None:
    """``_binary_tree``'s pairwise step (not the last), index by index in one pass: an index one operand
    holds stays where another tensor or the output holds it too (its holders unchanged), one both hold
    where a third does (one holder less). Returns (the new node's id, its operands' ids), its indices
    stored; None where an operand repeats an index (the general step handles it). 2x faster than counting
    every index down and the result's up."""
    p, q = step
    ta, tb = working[p], working[q]
    a, b = indices[ta], indices[tb]
    sa, sb = set(a), set(b)
    if len(sa) != len(a) or len(sb) != len(b):
        return None
    for r in sorted(step, reverse=True):
        working.pop(r)
    result = []
    for i in a:
        h = holders[i]
        if i in sb:
            if h > 2:
                result.append(i)
                holders[i] = h - 1
            else:
                holders[i] = 0
        elif h > 1:
            result.append(i)
        else:
            holders[i] = 0
    for i in b:
        if i not in sa:
            if holders[i] > 1:
                result.append(i)
            else:
                holders[i] = 0
    node = len(indices)
    indices[node] = tuple(result)
    working.append(node)
    return node, (ta, tb)


def _chunks(n_inputs: int, nodes: dict, indices: dict) -> list[_Step]:
    """Einsum calls covering the tree bottom-up: a subtree becomes one call while its tensors name at most
    52 indices (one Python call and C++ steps where there were as many Python steps as tensors)."""
    if not nodes:
        return []
    root = max(nodes)
    leaves: dict[int, list[int]] = {}  # per node: the tensors its call would take (inputs or earlier calls)
    letters: dict[int, set] = {}
    cut: list[int] = []  # nodes that become calls, children before parents

    def leaf(t: int) -> tuple[list[int], set]:
        if t in nodes and t not in cut:
            cut.append(t)  # the child's subtree becomes a call of its own; its result a tensor
        return [t], set(indices[t])

    for node in sorted(nodes):  # ids grow bottom-up: children are numbered before their parents
        left, right = nodes[node]
        if right == -1:
            leaves[node], letters[node] = leaf(left) if left in nodes else ([left], set(indices[left]))
            continue
        parts = []
        for child in (left, right):
            if child in nodes and nodes[child][1] == -1:
                parts.append(leaf(child))  # a one-tensor step (a trace) is a call of its own
            elif child in nodes:
                parts.append((leaves[child], letters[child]))
            else:
                parts.append(([child], set(indices[child])))
        union = parts[0][1] | parts[1][1] | set(indices[node])
        if len(union) <= CHUNK_LETTERS:
            leaves[node], letters[node] = parts[0][0] + parts[1][0], union
        else:  # too many letters: the children are contracted first, each as a call of its own
            (l_leaves, l_letters), (r_leaves, r_letters) = (
                leaf(child) if child in nodes else ([child], set(indices[child])) for child in (left, right)
            )
            leaves[node], letters[node] = l_leaves + r_leaves, l_letters | r_letters | set(indices[node])
    cut.append(root)
    working = list(range(n_inputs))
    steps = []
    for node in cut:
        taken_ids = leaves[node]
        positions = [working.index(t) for t in taken_ids]
        popped = sorted(positions, reverse=True)
        order = tuple(popped.index(p) for p in positions)
        for p in popped:
            working.pop(p)
        working.append(node)
        pairs = _inner_path(node, taken_ids, nodes) if len(taken_ids) > 2 else ()
        equation = _equation([indices[t] for t in taken_ids], indices[node])
        steps.append(_Step(tuple(popped), equation, order, pairs))
    return steps


def _inner_path(node: int, taken: list[int], nodes: dict) -> tuple[int, ...]:
    """The subtree under ``node`` over its call's tensors ``taken``, as a flat linear path."""
    local = list(taken)
    stop = set(taken)
    order: list[int] = []

    def walk(t):
        if t in stop:
            return
        left, right = nodes[t]
        walk(left)
        walk(right)
        order.append(t)

    walk(node)
    flat: list[int] = []
    for t in order:
        left, right = nodes[t]
        i, j = local.index(left), local.index(right)
        flat += [i, j]
        for p in sorted((i, j), reverse=True):
            local.pop(p)
        local.append(t)
    return tuple(flat)


def _equation(taken, result) -> str:
    """The einsum equation of one pairwise step, or "" when it needs more than 52 letters."""
    local: dict[int, str] = {}
    for ix in (*taken, result):
        for i in ix:
            if i not in local:
                if len(local) == len(_EINSUM_CHARS):
                    return ""
                local[i] = _EINSUM_CHARS[len(local)]
    equation = ",".join("".join(local[i] for i in ix) for ix in taken)
    return equation + "->" + "".join(local[i] for i in result)


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

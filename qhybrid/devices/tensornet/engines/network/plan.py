"""Contraction plans: a path found once per network shape, replayed as a list of pairwise einsums.

Paths come from ``pathfind`` (cotengra's greedy path at once, a hyper-optimised search within the
device's ``plan_time`` where it pays, paths kept on disk by structure) on the real index sizes, so a
batch index (a hyperedge shared by every data-dependent tensor) steers the planner towards contracting
the data-independent part once. The plan records the largest intermediate so that a contraction that
would not fit in memory is refused before anything is allocated (a step too wide for einsum is refused
when contracted, after the memory guard has had its say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .....errors import ContractionTooLargeError
from .pathfind import DEFAULT_PLAN_TIME, Found, PathSettings, Problem, find_paths

_EINSUM_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class _Step:
    operands: tuple[int, ...]  # positions in the working list, popped in descending order
    equation: str  # "" for a step too wide for einsum (refused when contracted)


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
        if found is None:
            found = find_paths([Problem.of(self.inputs, self.output, sizes, positions)], optimizer, plan_time)[0]
        self.flops = found.flops
        self.largest_intermediate = max(
            found.largest, _numel(self.output, sizes), *(_numel(ix, sizes) for ix in self.inputs)
        )
        self.steps = self._compile(found.path)
        self._too_wide = any(not step.equation for step in self.steps)

    def _compile(self, path) -> list[_Step]:
        working = list(self.inputs)
        # how many working tensors hold each index (the output counts as one more holder), kept up to date
        # step by step: recounting the working list at each step made compiling quadratic in the size
        holders: dict[int, int] = dict.fromkeys(self.output, 1)
        for ix in working:
            for i in set(ix):
                holders[i] = holders.get(i, 0) + 1
        steps = []
        for n_step, positions in enumerate(path):
            positions = tuple(sorted(positions, reverse=True))
            taken = [working.pop(p) for p in positions]
            for ix in taken:
                for i in set(ix):
                    holders[i] -= 1
            if n_step == len(path) - 1:
                result = self.output
            else:
                result = tuple(i for i in dict.fromkeys(i for ix in taken for i in ix) if holders[i] > 0)
            for i in result:
                holders[i] += 1
            steps.append(_Step(positions, _equation(taken, result)))
            working.append(result)
        return steps

    def contract(self, operands: Sequence[torch.Tensor]) -> torch.Tensor:
        working = list(operands)
        if self._too_wide:
            raise ContractionTooLargeError(
                "A contraction step touches more than 52 indices; the network is too wide to contract on this "
                "backend. Measure local observables (their light cones are smaller), use fewer wires, or simulate it "
                "approximately as a matrix product state: qhybrid.device('tensornet', ..., method=\"mps\", max_bond_dim=64)."
            )
        for step in self.steps:
            taken = [working.pop(p) for p in step.operands]
            working.append(torch.einsum(step.equation, *taken))
        return working[0]

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
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"

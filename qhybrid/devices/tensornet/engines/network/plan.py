"""Contraction plans: a path found once per network shape, replayed as a list of pairwise einsums.

Paths come from ``_pathfind`` (opt_einsum's greedy path at once, a randomised search within the
device's ``plan_time`` where it pays) on the real index sizes, so a batch index (a hyperedge shared by
every data-dependent tensor) steers the planner towards contracting the data-independent part once. The
plan records the largest intermediate so that a contraction that would not fit in memory is refused
before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .....errors import ContractionTooLargeError
from .pathfind import DEFAULT_PLAN_TIME, Found, Problem, find_paths

_EINSUM_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class _Step:
    operands: tuple[int, ...]  # positions in the working list, popped in descending order
    equation: str


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
        optimizer: str = "auto",
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

    def _compile(self, path) -> list[_Step]:
        working = list(self.inputs)
        steps = []
        for n_step, positions in enumerate(path):
            positions = tuple(sorted(positions, reverse=True))
            taken = [working.pop(p) for p in positions]
            last = n_step == len(path) - 1
            if last:
                result = self.output
            else:
                elsewhere = {i for ix in working for i in ix} | set(self.output)
                seen, result = set(), []
                for ix in taken:
                    for i in ix:
                        if i in elsewhere and i not in seen:
                            seen.add(i)
                            result.append(i)
                result = tuple(result)
            local: dict[int, str] = {}
            for ix in (*taken, result):
                for i in ix:
                    if i not in local:
                        if len(local) == len(_EINSUM_CHARS):
                            raise ContractionTooLargeError(
                                "A contraction step touches more than 52 indices; the network is too wide "
                                "to contract on this backend."
                            )
                        local[i] = _EINSUM_CHARS[len(local)]
            equation = ",".join("".join(local[i] for i in ix) for ix in taken)
            equation += "->" + "".join(local[i] for i in result)
            steps.append(_Step(positions, equation))
            working.append(result)
        return steps

    def contract(self, operands: Sequence[torch.Tensor]) -> torch.Tensor:
        working = list(operands)
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
                "(their light cones are smaller), or raise the device's max_memory."
            )


def plan_networks(
    networks: Sequence, optimizer: str = "auto", plan_time: float = DEFAULT_PLAN_TIME, vary: int | None = None
) -> list[ContractionPlan]:
    """Plans for several networks (objects with ``inputs``, ``output``, ``sizes``, ``positions``) that share
    one planning budget of ``plan_time`` seconds; ``vary`` names an index (the batch index) whose extent
    may change without changing the best path, so searched paths are reused across its sizes.
    """
    problems = [Problem.of(n.inputs, n.output, n.sizes, n.positions, vary) for n in networks]
    found = find_paths(problems, optimizer, plan_time)
    return [ContractionPlan(n.inputs, n.output, n.sizes, found=f) for n, f in zip(networks, found)]


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

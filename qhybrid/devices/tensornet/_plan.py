"""Contraction plans: a path found once per network shape, replayed as a list of pairwise einsums.

Paths come from opt_einsum (or a cotengra hyper-optimiser) on the real index sizes, so a batch index
(a hyperedge shared by every data-dependent tensor) steers the planner towards contracting the
data-independent part once. The plan records the largest intermediate so that a contraction that would
not fit in memory is refused before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import opt_einsum as oe
import torch

from ...errors import ContractionTooLargeError

_EINSUM_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

COTENGRA_MIN_TENSORS = 40
"""Networks at least this large are planned by cotengra in "auto" mode (opt_einsum's greedy below)."""

OPTIMAL_MAX_TENSORS = 6
"""Networks this small are planned exhaustively."""


RECONF_MAX_TENSORS = 120
"""cotengra's subtree reconfiguration (slow to plan) is used only on networks up to this many tensors."""


def _optimizer(name: str, n_tensors: int):
    if name == "auto":
        if n_tensors <= OPTIMAL_MAX_TENSORS:
            return "optimal"
        if n_tensors >= COTENGRA_MIN_TENSORS:
            return _cotengra_optimizer(n_tensors)
        return "greedy"
    if name == "cotengra":
        return _cotengra_optimizer(n_tensors)
    return name


def _cotengra_optimizer(n_tensors: int = 0):
    import cotengra as ctg

    return ctg.HyperOptimizer(
        methods=["greedy"],
        max_repeats=16,
        parallel=False,
        progbar=False,
        optlib="random",
        reconf_opts="auto" if n_tensors <= RECONF_MAX_TENSORS else None,
    )


SWEEP_MIN_TENSORS = 12
"""Networks at least this large also try a sweep along the wires (the better of the two paths is kept)."""


def _sweep_path(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Contract tensors one by one in order of the lowest wire they touch (ideal for chain-like circuits
    such as CNOT ladders, whose boundary stays a few bonds wide); a linear opt_einsum path."""
    order = sorted(range(len(positions)), key=lambda i: (positions[i], i))
    ssa, acc, nxt = [], order[0], len(positions)
    for t in order[1:]:
        ssa.append((acc, t))
        acc, nxt = nxt, nxt + 1
    return oe.paths.ssa_to_linear(ssa)


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
    ):
        self.inputs = [tuple(ix) for ix in inputs]
        self.output = tuple(output)
        symbols = {ix: oe.get_symbol(i) for i, ix in enumerate(sizes)}
        eq = ",".join("".join(symbols[i] for i in ix) for ix in self.inputs)
        eq += "->" + "".join(symbols[i] for i in self.output)
        shapes = [tuple(sizes[i] for i in ix) for ix in self.inputs]
        if len(self.inputs) == 1:
            path, self.largest_intermediate, self.flops = [(0,)], _numel(self.output, sizes), 0
        else:
            n = len(self.inputs)
            candidates = []
            if positions is not None and n >= SWEEP_MIN_TENSORS:
                candidates.append(oe.contract_path(eq, *shapes, shapes=True, optimize=_sweep_path(positions)))
            if optimizer == "auto" and n > RECONF_MAX_TENSORS and candidates:
                candidates.append(oe.contract_path(eq, *shapes, shapes=True, optimize="greedy"))
            else:
                candidates.append(oe.contract_path(eq, *shapes, shapes=True, optimize=_optimizer(optimizer, n)))
            path, info = min(candidates, key=lambda c: (int(c[1].opt_cost), int(c[1].largest_intermediate)))
            self.largest_intermediate = int(info.largest_intermediate)
            self.flops = int(info.opt_cost)
        self.largest_intermediate = max(
            self.largest_intermediate, _numel(self.output, sizes), *(_numel(ix, sizes) for ix in self.inputs)
        )
        self.steps = self._compile(path)

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

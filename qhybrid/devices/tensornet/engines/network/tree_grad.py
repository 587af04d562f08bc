"""Reverse mode through a contraction tree: one autograd node per contraction, the forward's intermediates
reused by the backward.

Torch's autograd through a plan's pairwise ``einsum`` steps records several nodes per step (permutes,
reshapes, a batched matmul and their backward kernels): on a light-cone network of ~200 small tensors its
backward took about ten times the forward. Here the forward runs the steps without recording and keeps
every step's operands; the backward walks the steps in reverse, and each step gives its operands'
cotangents by one ``einsum`` each (skipped for operands whose subtree holds nothing that needs a
gradient). For ``C = sum A B`` (torch's convention for complex tensors, ``dL = Re sum conj(g) dz``):

    g_A = sum_{indices of C and B not in A} g_C conj(B)

carried conjugated through the walk (``h = conj(g)``, ``h_A = sum h_C B``: no operand is conjugated, where
torch would copy each conjugated operand whole), broadcast back over indices only ``A`` holds (they were
summed within the step) and summed over axes an operand holds with extent 1 (an index broadcast from it). A
backward asked to build its own graph (higher derivatives) recomputes the contraction with autograd instead,
and differentiates that.

With ``keep=False`` the forward keeps only the operands, and the backward computes the intermediates again
before walking the tree: one more forward in exchange for holding nothing between the passes. A step that
runs many networks (the closed cone classes of a deep QAOA: ~150 trees whose kept intermediates sum to tens
of GiB) keeps them only while their sum fits its memory target (``KeptBudget``), and recomputes the rest.

>>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
>>> plan = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
>>> a, b = torch.ones(2, 3, requires_grad=True), torch.ones(3, 4)
>>> contract_tree(plan, [a, b]).sum().backward()
>>> a.grad[0, 0]
tensor(4.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import _VF  # torch.einsum without its Python wrapper (a quarter of a small step's time)
from torch.utils.checkpoint import checkpoint

from string import ascii_letters as _EINSUM_CHARS  # einsum's index letters

from .tree_bounded import bounded_values


@dataclass(frozen=True)
class _PairStep:
    """One pairwise (or one-tensor) step as the backward needs it."""

    args: tuple[int, ...]  # ids of the step's tensors (inputs 0..n-1, step results n..)
    equation: str
    grads: tuple[tuple[str, tuple[int, ...]], ...]  # per arg: its cotangent's equation, axes to broadcast back


class TreeTape:
    """A plan's pairwise steps with the equations of their cotangents, compiled once per plan."""

    def __init__(self, plan):
        nodes, indices = plan.binary_tree()
        n = len(plan.inputs)
        self.n_inputs = n
        self.steps: list[_PairStep] = []
        self.parents: dict[int, int] = {}  # tensor id -> the step that takes it
        for node in sorted(nodes):
            left, right = nodes[node]
            args = (left,) if right == -1 else (left, right)
            out = indices[node]
            local: dict[int, str] = {}
            for ix in (*(indices[a] for a in args), out):
                for i in ix:
                    local.setdefault(i, _EINSUM_CHARS[len(local)])
            spell = lambda ix: "".join(local[i] for i in ix)  # noqa: E731
            equation = ",".join(spell(indices[a]) for a in args) + "->" + spell(out)
            grads = []
            for k, a in enumerate(args):
                others = [indices[b] for j, b in enumerate(args) if j != k]
                reach = set(out).union(*others)
                target = [i for i in indices[a] if i in reach]
                missing = tuple(p for p, i in enumerate(indices[a]) if i not in reach)
                grads.append((",".join([spell(out)] + [spell(o) for o in others]) + "->" + spell(target), missing))
            self.steps.append(_PairStep(args, equation, tuple(grads)))
            for a in args:
                self.parents[a] = len(self.steps) - 1
        self.root = max(nodes) if nodes else 0


RECOMPUTE_KEEP_FRACTION = 0.5
"""A recomputed tree's backward keeps forward intermediates of at most this fraction of ``max_memory`` (the
rest of it: the cotangents waiting for their step and one recomputation's working set); where every
intermediate fits, all are kept (``tree_bounded``)."""


def contract_tree(plan, operands: Sequence[torch.Tensor], keep: bool = True, max_memory: float | None = None) -> torch.Tensor:
    """``plan.contract(operands)`` as one autograd node whose backward walks the tree (see the module);
    ``keep``: whether the forward's intermediates are kept for the backward (else recomputed there, within
    ``max_memory`` bytes: ``tree_bounded``)."""
    if plan.too_wide or not torch.is_grad_enabled() or not any(o.requires_grad for o in operands):
        return plan.contract(operands)  # (a plan too wide for einsum is refused there)
    if keep and not plan.sliced:
        return _TreeContraction.apply(plan, *operands)[0]
    itemsize = max(o.element_size() for o in operands)
    budget = math.inf if max_memory is None else RECOMPUTE_KEEP_FRACTION * max_memory / itemsize
    if plan.sliced:  # each slice within the memory target: its backward recomputes it, one slice at a time
        inner = plan._inner
        if inner.too_wide:
            return plan.contract_slices(operands, lambda ops: checkpoint(_contract_list(inner), *ops, use_reentrant=False))
        return plan.contract_slices(operands, lambda ops: _RecomputedTree.apply(inner, budget, *ops))
    return _RecomputedTree.apply(plan, budget, *operands)


class KeptBudget:
    """What the trees of one step may keep for their backward, together: ``admit(plan, itemsize)`` says
    whether a tree's intermediates (``plan.held_elements``) still fit beside those admitted before; a tree
    that does not fit recomputes them in its backward (``contract_tree(..., keep=False)``).

    >>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
    >>> plan = ContractionPlan([(0, 1), (1, 2), (2, 3)], (), {0: 4, 1: 4, 2: 4, 3: 4})
    >>> budget = KeptBudget(1.5 * plan.held_elements * 8)
    >>> budget.admit(plan, 8), budget.admit(plan, 8)
    (True, False)
    """

    def __init__(self, max_bytes: float):
        self.left = max_bytes

    def admit(self, plan, itemsize: int) -> bool:
        need = plan.held_elements * itemsize
        if need > self.left:
            return False
        self.left -= need
        return True


def _contract_list(plan):
    return lambda *operands: plan.contract(operands)


def _run(tape: TreeTape, operands: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    values = list(operands)
    for step in tape.steps:
        values.append(_VF.einsum(step.equation, [values[a] for a in step.args]))
    return values


class _TreeContraction(torch.autograd.Function):
    """Outputs: the contraction, then every other step's result (kept for the backward, not differentiable)."""

    @staticmethod
    def forward(plan, *operands):
        tape = plan.tree_tape()
        with torch.no_grad():
            values = _run(tape, operands)
        return (values[-1], *values[tape.n_inputs : -1])  # the result first: the one differentiable output

    @staticmethod
    def setup_context(ctx, inputs, output):
        plan, *operands = inputs
        ctx.plan = plan
        ctx.mark_non_differentiable(*output[1:])
        ctx.set_materialize_grads(False)  # (no zeros the size of every kept step result a backward)
        ctx.save_for_backward(*operands, *output)

    @staticmethod
    def backward(ctx, grad, *_):
        plan = ctx.plan
        tape = plan.tree_tape()
        saved = ctx.saved_tensors
        operands = saved[: tape.n_inputs]
        needs = ctx.needs_input_grad[1:]
        if grad is None:
            return (None,) * (1 + len(operands))
        if torch.is_grad_enabled():  # a graph of the backward is wanted: differentiate a recorded contraction
            return (None, *_recorded_grads(plan, operands, needs, grad))
        final, *between = saved[tape.n_inputs :]
        values = list(operands) + between + ([final] if tape.steps else [])
        return (None, *_backward(tape, values, needs, grad))


class _RecomputedTree(torch.autograd.Function):
    """As ``_TreeContraction``, keeping only the operands: the backward runs the steps again first."""

    @staticmethod
    def forward(plan, budget, *operands):
        with torch.no_grad():
            return plan.contract(operands)  # the working list frees each step's operands as it goes

    @staticmethod
    def setup_context(ctx, inputs, output):
        plan, budget, *operands = inputs
        ctx.plan, ctx.budget = plan, budget
        ctx.save_for_backward(*operands)

    @staticmethod
    def backward(ctx, grad):
        plan, operands = ctx.plan, ctx.saved_tensors
        needs = ctx.needs_input_grad[2:]
        if torch.is_grad_enabled():
            return (None, None, *_recorded_grads(plan, operands, needs, grad))
        tape = plan.tree_tape()
        if plan.held_elements > ctx.budget:  # keep what fits, recompute the rest in the walk (tree_bounded)
            values, like, value = bounded_values(plan, tape, operands, ctx.budget)
            return (None, None, *_backward(tape, values, needs, grad, like, value))
        with torch.no_grad():
            values = _run(tape, operands)
        return (None, None, *_backward(tape, values, needs, grad))


def _recorded_grads(plan, operands, needs, grad) -> list:
    """The operands' cotangents through a contraction recorded by autograd, with their own graph (a backward
    asked to build one: higher derivatives)."""
    with torch.enable_grad():
        # aliases: an operand made from another (a gate and its conjugate on the bra side) gets its own
        # position's cotangent only; the caller's graph then chains it back once
        operands = [o.view_as(o) for o in operands]
        wanted = [o for o, w in zip(operands, needs) if w]
        out = plan.contract(operands)
        got = iter(torch.autograd.grad(out, wanted, grad, create_graph=True, allow_unused=True))
    return [next(got) if w else None for w in needs]


def _backward(tape: TreeTape, values: list, needs, grad, like: list | None = None, value=None) -> list:
    """Cotangents of the inputs from the output's, along the steps in reverse (``values``: the inputs, then
    every step's result, as the forward computed them; each freed here once its parent's step is done).
    ``like`` and ``value`` (``tree_bounded``): every value's shape and dtype, and what reads a value that
    ``values`` holds as None (recomputing it); by default ``values`` itself."""
    like = values if like is None else like
    value = values.__getitem__ if value is None else value
    n = tape.n_inputs
    live = _live(tape, needs)
    # the walk carries conjugated cotangents (h = conj(g)): h_A = sum h_C B needs no conjugate of any operand,
    # where g_A = sum g_C conj(B) has torch copy B whole first (a 2^22 x 2^24-element step: 1.19 s, 0.90 s
    # without); conjugated on the way in and, for the inputs, on the way out (lazily: a view)
    cot: dict[int, torch.Tensor] = {len(values) - 1: grad.conj()}
    with torch.no_grad():
        for s in range(len(tape.steps) - 1, -1, -1):
            step = tape.steps[s]
            g = cot.pop(n + s, None)
            if g is not None:
                wanted = [a for a in step.args if a in live]
                read = {b: value(b) for b in step.args if any(a != b for a in wanted)}
                for k, a in enumerate(step.args):
                    if a not in live:
                        continue
                    equation, missing = step.grads[k]
                    others = [read[b] for j, b in enumerate(step.args) if j != k]
                    ga = _fit(_VF.einsum(equation, [g, *others]), like[a], missing)
                    cot[a] = ga if a not in cot else cot[a] + ga
                del read
            for a in step.args:
                if a >= n:
                    values[a] = None  # only its parent's step reads it
    return [cot[k].conj() if needs[k] and k in cot else None for k in range(n)]


def _live(tape: TreeTape, needs) -> set[int]:
    """Tensor ids whose cotangent is needed: inputs that need a gradient and the steps above them."""
    live = {k for k, w in enumerate(needs) if w}
    for s, step in enumerate(tape.steps):
        if any(a in live for a in step.args):
            live.add(tape.n_inputs + s)
    return live


def _fit(g: torch.Tensor, like: torch.Tensor, missing: tuple[int, ...]) -> torch.Tensor:
    """The cotangent in its operand's shape: broadcast over the axes only it held, summed over axes it
    held with extent 1 (broadcast from it)."""
    for p in missing:
        g = g.unsqueeze(p)
    if g.shape != like.shape:
        dims = tuple(p for p, (a, b) in enumerate(zip(g.shape, like.shape)) if b == 1 and a != 1)
        if dims:
            g = g.sum(dims, keepdim=True)
        g = g.expand(like.shape)
    if g.is_complex() and not like.is_complex():
        g = g.real
    return g if g.dtype == like.dtype else g.to(like.dtype)


__all__ = ["contract_tree", "TreeTape", "KeptBudget"]

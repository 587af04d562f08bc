"""Many networks contracted together: small steps batched by waves, large ones one by one in tree order.

A 100-node QAOA at p=3 measures 150 edges, each over its own light cone: 150 networks of ~190 small
tensors whose best trees hold ~10^5 flops each. Run one pairwise ``einsum`` at a time, a step costs tens
of microseconds of dispatch for a few dozen flops, and the step takes seconds where its flops take
milliseconds. At p=4 the same cones hold tensors of 2^14-2^19 elements, and there the cost is memory
traffic, not dispatch. So each network's tree is split in two:

* **small steps** (every operand and result at most ``BIG_STEP_ELEMENTS``, nothing large below them) are
  cut into *waves* by their height in their tree and run as batched matrix products
  ``C[b, m, n] = sum_k A[b, m, k] B[b, k, n]`` over one flat buffer (``many_waves.py``): ``b`` the indices
  both operands and the result hold (hyperedges), ``m``/``n`` those only one operand and the result hold,
  ``k`` those summed; one ``index_select`` per operand side and one ``bmm`` per shape a wave (shapes padded
  to shared ones where that pays, the tiniest as elementwise products), whatever the number of networks;
* **large steps** (and the steps above them) run one at a time, each tree depth first, reading held
  results as permuted strided views with the shared indices leading (``many_sequence.py``): the operand a
  step reads was made just before and is still in cache.

One autograd node for all the networks; its backward replays the sequence in reverse, then the waves
(``g_A = g_C B^H``, ``g_B = A^H g_C``), and skips the products of operands that need no cotangent (the
leaf table's first ``constants`` entries are constants). Networks ``<psi|O|psi>`` with ``O`` Hermitian and
a real cotangent (``mirrored``) need no cotangent for their bra half at all: the environment of a gate's bra
copy is the conjugate of its ket copy's, so the table's gradient is twice the ket side's (checked at build:
every non-constant entry is read as often from the conjugate block as from the table).

>>> import numpy as np
>>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
>>> plan = ContractionPlan([(0, 1), (1,)], (0,), {0: 2, 1: 2})
>>> table = torch.tensor([1.0, 2.0, 3.0, 4.0, 1.0, 1.0], dtype=torch.complex128)
>>> trees = ManyTrees([plan], [[np.arange(4).reshape(2, 2), np.array([4, 5])]], table_size=6)
>>> trees.contract(table)
tensor([3.+0.j, 7.+0.j], dtype=torch.complex128)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence as Seq

import numpy as np
import torch

from ..statevector.allocator import tune_allocator
from .fuse import fuse_chains
from .many_arena import Arena, arena_fits
from .many_roots import RootLayout
from .many_sequence import Sequence, fetch_of
from .many_waves import ZERO_CELL, NotTogether, build_waves, prod, split_step, waves_backward, waves_forward, waves_recorded

WAVE_BUFFERS = 3
"""Buffer-sized allocations the waves hold at their peak, in units of the small buffer (the buffer, its
cotangents, a wave's gathered operands): the memory guard's factor for the small steps."""

SEQUENCE_LIVE = 4
"""Largest-tensor-sized allocations the large steps hold at once beside the gathered operands kept for the
backward (a step's result, its cotangent, its operands' cotangents): the guard's term for the large steps."""

BIG_STEP_ELEMENTS = 1 << 11
"""Steps with an operand or a result above this many elements run one by one in tree order (and so do the
steps above them); smaller ones are batched by waves. Below ~2^11 elements a step's dispatch (tens of
microseconds) outweighs its memory traffic; above, the traffic dominates and batching only evicts each
operand from cache before it is read (Q100 p=4, one thread: forward 2.6 s all in waves, 1.0-1.2 s split)."""


class ManyTrees:
    """A compiled schedule contracting several networks' trees at once (see the module).

    ``plans[i]`` is network ``i``'s :class:`~.plan.ContractionPlan`; ``leaves[i][j]`` the positions, in the
    leaf table, of its operand ``j``'s elements: an integer array shaped as that operand (one axis per index
    of ``plans[i].inputs[j]``, each of its index's full size; positions from ``table_size`` on read the
    table's conjugate). ``constants``: the table's first entries that never need a gradient. ``contract(table)``
    returns every network's result, flattened in its plan's output order and concatenated.
    """

    def __init__(
        self,
        plans: Seq,
        leaves: Seq[Seq[np.ndarray]],
        table_size: int,
        max_elements: float | None = None,
        constants: int = 0,
        mirrored: bool = False,
    ):
        self.table_size = table_size
        self.mirrored = mirrored and _mirrored(leaves, table_size, constants)
        trees = []
        for i, plan in enumerate(plans):
            if plan.sliced or plan.too_wide:
                raise NotTogether("a sliced or too-wide plan")
            nodes, indices = plan.binary_tree()
            if not nodes:
                raise NotTogether("a network of one tensor")
            nodes, indices, root = fuse_chains(nodes, indices, plan._sizes, max(nodes), BIG_STEP_ELEMENTS)
            for j, ix in enumerate(plan.inputs):
                pos = np.asarray(leaves[i][j])
                if pos.shape != tuple(plan._sizes[x] for x in ix) or len(set(ix)) != len(ix):
                    raise NotTogether("an operand that broadcasts or repeats an index")
            if any(right == -1 for _, right in nodes.values()):
                raise NotTogether("a one-tensor step")
            trees.append((nodes, indices, root))
        stored: list[dict] = []  # per network: tensor id -> (positions, index order) in the small buffer
        needs: list[dict] = []  # per network: tensor id -> whether a cotangent must reach it
        steps_by_wave: dict[int, list] = {}
        large: list[list[int]] = []  # per network: its large steps (and those above them), depth first
        small_made = small_read = kept = largest = 0  # elements: small results and operands, large steps' operands, the largest tensor
        # id of a position array (kept in ``stored`` meanwhile) -> whether it needs a cotangent: networks over
        # overlapping cones share their gates' arrays, and testing each leaf took a sixth of the build
        leaf_needs: dict[int, bool] = {}
        for i, (plan, (nodes, indices, root)) in enumerate(zip(plans, trees)):
            placed, need_grad = {}, {}
            for j, ix in enumerate(plan.inputs):
                pos = np.asarray(leaves[i][j])
                placed[j] = (pos, tuple(ix))
                need = leaf_needs.get(id(pos))
                if need is None:
                    need = leaf_needs[id(pos)] = self._needs(pos, constants)
                need_grad[j] = need
            stored.append(placed)
            needs.append(need_grad)
            numel: dict = {}
            size = lambda t: numel[t] if t in numel else numel.setdefault(t, prod(indices[t], plan._sizes))  # noqa: E731
            height, tainted, order = dict.fromkeys(range(len(plan.inputs)), 0), set(), []
            for node in _depth_first(nodes, root):
                left, right = nodes[node]
                need_grad[node] = need_grad[left] or need_grad[right]
                height[node] = 1 + max(height[left], height[right])
                sizes = (size(left), size(right), size(node))
                if left in tainted or right in tainted or max(sizes) > BIG_STEP_ELEMENTS:
                    tainted.add(node)
                    order.append(node)
                    kept, largest = kept + sizes[0] + sizes[1], max(largest, *sizes)
                else:
                    steps_by_wave.setdefault(height[node], []).append((i, node, left, right, indices[node], plan._sizes))
                    small_made += sizes[2]
                    small_read += sizes[0] + sizes[1]
            large.append(order)
        need = self.need = WAVE_BUFFERS * (2 * table_size + small_made) + kept + SEQUENCE_LIVE * largest
        if max_elements is not None and need > max_elements:  # before any position table is made
            raise NotTogether(f"the networks' intermediates together ({need:.3g} elements) exceed the memory target")
        self.small_read = small_read
        self.keep_waves = max_elements is None or need + small_read <= max_elements
        """Whether the forward keeps every wave's gathered operands (``small_read`` elements) for the backward,
        where they fit beside the rest: two gathers by random positions a wave fewer in the backward (Q100
        p=3: 48 of ~770 a step)."""
        self.waves, self.small_size = build_waves(steps_by_wave, stored, 2 * table_size, needs)
        self.sequence = Sequence()
        held: list[dict] = [{} for _ in plans]  # per network: tensor id -> (slot, index order)
        for i, (plan, (nodes, indices, root)) in enumerate(zip(plans, trees)):
            for node in large[i]:
                left, right = nodes[node]
                homes = [_home(stored[i], held[i], t) for t in (left, right)]
                swap, bt, m, k, n = split_step(homes[0][2], homes[1][2], indices[node], plan._sizes)
                (ha, ta), (hb, tb) = ((homes[1], right), (homes[0], left)) if swap else ((homes[0], left), (homes[1], right))
                size = lambda ix: prod(ix, plan._sizes)  # noqa: E731
                bt, k = _shared_order(hb[2], bt, k)
                a = fetch_of(ha, bt + k + m, plan._sizes, needs[i][ta])
                b = fetch_of(hb, bt + k + n, plan._sizes, needs[i][tb])
                slot = self.sequence.add(a, b, (size(bt), size(m), size(k), size(n)))
                held[i][node] = (slot, tuple(bt + m + n))
        self.sequence.finish()
        self._roots = []  # per network: ("small", positions) or ("held", slot, shape, perm to output)
        for i, (plan, (nodes, indices, root)) in enumerate(zip(plans, trees)):
            if root in held[i]:
                slot, order = held[i][root]
                shape = tuple(plan._sizes[x] for x in order)
                self._roots.append(("held", slot, shape, tuple(order.index(x) for x in plan.output)))
            else:
                pos, order = stored[i][root]
                self._roots.append(("small", pos.transpose([order.index(x) for x in plan.output]).reshape(-1)))
        self._on: dict = {}  # device -> (wave indices, sequence, roots) there
        self._spare: list[torch.Tensor] = []  # a backward's cotangent buffer, kept for the next backward

    def _needs(self, pos: np.ndarray, constants: int) -> bool:
        """Whether a leaf at positions ``pos`` needs a cotangent: it reads some non-constant entry, and not
        only from the conjugate block of mirrored networks (a bra operand: its ket twin's conjugate)."""
        t = self.table_size
        if not t:
            return True
        if not bool(((pos % t) >= constants).any()):
            return False
        return not (self.mirrored and bool((pos >= t).all()))

    @property
    def size(self) -> int:
        """Elements of every intermediate of every network (the small buffer, then the large results)."""
        return self.small_size + sum(self.sequence.sizes)

    def _at(self, device) -> tuple:
        key = str(device)
        got = self._on.get(key)
        if got is None:
            waves = [
                (w.index_a.to(device), w.index_b.to(device), [(t.index_a.to(device), t.index_b.to(device), t.seg.to(device)) for t in w.tiny])
                for w in self.waves
            ]
            roots = [r if r[0] == "held" else ("small", torch.from_numpy(np.array(r[1], order="C")).to(device)) for r in self._roots]
            roots = RootLayout(roots, device)
            got = self._on[key] = (waves, self.sequence.to(device), roots)
        return got

    def contract(self, table: torch.Tensor) -> torch.Tensor:
        """Every network's result from the leaf ``table`` (complex, 1-D), differentiable in it."""
        if table.shape != (self.table_size,):
            raise ValueError(f"table: expected shape ({self.table_size},), got {tuple(table.shape)}")
        return _Contract.apply(self, table)[0]

    # --- the passes ------------------------------------------------------------------------------
    def _small(self, table: torch.Tensor) -> torch.Tensor:
        small = torch.empty(self.small_size, dtype=table.dtype, device=table.device)
        t = self.table_size
        small[:t] = table
        small[t : 2 * t] = table.conj()
        small[2 * t : 2 * t + ZERO_CELL].zero_()  # (what padded operands read)
        return small

    def _arena(self, table: torch.Tensor) -> tuple:
        """``(arena, lease)`` where this schedule keeps its wave buffers between steps and no step holds
        them (``many_arena``), else ``(None, None)``."""
        if not arena_fits(self, table.device, table.element_size()):
            return None, None
        arenas = self.__dict__.setdefault("_arenas", {})
        key = (str(table.device), table.dtype)
        arena = arenas.get(key)
        if arena is None:
            arena = arenas[key] = Arena(self, self._at(table.device)[0], table.dtype, table.device)
        lease = arena.take()
        return (arena, lease) if lease is not None else (None, None)

    def _forward(self, table: torch.Tensor) -> tuple:
        waves, sequence, roots = self._at(table.device)
        tune_allocator(self.size * table.element_size())  # every step's tensors again: reuse the heap's pages
        arena, lease = self._arena(table)
        keep: dict = {"arena": arena, "lease": lease, "waves": None}
        if arena is not None:
            small = arena.load(table)
            arena.waves_forward(self.waves, waves)
        else:
            small = self._small(table)
            keep["waves"] = [] if getattr(self, "keep_waves", False) else None
            waves_forward(self.waves, waves, small, keep["waves"])
        if arena is not None and arena.sequence is not None:
            keep["gathered"] = None
            held = arena.sequence.run_forward(small)
            if arena.sequence.joined:
                return arena.sequence.outputs(small), small, keep
        else:
            held = sequence.forward(small, keep)
        return roots.outputs(small, held), small, keep

    def _backward(self, small: torch.Tensor, keep: dict, grad: torch.Tensor) -> torch.Tensor:
        """The table's cotangent (``keep``: what the forward kept, released as the passes go)."""
        gathered, kept_waves, arena = keep["gathered"], keep["waves"], keep["arena"]
        waves, sequence, roots = self._at(small.device)
        cot = arena.cot.zero_() if arena is not None else self._scratch(small)
        cot_held: list = [None] * len(sequence.steps)
        # the passes carry conjugated cotangents (h = conj(g)): h_A = h_C B^T and h_B = A^T h_C need no
        # conjugate of any operand, where g_A = g_C B^H would resolve one copy of each (a pass over the large
        # operand of every large step); conjugated here on the way in and on the table's way out
        grad = grad.conj_physical()
        if arena is not None and arena.sequence is not None and arena.sequence.joined:
            arena.sequence.give_roots(grad, cot, cot_held)
        else:
            roots.backward(grad, cot, cot_held)
        if arena is not None and arena.sequence is not None:
            arena.sequence.run_backward(cot_held, cot)
        else:
            sequence.backward(gathered, cot_held, cot)
        if arena is not None:
            arena.waves_backward(self.waves, waves)
            head, conj = arena.cot_table, arena.cot_conj
        else:
            waves_backward(self.waves, waves, small, cot, kept_waves)
            t = self.table_size
            head, conj = cot[:t], cot[t : 2 * t]
            self._spare.append(cot)
        return 2 * head.conj() if self.mirrored else head.conj() + conj

    def _scratch(self, like: torch.Tensor) -> torch.Tensor:
        """A zeroed buffer like ``like``: the last backward's, when it matches (a fresh one of some megabytes
        costs its page faults again at every step)."""
        while self._spare:
            cot = self._spare.pop()
            if cot.dtype == like.dtype and cot.device == like.device:
                return cot.zero_()
        return torch.zeros_like(like)

    def _recorded(self, table: torch.Tensor) -> torch.Tensor:
        """The forward with autograd recording (for a backward that builds its own graph)."""
        waves, sequence, roots = self._at(table.device)
        small = waves_recorded(self.waves, waves, torch.cat([table, table.conj(), table.new_zeros(ZERO_CELL)]))
        return roots.outputs(small, sequence.recorded(small))


def _mirrored(leaves, table_size: int, constants: int) -> bool:
    """Whether every non-constant table entry is read as often from the conjugate block as from the table."""
    if not table_size:
        return False
    flat = np.concatenate([np.asarray(p).reshape(-1) for network in leaves for p in network])
    flat = flat[(flat % table_size) >= constants]
    ket = np.bincount(flat[flat < table_size], minlength=table_size)
    bra = np.bincount(flat[flat >= table_size] - table_size, minlength=table_size)
    return bool(np.array_equal(ket, bra))


def _shared_order(ib, bt: list, k: list) -> tuple[list, list]:
    """``bt`` and ``k`` in the right operand's index order. ``split_step`` takes them in the left one's, but puts
    the operand with the larger free side (the larger operand) right, which then read permuted across every
    index it shares (an 8x8 lattice QAOA p=3: a 2^20-element operand through a 16-run position table, ~15 ns an
    element forward and as much to scatter its cotangent back; in its own order the read is 6 runs, a permuted
    copy). The smaller operand takes the permutation instead."""
    rank = {x: j for j, x in enumerate(ib)}
    return sorted(bt, key=rank.__getitem__), sorted(k, key=rank.__getitem__)


def _home(stored: dict, held: dict, t: int) -> tuple:
    """Where tensor ``t`` lies: ``("positions", array, order)`` in the small buffer or ``("held", slot, order)``."""
    if t in held:
        slot, order = held[t]
        return ("held", slot, order)
    pos, order = stored[t]
    return ("positions", pos, order)


def _depth_first(nodes: dict, root: int) -> list[int]:
    """The tree's steps in post order (left subtree, right subtree, then the step)."""
    order, stack = [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if node not in nodes:
            continue
        if done:
            order.append(node)
            continue
        left, right = nodes[node]
        stack.extend(((node, True), (right, False), (left, False)))
    return order


class _Contract(torch.autograd.Function):
    @staticmethod
    def forward(trees: ManyTrees, table: torch.Tensor) -> torch.Tensor:
        out, small, gathered = trees._forward(table)
        return out, small, gathered

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.trees = inputs[0]
        ctx.mark_non_differentiable(output[1])
        # the buffer's cotangent is never read: left unmaterialized, not a buffer-sized zeros a step (6 ms of
        # Q100 p=3's ~60)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs[1])
        # the buffer as an attribute, not a saved tensor: an arena's buffer is written again by a later step
        # once this backward has run, and a second backward through a retained graph runs its forward anew
        ctx.small = output[1]
        ctx.gathered = output[2]

    @staticmethod
    def backward(ctx, grad, _small, _gathered):
        (table,) = ctx.saved_tensors
        keep, ctx.gathered = ctx.gathered, None  # released step by step as the backward goes
        small, ctx.small = ctx.small, None
        try:
            if grad is None:  # (the contraction itself fed nothing that was differentiated)
                return None, None
            if torch.is_grad_enabled():  # a graph of the backward is wanted: differentiate a recorded forward
                with torch.enable_grad():
                    out = ctx.trees._recorded(table)
                    (g,) = torch.autograd.grad(out, table, grad, create_graph=True)
                return None, g
            if keep is None:  # a second backward through the same graph: run the forward again
                _, small, keep = ctx.trees._forward(table)
            return None, ctx.trees._backward(small, keep, grad.to(small.dtype))
        finally:
            if keep is not None:
                keep["lease"] = None  # the arena (where it ran on one) is free for the next step


__all__ = ["ManyTrees", "NotTogether", "BIG_STEP_ELEMENTS"]

"""Many small networks contracted together: one gather and one batched matmul per wave and shape.

A 100-node QAOA at p=3 measures 150 edges, each over its own light cone: 150 networks of ~190 small
tensors whose best trees hold ~10^5 flops each. Run one pairwise ``einsum`` at a time, a step costs tens
of microseconds of dispatch for a few dozen flops, and the step takes seconds where its flops take
milliseconds. Here every network's tree is cut into *waves* (a step's wave is its height in its tree),
and every pairwise step becomes a batched matrix product ``C[b, m, n] = sum_k A[b, m, k] B[b, k, n]``:
``b`` the indices both operands and the result hold (hyperedges), ``m``/``n`` those only one operand and
the result hold, ``k`` those summed. All tensors (the leaf table, then every step's result) live in one
flat buffer, and each step's operands are read from it by precomputed positions, which also apply the
transposes einsum would make. A wave is then one ``index_select`` per operand side and one ``matmul``
per distinct ``(m, k, n)`` shape, writing its results straight into the buffer, whatever the number of
networks. The backward replays the waves in reverse: ``g_A = g_C B^H``, ``g_B = A^H g_C``, added back by
the same positions.

>>> import numpy as np
>>> from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
>>> plan = ContractionPlan([(0, 1), (1,)], (0,), {0: 2, 1: 2})
>>> table = torch.tensor([1.0, 2.0, 3.0, 4.0, 1.0, 1.0], dtype=torch.complex128)
>>> trees = ManyTrees([plan], [[np.arange(4).reshape(2, 2), np.array([4, 5])]], table_size=6)
>>> trees.contract(table)
tensor([3.+0.j, 7.+0.j], dtype=torch.complex128)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch


BUFFERS_HELD = 4
"""Buffer-sized allocations a pass holds at its peak, in units of the buffer (the buffer, the backward's
cotangents, a wave's gathered operands and their position tables): the memory guard's factor."""


class NotTogether(Exception):
    """A network this executor does not take (a one-tensor step, an index summed inside one operand, a
    sliced plan): the caller contracts it the plain way."""


@dataclass(frozen=True)
class _Group:
    """The steps of one wave with one ``(m, k, n)`` shape: ``rows`` matrices (hyperedge values summed over
    steps) read at ``a``/``b`` of the wave's gathered operands, written at ``out`` in the buffer."""

    m: int
    k: int
    n: int
    rows: int
    a: tuple[int, int]
    b: tuple[int, int]
    out: tuple[int, int]


@dataclass(frozen=True)
class _Wave:
    index_a: torch.Tensor  # positions in the buffer of every group's left operands, group after group
    index_b: torch.Tensor
    groups: tuple[_Group, ...]
    out: tuple[int, int]  # the buffer's span of the wave's results
    a_sizes: tuple[int, ...]  # per group: elements of its left operands, right operands, results
    b_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]


class ManyTrees:
    """A compiled schedule contracting several networks' trees at once (see the module).

    ``plans[i]`` is network ``i``'s :class:`~.plan.ContractionPlan`; ``leaves[i][j]`` the positions, in the
    leaf table, of its operand ``j``'s elements: an integer array shaped as that operand (one axis per index
    of ``plans[i].inputs[j]``, each of its index's full size). ``contract(table)`` returns every network's
    result, flattened in its plan's output order and concatenated.
    """

    def __init__(
        self, plans: Sequence, leaves: Sequence[Sequence[np.ndarray]], table_size: int, max_elements: float | None = None
    ):
        self.table_size = table_size
        steps_by_wave: dict[int, list] = {}
        stored: list[dict] = []  # per network: tensor id -> (positions array, index order) once placed
        roots: list[int] = []
        made = 0  # elements of every step's result
        for i, plan in enumerate(plans):
            if plan.sliced or plan.too_wide:
                raise NotTogether("a sliced or too-wide plan")
            nodes, indices = plan.binary_tree()
            if not nodes:
                raise NotTogether("a network of one tensor")
            placed = {}
            for j, ix in enumerate(plan.inputs):
                pos = np.asarray(leaves[i][j])
                if pos.shape != tuple(plan._sizes[x] for x in ix) or len(set(ix)) != len(ix):
                    raise NotTogether("an operand that broadcasts or repeats an index")
                placed[j] = (pos, tuple(ix))
            stored.append(placed)
            height = dict.fromkeys(range(len(plan.inputs)), 0)
            for node in sorted(nodes):
                left, right = nodes[node]
                if right == -1:
                    raise NotTogether("a one-tensor step")
                height[node] = 1 + max(height[left], height[right])
                made += math.prod(plan._sizes[x] for x in indices[node])
                steps_by_wave.setdefault(height[node], []).append((i, node, left, right, indices[node], plan._sizes))
            roots.append(max(nodes))
        need = BUFFERS_HELD * (2 * table_size + made)
        if max_elements is not None and need > max_elements:  # before any position table is made
            raise NotTogether(f"the networks' intermediates together ({need:.3g} elements) exceed the memory target")
        self.waves: list[_Wave] = []
        offset = 2 * table_size  # the table, then its conjugate, then every step's result
        for h in sorted(steps_by_wave):
            by_shape: dict[tuple, list] = {}
            for i, node, left, right, out, sizes in steps_by_wave[h]:
                shape, pos_a, pos_b, order = _step(stored[i][left], stored[i][right], out, sizes)
                by_shape.setdefault(shape, []).append((i, node, pos_a, pos_b, order, sizes))
            groups, index_a, index_b, n_a, n_b = [], [], [], 0, 0
            for (m, k, n), members in by_shape.items():
                rows = 0
                start, a0, b0 = offset, n_a, n_b
                for i, node, pos_a, pos_b, order, sizes in members:
                    rows += pos_a.size // (m * k)
                    size = pos_a.size // (m * k) * m * n
                    stored[i][node] = (offset + np.arange(size).reshape([sizes[x] for x in order]), order)
                    offset += size
                    index_a.append(pos_a.reshape(-1))
                    index_b.append(pos_b.reshape(-1))
                    n_a += pos_a.size
                    n_b += pos_b.size
                groups.append(_Group(m, k, n, rows, (a0, n_a), (b0, n_b), (start, offset)))
            index_a, index_b = torch.from_numpy(np.concatenate(index_a)), torch.from_numpy(np.concatenate(index_b))
            sizes = [tuple(g.a[1] - g.a[0] for g in groups), tuple(g.b[1] - g.b[0] for g in groups)]
            sizes.append(tuple(g.out[1] - g.out[0] for g in groups))
            self.waves.append(_Wave(index_a, index_b, tuple(groups), (groups[0].out[0], offset), *sizes))
        self.size = offset
        """Elements of the buffer: the table twice, then every intermediate of every network."""
        outs = []
        for i, plan in enumerate(plans):
            pos, order = stored[i][roots[i]]
            outs.append(pos.transpose([order.index(x) for x in plan.output]).reshape(-1))
        self.roots = torch.from_numpy(np.concatenate(outs))
        self._on: dict = {}  # device -> the index tensors there
        self._spare: list[torch.Tensor] = []  # a backward's scratch buffer, kept for the next backward

    def _indices(self, device) -> tuple:
        key = str(device)
        got = self._on.get(key)
        if got is None:
            got = ([(w.index_a.to(device), w.index_b.to(device)) for w in self.waves], self.roots.to(device))
            self._on[key] = got
        return got

    def contract(self, table: torch.Tensor) -> torch.Tensor:
        """Every network's result from the leaf ``table`` (complex, 1-D), differentiable in it."""
        if table.shape != (self.table_size,):
            raise ValueError(f"table: expected shape ({self.table_size},), got {tuple(table.shape)}")
        return _Contract.apply(self, table)[0]

    # --- the passes ------------------------------------------------------------------------------
    def _forward(self, table: torch.Tensor) -> torch.Tensor:
        buffer = torch.empty(self.size, dtype=table.dtype, device=table.device)
        t = self.table_size
        buffer[:t] = table
        buffer[t : 2 * t] = table.conj()
        waves, _ = self._indices(table.device)
        for wave, (ia, ib) in zip(self.waves, waves):
            a = torch.split_with_sizes(buffer.index_select(0, ia), wave.a_sizes)
            b = torch.split_with_sizes(buffer.index_select(0, ib), wave.b_sizes)
            c = torch.split_with_sizes(buffer[wave.out[0] : wave.out[1]], wave.out_sizes)
            for g, ag, bg, cg in zip(wave.groups, a, b, c):
                torch.bmm(ag.view(g.rows, g.m, g.k), bg.view(g.rows, g.k, g.n), out=cg.view(g.rows, g.m, g.n))
        return buffer

    def _backward(self, buffer: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        waves, roots = self._indices(buffer.device)
        cot = self._scratch(buffer)
        cot.index_put_((roots,), grad, accumulate=True)
        for wave, (ia, ib) in zip(reversed(self.waves), reversed(waves)):
            # g_A = g_C conj(B)^T and g_B = conj(A)^T g_C: the operands conjugated once per wave
            a = torch.split_with_sizes(buffer.index_select(0, ia).conj_physical_(), wave.a_sizes)
            b = torch.split_with_sizes(buffer.index_select(0, ib).conj_physical_(), wave.b_sizes)
            ga = torch.empty(len(ia), dtype=buffer.dtype, device=buffer.device)
            gb = torch.empty(len(ib), dtype=buffer.dtype, device=buffer.device)
            c = torch.split_with_sizes(cot[wave.out[0] : wave.out[1]], wave.out_sizes)
            ga_parts, gb_parts = torch.split_with_sizes(ga, wave.a_sizes), torch.split_with_sizes(gb, wave.b_sizes)
            for g, ag, bg, cg, gag, gbg in zip(wave.groups, a, b, c, ga_parts, gb_parts):
                gc = cg.view(g.rows, g.m, g.n)
                torch.bmm(gc, bg.view(g.rows, g.k, g.n).mT, out=gag.view(g.rows, g.m, g.k))
                torch.bmm(ag.view(g.rows, g.m, g.k).mT, gc, out=gbg.view(g.rows, g.k, g.n))
            cot.index_add_(0, ia, ga)
            cot.index_add_(0, ib, gb)
        t = self.table_size
        out = cot[:t] + cot[t : 2 * t].conj()
        self._spare.append(cot)
        return out

    def _scratch(self, like: torch.Tensor) -> torch.Tensor:
        """A zeroed buffer like ``like``: the last backward's, when it matches (a fresh one of some
        megabytes costs its page faults again at every step)."""
        while self._spare:
            cot = self._spare.pop()
            if cot.dtype == like.dtype and cot.device == like.device:
                return cot.zero_()
        return torch.zeros_like(like)

    def _recorded(self, table: torch.Tensor) -> torch.Tensor:
        """The forward with autograd recording (for a backward that builds its own graph): the buffer grows
        by concatenation, wave by wave, in the order its positions were given out."""
        buffer = torch.cat([table, table.conj()])
        waves, roots = self._indices(table.device)
        for wave, (ia, ib) in zip(self.waves, waves):
            a, b = buffer[ia], buffer[ib]
            outs = [
                torch.matmul(a[g.a[0] : g.a[1]].view(g.rows, g.m, g.k), b[g.b[0] : g.b[1]].view(g.rows, g.k, g.n)).reshape(-1)
                for g in wave.groups
            ]
            buffer = torch.cat([buffer, *outs])
        return buffer[roots]


def _step(left, right, out, sizes) -> tuple:
    """``((m, k, n), positions of A as [b, m, k], positions of B as [b, k, n], result's index order)`` for
    one pairwise step; the operand with fewer free elements goes left (one shape for ``A B`` and ``B A``)."""
    (pa, ia), (pb, ib) = left, right
    sa, sb, so = set(ia), set(ib), set(out)
    if (sa - sb - so) or (sb - sa - so) or not so <= (sa | sb):
        raise NotTogether("an index summed inside one operand")
    size = lambda ix: math.prod(sizes[x] for x in ix)  # noqa: E731
    bt = [x for x in ia if x in sb and x in so]
    m = [x for x in ia if x in so and x not in sb]
    k = [x for x in ia if x in sb and x not in so]
    n = [x for x in ib if x in so and x not in sa]
    if size(m) > size(n):  # C^T = B^T A^T: the smaller free side on the left
        (pa, ia), (pb, ib), m, n = (pb, ib), (pa, ia), n, m
    pos_a = pa.transpose([ia.index(x) for x in bt + m + k])
    pos_b = pb.transpose([ib.index(x) for x in bt + k + n])
    return (size(m), size(k), size(n)), pos_a, pos_b, tuple(bt + m + n)


class _Contract(torch.autograd.Function):
    @staticmethod
    def forward(trees: ManyTrees, table: torch.Tensor) -> torch.Tensor:
        buffer = trees._forward(table)
        return buffer[trees._indices(table.device)[1]], buffer

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.trees = inputs[0]
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(inputs[1], output[1])

    @staticmethod
    def backward(ctx, grad, _):
        table, buffer = ctx.saved_tensors
        if torch.is_grad_enabled():  # a graph of the backward is wanted: differentiate a recorded forward
            with torch.enable_grad():
                out = ctx.trees._recorded(table)
                (g,) = torch.autograd.grad(out, table, grad, create_graph=True)
            return None, g
        return None, ctx.trees._backward(buffer, grad.to(buffer.dtype))


__all__ = ["ManyTrees", "NotTogether"]

"""The small steps of many networks' trees, batched by waves over one flat buffer (``many.py``).

A step's wave is its height in its tree, so a wave's steps only read tensors made in earlier waves.
Every pairwise step is a batched matrix product ``C[b, m, n] = sum_k A[b, m, k] B[b, k, n]``; all
tensors (the leaf table, its conjugate, then every step's result) live in one flat buffer, and a wave is
one ``index_select`` per operand side and one ``bmm`` per distinct ``(m, k, n)`` shape, writing straight
into the buffer: dispatch, not arithmetic, is what small steps cost, and this pays it once per wave and
shape whatever the number of networks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import many_tiny
from .products import product


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
    need_a: bool = True  # whether its left / right operands need a cotangent
    need_b: bool = True


@dataclass(frozen=True)
class _Wave:
    index_a: torch.Tensor  # positions in the buffer of every group's left operands, group after group
    index_b: torch.Tensor
    groups: tuple[_Group, ...]
    out: tuple[int, int]  # the buffer's span of the wave's results
    a_sizes: tuple[int, ...]  # per group: elements of its left operands, right operands, results
    b_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    a_need: tuple[int, int] = (0, 0)  # the spans of the gathered operands that need a cotangent (groups are
    b_need: tuple[int, int] = (0, 0)  # ordered so that each side's needing groups are contiguous)
    tiny: tuple = ()  # the tiniest groups as elementwise products (``many_tiny.Tiny``), results after ``out``


def split_step(ia, ib, out, sizes) -> tuple:
    """``(swap, bt, m, k, n)`` of one pairwise step on operands indexed ``ia``, ``ib``: ``bt`` the indices
    both operands and the result hold, ``m``/``n`` those only the left/right one and the result hold, ``k``
    those summed, each in its operand's own order; ``swap``: the right operand has the smaller free side
    and goes left (one shape for ``A B`` and ``B A``)."""
    sa, sb, so = set(ia), set(ib), set(out)
    if (sa - sb - so) or (sb - sa - so) or not so <= (sa | sb):
        raise NotTogether("an index summed inside one operand")
    bt = [x for x in ia if x in sb and x in so]
    m = [x for x in ia if x in so and x not in sb]
    k = [x for x in ia if x in sb and x not in so]
    n = [x for x in ib if x in so and x not in sa]
    if prod(m, sizes) > prod(n, sizes):
        return True, [x for x in ib if x in sa and x in so], n, [x for x in ib if x in sa and x not in so], m
    return False, bt, m, k, n


def prod(ix, sizes) -> int:
    """The number of elements over indices ``ix`` (a plain loop: ``math.prod`` of a generator costs more
    than the product on the few indices of a step, and planning calls this hundreds of thousands of times)."""
    p = 1
    for x in ix:
        p *= sizes[x]
    return p


_NEED_ORDER = {(True, False): 0, (True, True): 1, (False, True): 2, (False, False): 3}
"""Groups needing only their left cotangent, both, only the right, none: each side's needing groups adjoin."""


def build_waves(steps_by_wave: dict, stored: list, offset: int, needs: list | None = None) -> tuple[list[_Wave], int]:
    """The waves of ``steps_by_wave`` (height -> ``(network, node, left, right, result indices, sizes)``),
    reading operands at ``stored[network][tensor] = (positions, index order)`` and placing each result in
    the buffer from ``offset`` on (recorded in ``stored``); ``needs[network][tensor]``: whether a cotangent
    must reach it (None: always). Returns the waves and the buffer's new end. Position ``offset`` itself is
    left to hold a zero (``ZERO_CELL``: padded operands read it), results start after it."""
    waves, zero = [], offset
    offset += ZERO_CELL
    for h in sorted(steps_by_wave):
        by_shape: dict[tuple, list] = {}
        for i, node, left, right, out, sizes in steps_by_wave[h]:
            (pa, ia), (pb, ib) = stored[i][left], stored[i][right]
            need = (True, True) if needs is None else (needs[i][left], needs[i][right])
            swap, bt, m, k, n = split_step(ia, ib, out, sizes)
            if swap:
                (pa, ia), (pb, ib), need = (pb, ib), (pa, ia), need[::-1]
            pos_a = pa.transpose([ia.index(x) for x in bt + m + k])
            pos_b = pb.transpose([ib.index(x) for x in bt + k + n])
            shape = (prod(m, sizes), prod(k, sizes), prod(n, sizes), *need)
            by_shape.setdefault(shape, []).append((i, node, pos_a, pos_b, tuple(bt + m + n), sizes))
        tiny = {key: ms for key, ms in by_shape.items() if _products(key, ms) <= many_tiny.TINY_PRODUCTS}
        by_shape = {key: ms for key, ms in by_shape.items() if key not in tiny}
        groups, index_a, index_b, n_a, n_b, start = [], [], [], 0, 0, offset
        for (m_, k_, n_, need_a, need_b), shapes in _padded(by_shape):
            rows, start, a0, b0 = 0, offset, n_a, n_b
            ids = _ids(offset, sum(pos_a.size // (m * k) for (m, k, _), ms in shapes for _, _, pos_a, _, _, _ in ms) * m_ * n_)
            for (m, k, n), members in shapes:
                for i, node, pos_a, pos_b, order, sizes in members:
                    r = pos_a.size // (m * k)
                    size = r * m_ * n_
                    mine = ids[offset - start : offset - start + size]
                    if (m, n) != (m_, n_):  # its results in the first m rows and n columns of each padded matrix
                        mine = mine.reshape(r, m_, n_)[:, :m, :n]
                    stored[i][node] = (mine.reshape([sizes[x] for x in order]), order)
                    offset += size
                    index_a.append(_pad(pos_a.reshape(r, m, k), m_, k_, zero))
                    index_b.append(_pad(pos_b.reshape(r, k, n), k_, n_, zero))
                    rows += r
            n_a, n_b = n_a + rows * m_ * k_, n_b + rows * k_ * n_
            groups.append(_Group(m_, k_, n_, rows, (a0, n_a), (b0, n_b), (start, offset), need_a, need_b))
        first = groups[0].out[0] if groups else offset
        ia, ib = (torch.from_numpy(np.concatenate(x)) if x else torch.zeros(0, dtype=torch.long) for x in (index_a, index_b))
        sizes_ = [tuple(g.a[1] - g.a[0] for g in groups), tuple(g.b[1] - g.b[0] for g in groups)]
        sizes_.append(tuple(g.out[1] - g.out[0] for g in groups))
        a_need = _span([g.a for g in groups if g.need_a])
        b_need = _span([g.b for g in groups if g.need_b])
        bmm_end = offset
        parts, offset = _tiny_parts(tiny, stored, offset)
        waves.append(_Wave(ia, ib, tuple(groups), (first, bmm_end), *sizes_, a_need, b_need, parts))
    return waves, offset


ZERO_CELL = 1
"""Positions the small buffer keeps zero past the leaf table and its conjugate (``build_waves``): where padded
operand entries read (and their cotangents, all zero, go)."""

PAD_CALL_NS = 24_000
"""What one more ``bmm`` group costs a step (its product forward, two backward, their dispatch), against
``PAD_MATRIX_NS`` a matrix and ``PAD_PRODUCT_NS`` a multiply-add of the three: groups of one wave are padded
to one shape (zeros read from the zero cell, results past each matrix's corner unread) where that costs less.
Small complex ``bmm`` here: ~150-200 ns a matrix of a few products, ~1 ns a product (one thread); Q100 p=3's
337 groups become ~100."""
PAD_MATRIX_NS = 450
PAD_PRODUCT_NS = 4


def _padded(by_shape: dict) -> list:
    """The wave's groups as ``[(padded key, [((m, k, n), members), ...]), ...]``, each side's needing groups
    adjoining: shapes merged greedily into their elementwise largest (needs or-ed) while that lowers the cost."""
    clusters = []  # [key, rows, [((m, k, n), members)]]
    for key, members in by_shape.items():
        rows = sum(pos_a.size for _, _, pos_a, _, _, _ in members) // (key[0] * key[1])
        clusters.append([key, rows, [(key[:3], members)]])
    cost = lambda key, rows: PAD_CALL_NS + rows * (PAD_MATRIX_NS + PAD_PRODUCT_NS * key[0] * key[1] * key[2])  # noqa: E731
    while len(clusters) > 1:
        best = None
        for x in range(len(clusters)):
            for y in range(x + 1, len(clusters)):
                (kx, rx, _), (ky, ry, _) = clusters[x], clusters[y]
                key = (*(max(a, b) for a, b in zip(kx[:3], ky[:3])), kx[3] or ky[3], kx[4] or ky[4])
                gain = cost(kx, rx) + cost(ky, ry) - cost(key, rx + ry)
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, x, y, key)
        if best is None:
            break
        _, x, y, key = best
        merged = [key, clusters[x][1] + clusters[y][1], clusters[x][2] + clusters[y][2]]
        clusters = [c for i, c in enumerate(clusters) if i not in (x, y)] + [merged]
    return sorted(((key, shapes) for key, _, shapes in clusters), key=lambda kv: _NEED_ORDER[kv[0][3:]])


def _pad(pos: np.ndarray, rows: int, cols: int, zero: int) -> np.ndarray:
    """``pos`` (``[r, p, q]``) padded to ``[r, rows, cols]`` with the zero cell, flattened."""
    if pos.shape[1:] == (rows, cols):
        return pos.reshape(-1)
    out = np.full((pos.shape[0], rows, cols), zero, dtype=pos.dtype)
    out[:, : pos.shape[1], : pos.shape[2]] = pos
    return out.reshape(-1)


def _products(key: tuple, members: list) -> int:
    m, k, n = key[:3]
    return sum(pos_a.size for _, _, pos_a, _, _, _ in members) // (m * k) * m * k * n


def _tiny_parts(tiny: dict, stored: list, offset: int) -> tuple[tuple, int]:
    """The tiny groups as one ``Tiny`` (each side's needing products adjoining), their results placed from
    ``offset`` on."""
    if not tiny:
        return (), offset
    start, ta, tb, seg, spans_a, spans_b, n_p = offset, [], [], [], [], [], 0
    for key in sorted(tiny, key=lambda key: _NEED_ORDER[key[3:]]):
        m, k, n, need_a, need_b = key
        p0, first = n_p, offset
        ids = _ids(offset, sum(x[2].size for x in tiny[key]) // k * n)
        for i, node, pos_a, _, order, sizes in tiny[key]:
            size = pos_a.size // k * n
            stored[i][node] = (ids[offset - first : offset - first + size].reshape([sizes[x] for x in order]), order)
            offset += size
        a, b = many_tiny.products(
            np.concatenate([x[2].reshape(-1) for x in tiny[key]]), np.concatenate([x[3].reshape(-1) for x in tiny[key]]), m, k, n
        )  # (the members laid end to end: their products in the same order as their results)
        ta.append(a)
        tb.append(b)
        seg.append(np.repeat(np.arange(first - start, offset - start), k))
        n_p += a.size
        (spans_a if need_a else []).append((p0, n_p))
        (spans_b if need_b else []).append((p0, n_p))
    index_a, index_b, seg = (torch.from_numpy(np.concatenate(x)) for x in (ta, tb, seg))
    return (many_tiny.Tiny((start, offset), index_a, index_b, seg, _span(spans_a), _span(spans_b)),), offset


def _ids(start: int, count: int) -> np.ndarray:
    """Buffer positions ``start .. start + count``, read-only: a group's results are slices of one range
    (one ``arange`` per step was a tenth of the waves' build on Q100 p=4's 58k steps), and no reader may
    write into another's."""
    ids = np.arange(start, start + count)
    ids.flags.writeable = False
    return ids


def _span(parts: list) -> tuple[int, int]:
    return (parts[0][0], parts[-1][1]) if parts else (0, 0)


def waves_forward(waves: list, indices: list, buffer: torch.Tensor, keep: list | None = None) -> None:
    """Run the waves, writing every result into ``buffer``; ``keep``: a list that gets each wave's gathered
    operands ``(a, b)`` for the backward (None: not kept, the backward gathers them again)."""
    for wave, (ia, ib, tiny) in zip(waves, indices):
        for part, (ta, tb, seg) in zip(wave.tiny, tiny):
            many_tiny.tiny_forward(part, ta, tb, seg, buffer)
        if not wave.groups:
            if keep is not None:
                keep.append(None)
            continue
        whole_a, whole_b = buffer.index_select(0, ia), buffer.index_select(0, ib)
        if keep is not None:
            keep.append((whole_a, whole_b))
        a = torch.split_with_sizes(whole_a, wave.a_sizes)
        b = torch.split_with_sizes(whole_b, wave.b_sizes)
        c = torch.split_with_sizes(buffer[wave.out[0] : wave.out[1]], wave.out_sizes)
        for g, ag, bg, cg in zip(wave.groups, a, b, c):
            product(ag.view(g.rows, g.m, g.k), bg.view(g.rows, g.k, g.n), out=cg.view(g.rows, g.m, g.n))


def waves_backward(waves: list, indices: list, buffer: torch.Tensor, cot: torch.Tensor, kept: list | None = None) -> None:
    """The waves in reverse: every result's conjugated cotangent in ``cot`` (same layout as ``buffer``) added
    back to its operands' positions (``h = conj(g)``: ``h_A = h_C B^T``, ``h_B = A^T h_C``, no conjugate).
    ``kept``: the forward's gathered operands (``waves_forward``'s ``keep``; released wave by wave), else
    gathered again: two gathers a wave over the whole buffer, by random positions."""
    for w in range(len(waves) - 1, -1, -1):
        wave, (ia, ib, tiny) = waves[w], indices[w]
        for part, (ta, tb, seg) in zip(wave.tiny, tiny):
            many_tiny.tiny_backward(part, ta, tb, seg, buffer, cot)
        if not wave.groups:
            continue
        if kept is not None:
            (whole_a, whole_b), kept[w] = kept[w], None
        else:
            whole_a, whole_b = buffer.index_select(0, ia), buffer.index_select(0, ib)
        a = torch.split_with_sizes(whole_a, wave.a_sizes)
        b = torch.split_with_sizes(whole_b, wave.b_sizes)
        ga = torch.empty(len(ia), dtype=buffer.dtype, device=buffer.device)
        gb = torch.empty(len(ib), dtype=buffer.dtype, device=buffer.device)
        c = torch.split_with_sizes(cot[wave.out[0] : wave.out[1]], wave.out_sizes)
        ga_parts, gb_parts = torch.split_with_sizes(ga, wave.a_sizes), torch.split_with_sizes(gb, wave.b_sizes)
        for g, ag, bg, cg, gag, gbg in zip(wave.groups, a, b, c, ga_parts, gb_parts):
            gc = cg.view(g.rows, g.m, g.n)
            if g.need_a:
                product(gc, bg.view(g.rows, g.k, g.n).mT, out=gag.view(g.rows, g.m, g.k))
            if g.need_b:
                product(ag.view(g.rows, g.m, g.k).mT, gc, out=gbg.view(g.rows, g.k, g.n))
        (a0, a1), (b0, b1) = wave.a_need, wave.b_need
        cot.scatter_add_(0, ia[a0:a1], ga[a0:a1])  # (``index_add_``'s sum at half its time: ``many_arena``)
        cot.scatter_add_(0, ib[b0:b1], gb[b0:b1])


def waves_recorded(waves: list, indices: list, buffer: torch.Tensor) -> torch.Tensor:
    """The waves with autograd recording: the buffer grows by concatenation, wave by wave, in the order its
    positions were given out."""
    for wave, (ia, ib, tiny) in zip(waves, indices):
        a, b = buffer[ia], buffer[ib]
        outs = [
            torch.matmul(a[g.a[0] : g.a[1]].view(g.rows, g.m, g.k), b[g.b[0] : g.b[1]].view(g.rows, g.k, g.n)).reshape(-1)
            for g in wave.groups
        ]
        outs += [many_tiny.tiny_recorded(part, ta, tb, seg, buffer) for part, (ta, tb, seg) in zip(wave.tiny, tiny)]
        buffer = torch.cat([buffer, *outs])
    return buffer


__all__ = ["NotTogether", "split_step", "build_waves", "waves_forward", "waves_backward", "waves_recorded"]

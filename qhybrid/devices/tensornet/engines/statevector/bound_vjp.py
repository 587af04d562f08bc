"""The bound program's backward: the action tensors' cotangents chained by hand to the inputs (see ``bound``):
Kronecker blocks to their factors, fused per-wire products to their gates, gates to angles by their shift
rules, diagonal runs' angle columns and gate angles to the inputs by ``index_add``."""

from __future__ import annotations

import torch

from . import gate_grads, kernels
from .kron_tables import kron_gather_vjp as _kron_vjp, kron_gather_vjp_conj, mm2
from .product import sum_to


def input_cotangents(bp, record, grads, inputs, needs, conj_krons: bool = False) -> list:
    """Cotangents of ``inputs`` from those of the action tensors (``grads``), chained by hand (``conj_krons``:
    the Kronecker blocks' are given conjugated, so that stacking them needs no copy each)."""
    derivs, mats, fused, origins, members, _ = record
    parts: dict = {}  # (chain, kind) -> ([entries], [cotangents])
    g_krons: dict = {}
    g_mats: list = [None] * len(mats)
    g_runs: list = []
    stacked_vecs: list = []
    for origin, g in zip(origins, grads):
        if origin is None or g is None:
            continue
        kind = origin[0]
        if kind == "run":
            g_runs.append((origin[1], g))
        elif kind == "vecs":  # the stacked product's vectors [n, 2, 1, Bx]: entries e0 .. e0 + n - 1
            stacked_vecs.append((origin[1], tuple(range(origin[2], origin[2] + g.shape[0])), g))
        elif kind in ("vec", "mat", "lead"):
            entries, values = parts.setdefault((origin[1], kind), ([], []))
            entries.append(origin[2])
            values.append(g)
        elif kind == "kron":
            g_krons.setdefault(origin[1], {})[origin[2]] = g
        else:  # "gate": undo the wire order and lead axis of the slot's matrix
            _, gid, pos, inverse, lead = origin
            if inverse is not None:
                g = g.reshape(*g.shape[:-2], *(2,) * (len(inverse) - (g.ndim - 2))).permute(inverse).reshape(g.shape)
            if lead:
                g = g[0]
            _accumulate(g_mats, mats, gid, bp.index((pos,), g.device), g.unsqueeze(0))
    g_fused: dict = {}

    def into(ci, index, values):
        F = fused[ci][1][-1]
        if ci not in g_fused and values.shape == F.shape and values.dtype == F.dtype and whole(bp, index, len(F)):
            g_fused[ci] = values.resolve_conj()  # every entry, in order: no zeros and scatter (values are ours)
            return
        if ci not in g_fused:
            g_fused[ci] = torch.zeros_like(F)
        if values.shape[0] != len(index) or values.shape[1:] != F.shape[1:]:
            values = values.expand(len(index), *F.shape[1:])
        g_fused[ci].index_add_(0, index, values)

    for size, got in g_krons.items():
        refs = bp.krons[size]
        count = len(refs) // size
        zero = torch.zeros_like(next(iter(got.values()))) if len(got) < count else None
        G = torch.stack([got.get(b, zero) for b in range(count)])
        if conj_krons:
            factors = kron_gather_vjp_conj(members[size], G).view(-1, 1, 2, 2)
        else:
            factors = _kron_vjp(members[size], G).reshape(-1, 1, 2, 2)
        for ci, entries, pick in _kron_scatter(bp, size):
            device = factors.device
            into(ci, bp._on(entries, device), factors if pick is None else factors[bp._on(pick, device)])
    chunks = [(ci, kind, entries, torch.stack(values)) for (ci, kind), (entries, values) in parts.items()]
    for ci, kind, entries, g in chunks + [(ci, "vec", entries, g) for ci, entries, g in stacked_vecs]:
        if kind == "vec":  # [m, 2, 1, Bx] -> column 0 of [m, Bx, 2, 2]
            col = g[:, :, 0, :]
            g = torch.stack([col, _zeros(bp, col)], -1).transpose(1, 2)
        elif kind == "mat":
            g = g.unsqueeze(1)
        else:
            g = g[:, 0]
        into(ci, bp.index(tuple(entries), g.device), g)
    for ci, gF in g_fused.items():
        _chain_vjp(bp, bp.chains[ci], *fused[ci], gF, g_mats, mats)
    lay = record[5]
    flat = None  # the cotangent of the flat input vector (bound_inputs): one accumulating scatter a group or run

    outs: list = [None] * len(inputs)  # single-source programs: each input's cotangent, one put_ a group or run

    def scatter(key, parts, values, sources):
        nonlocal flat
        if bp.single_source:
            (src,) = sources
            if outs[src] is None:
                outs[src] = torch.zeros(inputs[src].shape, dtype=values.dtype, device=values.device)
            outs[src].put_(lay.local(key, parts, values.device), values, accumulate=True)
            return
        if flat is None:
            flat = torch.zeros(lay.total, dtype=values.dtype, device=values.device)
        flat.index_put_((lay.table(key, parts, values.device),), values, accumulate=True)

    for ri, g in g_runs:  # [gates, 1, B|1] angle cotangents from the run's own reduction
        if any(needs[src] for src in bp.run_sources[ri]):
            scatter(("r", ri), bp.runs[ri], g, bp.run_sources[ri])
    for gid, gm in enumerate(g_mats):
        if gm is not None and any(needs[src] for src in bp.group_sources[gid]):
            scatter(("g", gid), bp.groups[gid][2], gate_grads.angle_cotangents_stacked(derivs[gid], gm),
                    bp.group_sources[gid])
    if bp.single_source:
        return [None if o is None or not nd else (o if o.dtype == x.dtype else o.to(x.dtype))
                for o, x, nd in zip(outs, inputs, needs)]
    if flat is None:
        return [None] * len(inputs)
    return lay.split(flat, inputs, needs)

def whole(bp, index, count: int) -> bool:
    """Whether ``index`` (a plan-time table) is ``0 .. count - 1`` in order (read once per table)."""
    key = ("whole", id(index), count)
    hit = bp._consts.get(key)
    if hit is None:
        hit = bp._consts[key] = (index.tolist() == list(range(count)), index)[0]
    return hit


def _zeros(bp, like) -> torch.Tensor:
    """Zeros shaped as ``like``, made once per shape, dtype and device (never written)."""
    key = ("zeros", tuple(like.shape), like.dtype, like.device)
    hit = bp._consts.get(key)
    if hit is None:
        hit = bp._consts[key] = torch.zeros(like.shape, dtype=like.dtype, device=like.device)
    return hit


def _kron_scatter(bp, size) -> list:
    """Per chain among the blocks of ``size``: (chain, its entries, their rows among the factors or None
    for all of them), built once."""
    key = ("scatter", size)
    if key not in bp._consts:
        refs = bp.krons[size]
        out = []
        for ci in sorted({c for c, _ in refs}):
            pick = [i for i, (c, _) in enumerate(refs) if c == ci]
            entries = torch.tensor([refs[i][1] for i in pick])
            out.append((ci, entries, None if len(pick) == len(refs) else torch.tensor(pick)))
        bp._consts[key] = out
    return bp._consts[key]

def _chain_vjp(bp, chain, elems, partial, gF, g_mats, mats) -> None:
    device = gF.device
    g = gF
    for j in range(len(elems) - 1, -1, -1):
        gm = g if j == 0 else mm2(g, partial[j - 1].mH)
        e = chain.elems[j]
        if e[0] == "g":
            gm = sum_to(gm, elems[j].shape)
            if not bp.groups[e[1]][1]:
                gm = gm.squeeze(1)
            whole = bp._consts.get(("whole", id(e[2])))
            if whole is None:  # the chain's entries are every gate of the group, in order (once per plan)
                whole = bp._consts[("whole", id(e[2]))] = e[2].tolist() == list(range(len(mats[e[1]])))
            if whole and g_mats[e[1]] is None and gm.shape == mats[e[1]].shape and gm.dtype == mats[e[1]].dtype:
                g_mats[e[1]] = gm  # no zeros and scatter: the cotangents are the group's, in its order
            else:
                _accumulate(g_mats, mats, e[1], bp._on(e[2], device), gm)
        if j:
            g = sum_to(mm2(elems[j].mH, g), partial[j - 1].shape)


def _accumulate(g_mats, mats, gid, positions, g) -> None:
    if g_mats[gid] is None:
        g_mats[gid] = torch.zeros_like(mats[gid])
    g_mats[gid].index_add_(0, positions, g.to(g_mats[gid].dtype))

"""The gate parameters of a light-cone program's variants as one ``[rows, P]`` table (``[rows, P, B]`` when
broadcast): every class gathers its members' columns from it with one indexing op."""

from __future__ import annotations

import torch

from ...._constants import literal
from ..._gates import typed_tensor
from ..._values import _differences


def parameter_rows(structure, rows: int, group, values) -> torch.Tensor:
    """``[rows, P]`` (``[rows, P, B]`` when broadcast) gate parameters of the circuit's variants ``group``
    (``rows``: the stack's rows, at least 1)."""
    n = structure.n_op_params
    real, device = values.real_dtype, values.device
    batch = structure.batch_size
    if rows == 1 and batch is None:
        row = _gathered_row(group[0], n, real, device)
        if row is not None:
            return row.unsqueeze(0)
    first = group[0].params[:n]
    row = [scalar(p, real, device) for p in first]
    if batch is not None:
        row = [p.expand(batch) if p.ndim == 0 else p for p in row]
    base = torch.stack(row) if row else torch.zeros((0,) if batch is None else (0, batch), dtype=real, device=device)
    if rows == 1:
        return base.unsqueeze(0)
    diff = {j: r for j, r in _differences(group).items() if j < n}
    table = base.expand(rows, *base.shape)
    if diff:
        r_idx = literal(tuple(r for j in diff for r in diff[j]), device, torch.long)  # (once per device)
        k_idx = literal(tuple(j for j in diff for _ in diff[j]), device, torch.long)
        vals = [scalar(group[r].params[j], real, device) for j in diff for r in diff[j]]
        if batch is not None:
            vals = [v.expand(batch) if v.ndim == 0 else v for v in vals]
        table = table.index_put((r_idx, k_idx), torch.stack(vals))
    return table


def _gathered_row(variant, n: int, real, device) -> torch.Tensor | None:
    """The variant's first ``n`` (gate) parameters as one ``[n]`` tensor read straight from its gather's
    inputs with one indexing op, where every one is a scalar element of an input (None otherwise): the
    parameters one by one would cost an unbind, a conversion per parameter and a stack, and as many
    autograd nodes (a 100-qubit QAOA: 250 of them, more than the cones' own backward)."""
    g = variant.gather
    if g is None or variant._params is not None:
        return None
    sizes = tuple(x.numel() for x in g.inputs)
    key = ("cone-row", n, sizes)
    plan = g.memo.get(key)
    if plan is None:
        maps = g.maps[:n]
        plan = False
        if all(m[0] != "const" and m[1].ndim == 0 for m in maps):
            sources = sorted({m[0] for m in maps})
            offsets, at = {}, 0
            for src in sources:
                offsets[src] = at
                at += sizes[src]
            plan = (sources, torch.tensor([offsets[m[0]] + int(m[1]) for m in maps], dtype=torch.long))
        g.memo[key] = plan
    if plan is False:
        return None
    sources, index = plan
    flat = [g.inputs[src].reshape(-1) for src in sources]
    flat = flat[0] if len(flat) == 1 else torch.cat(flat)
    return flat[g.index_on(index, flat.device)].to(device=device, dtype=real)


def row_sources(structure, rows: int, group) -> torch.Tensor | None:
    """Where each entry of ``parameter_rows``'s one row was gathered from (``[P]`` positions among the gather's
    inputs, on the host: equal positions, equal values), or None where that shows nothing: stacked or
    broadcast rows, computed parameters, or every position read once (a plain qnode's tape, whose
    ``2 * gamma[l]`` is a new tensor per gate, packed one position each: equal parameters show only in their
    values). Read after ``parameter_rows``, which plans the gather."""
    if rows != 1 or structure.batch_size is not None:
        return None
    variant = group[0]
    g = variant.gather
    if g is None or variant._params is not None:
        return None
    key = (structure.n_op_params, tuple(x.numel() for x in g.inputs))
    plan = g.memo.get(("cone-row", *key))
    if not plan:
        return None
    repeats = g.memo.get(("cone-row-repeats", *key))
    if repeats is None:  # once per plan, on the host
        index = plan[1]
        repeats = g.memo[("cone-row-repeats", *key)] = len(set(index.tolist())) < index.numel()
    return plan[1] if repeats else None


def scalar(p, real, device) -> torch.Tensor:
    """``p`` as a tensor of ``real`` on ``device``; a constant (a Python or numpy number) made once per device."""
    if isinstance(p, torch.Tensor):
        return p if p.dtype == real and p.device == device else p.to(device=device, dtype=real)
    return typed_tensor(p, real, device)


__all__ = ["parameter_rows", "row_sources", "scalar"]

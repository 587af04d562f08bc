"""Monomial gates on wide state vectors as permutations of their own wires' slices (``permute`` actions):
``2**k`` slice copies (or one ``index_select`` on adjacent wires) instead of a ``2**n`` int64 index table,
so a 24-wire circuit's CNOT layers cost no table memory and no planning time.
"""

from __future__ import annotations

import numpy as np
import torch

from .blocks import _full_monomial

MONOMIAL_TABLE_MAX_WIRES = 16
"""Monomial gates on circuits up to this wide become basis permutations of all ``2**n`` states (int64
tables, composed across consecutive gates: one gather each); on wider circuits each is a permutation of its
own wires' ``2**k`` slices (``apply_local_permutation``): a table of ``2**n`` int64 per step costs
128 MiB and about 0.4 s to build at 24 wires, and one per layer of a CNOT brickwork gigabytes; at 20 wires
the tables took 4-13 s to build for an 8-layer brickwork, which ran no faster with them (1.6-4.5 s a step
either way on the loaded 2-core machine)."""

LOCAL_PERMUTATION_MAX_WIRES = 10
"""On wide circuits, consecutive monomial gates whose wires span at most this many adjacent wires compose into
one permutation of that span (a ``2**k``-entry index, one ``index_select``): a CNOT brickwork layer on 24 wires
is then about five passes over the state, not one per gate."""



class LocalPermutation:
    """A monomial gate on ``wires`` as ``out[.., x_wires = j, ..] = phase[j] psi[.., x_wires = src[j], ..]``:
    ``2**k`` slice copies, no ``2**n`` index table. ``back``: the same form for the inverse (the state's walk
    back), ``back_h``: for the transpose (the conjugated cotangent's walk back: ``h_before = U^T h``)."""

    __slots__ = ("wires", "forward", "back", "back_h")

    def __init__(self, wires, forward, back, back_h):
        self.wires, self.forward, self.back, self.back_h = wires, forward, back, back_h


def local_permutation(wires, cols, vals, dtype) -> LocalPermutation:
    """The monomial ``U[j, cols[j]] = vals[j]`` on ``wires`` as a ``LocalPermutation`` (phases in ``dtype``,
    None where all are 1)."""
    cols = [int(c) for c in cols]
    vals = [complex(v) for v in vals]
    inv = [0] * len(cols)
    for j, c in enumerate(cols):
        inv[c] = j
    ones = all(v == 1 for v in vals)

    def phases(values):
        return None if ones else [complex(v) for v in values]

    return LocalPermutation(
        tuple(wires),
        (tuple(cols), phases(vals)),
        (tuple(inv), phases([vals[inv[i]].conjugate() for i in range(len(cols))])),
        (tuple(inv), phases([vals[inv[i]] for i in range(len(cols))])),
    )


def _slice_index(wires, j: int, n: int) -> tuple:
    """The index of the ``[2]*n + [rest]`` view that fixes ``wires`` to the bits of ``j`` (first wire most
    significant)."""
    index = [slice(None)] * n
    k = len(wires)
    for b, w in enumerate(wires):
        index[w] = (j >> (k - 1 - b)) & 1
    return tuple(index)


def apply_local_permutation(psi, wires, src, phase, n: int, differentiable: bool = False, out=None):
    """``out[.., x_wires = j, ..] = phase[j] psi[.., x_wires = src[j], ..]`` (``phase`` None: all 1). Adjacent
    wires: one ``index_select`` of the ``[2**q, 2**k, rest]`` view; others: one strided copy per local basis
    state (``differentiable``: torch ops that autograd records, no ``out``)."""
    k = len(wires)
    q = wires[0]
    if tuple(wires) == tuple(range(q, q + k)):
        view = psi.reshape(1 << q, 1 << k, -1)
        index = torch.as_tensor(src, device=psi.device)
        if differentiable:
            moved = view.index_select(1, index)
            if phase is not None:
                moved = moved * torch.as_tensor(phase, dtype=psi.dtype, device=psi.device)[None, :, None]
            return moved.reshape(psi.shape)
        res = torch.index_select(view, 1, index, out=None if out is None else out.view(view.shape))
        if phase is not None:
            res.mul_(torch.as_tensor(phase, dtype=psi.dtype, device=psi.device)[None, :, None])
        return res.view(psi.shape)
    view = psi.reshape(*(2,) * n, -1)
    if differentiable:
        parts = [view[_slice_index(wires, src[j], n)] * (1 if phase is None else phase[j]) for j in range(1 << k)]
        t = torch.stack(parts, 0).reshape(*(2,) * k, *parts[0].shape)
        return t.movedim(tuple(range(k)), tuple(wires)).reshape(psi.shape)
    res = torch.empty(psi.shape, dtype=psi.dtype, device=psi.device) if out is None else out
    target = res.view(*(2,) * n, -1)
    for j in range(1 << k):
        o = target[_slice_index(wires, j, n)]
        o.copy_(view[_slice_index(wires, src[j], n)])
        if phase is not None and phase[j] != 1:
            o.mul_(phase[j])
    return res


def monomials_span(gates) -> int:
    """How many adjacent wires the gates' wires span."""
    wires = [w for g in gates for w in g[0]]
    return max(wires) - min(wires) + 1


def monomials_composed(gates):
    """(wires, cols, vals) of the monomial gates applied in order: one gate as it is, several as one
    permutation of the adjacent wires they span."""
    if len(gates) == 1:
        return gates[0]
    lo = min(w for g in gates for w in g[0])
    k = monomials_span(gates)
    src, vals = np.arange(1 << k), np.ones(1 << k, dtype=complex)
    for wires, cols, v in gates:  # out[x] = c2 c1[P2] psi[P1[P2]], as the whole-state tables compose
        s2, c2 = _full_monomial(k, [w - lo for w in wires], cols, v)
        src, vals = src[s2], c2 * vals[s2]
    return tuple(range(lo, lo + k)), src, vals


def monomial_on(step, device):
    """A monomial step's (permutation, phase) on ``device`` (moved there once: the step keeps the copy), or
    None where it is the identity."""
    perm, phase = step.data
    if perm is None and phase is None:
        return None
    if perm is not None and perm[0].device != device:
        perm = (perm[0].to(device), perm[1].to(device))
        step.data = (perm, phase)
    if phase is not None and phase.device != device:
        phase = phase.to(device)
        step.data = (perm, phase)
    return perm, phase

"""Expectation values of a batch in the Heisenberg picture: when the data batch enters only in the product stage
(an embedding and the noise right after it, the usual QML circuit), the ``M`` observables are walked back
through the rest of the circuit instead of walking ``S x B`` density matrices forward, and then contracted
with the product state of every batch element.

``Tr(O S(rho)) = vec(O^T) . S vec(rho)``, so an observable steps back through each step's transpose (a unitary
``U`` becomes ``U^T`` on the ket wires and ``U^dagger`` on the bra wires; a channel its transposed
superoperator; a permutation its inverse). The walk costs ``M / (S B)`` of the forward one (NW1: 8 observables
against 128 samples); the final contraction of ``M`` vectors of ``4**n`` entries with ``n`` per-wire ``2 x 2``
density matrices is one einsum. Everything is torch ops, differentiable to any order.
"""

from __future__ import annotations

import string

import numpy as np
import opt_einsum
import torch
from pennylane.measurements import ExpectationMP

from ..._gates import typed_tensor
from .measure import _word_reader

HEISENBERG_MIN_RATIO = 2
"""The Heisenberg walk is used when the samples x stacked rows are at least this many times the observables."""

EXPRESSION_CACHE_SIZE = 64
"""Contraction expressions (one per structure and batch shape) kept before the cache is emptied."""

_LETTERS = string.ascii_letters


def heisenberg_applies(program, measurements, lead: int) -> bool:
    """Whether ``program``'s expectation values are cheaper walked back as observables (see the module notes)."""
    if program.preps or not measurements or lead < HEISENBERG_MIN_RATIO * len(measurements):
        return False
    if not all(isinstance(mp, ExpectationMP) and mp.obs is not None and mp.obs.pauli_rep is not None for mp in measurements):
        return False
    local = {si for slots in program.local.values() for si in slots}
    slots = program.structure.slots
    return all(si in local for si, s in enumerate(slots) if s.batched or si in program.stacked)


def observable_vectors(measurements, position: dict, n: int, dtype, device) -> torch.Tensor:
    """``vec(O_m^T)`` of every measured observable, ``[4**n, 1, M]`` (the layout of a density matrix with the
    observables as its batch axis)."""
    real_dtype = torch.empty((), dtype=dtype).real.dtype
    rows, cols, values = [], [], []
    for m, mp in enumerate(measurements):
        for word, c in mp.obs.pauli_rep.items():
            index, coef = _word_reader(dict(word), position, n)
            rows.append(torch.as_tensor(index, device=device))
            cols.append(torch.full((len(index),), m, device=device))
            values.append(torch.as_tensor(coef, dtype=dtype, device=device) * typed_tensor(c, real_dtype, device))
    o = torch.zeros(1 << (2 * n), len(measurements), dtype=dtype, device=device)
    o = o.index_put((torch.cat(rows), torch.cat(cols)), torch.cat(values), accumulate=True)
    return o.reshape(1 << (2 * n), 1, len(measurements))


def heisenberg_expvals(program, values, measurements, lead_shape) -> list[torch.Tensor]:
    """Every expectation value of the batch, each ``lead_shape``, by the observables' walk back."""
    n = program.n
    position = {w: i for i, w in enumerate(program.structure.sim_wires)}
    o = observable_vectors(measurements, position, n, values.dtype, values.device)
    for step in reversed(program.steps):
        o = program.apply_step(o, values, step, transpose=True)
    S = lead_shape[0] if program.stacked else 1
    B = program.structure.batch_size or 1
    ket, bra = _LETTERS[:n], _LETTERS[n : 2 * n]
    m, s, b = _LETTERS[2 * n : 2 * n + 3]
    layout = "".join(k + r for k, r in zip(ket, bra))  # evolve's interleaved order
    terms, operands = [layout + m], [o.reshape(*(2,) * (2 * n), -1)]
    for (w,), block in program._blocks(values):
        terms.append(s + b + ket[w] + bra[w])
        operands.append(block.expand(S, B, 2, 2))
    eq = ",".join(terms) + "->" + m + s + b
    out = _contraction(eq, tuple(tuple(t.shape) for t in operands))(*operands, backend="torch").real
    return [r.reshape(lead_shape) for r in out.unbind(0)]


_EXPRESSIONS: dict = {}


def _contraction(eq: str, shapes: tuple):
    """opt_einsum's contraction of ``eq`` for these shapes, its path found once (``torch.einsum`` searches a
    many-operand path again on every call)."""
    key = (eq, shapes)
    expr = _EXPRESSIONS.get(key)
    if expr is None:
        if len(_EXPRESSIONS) > EXPRESSION_CACHE_SIZE:
            _EXPRESSIONS.clear()
        expr = _EXPRESSIONS[key] = opt_einsum.contract_expression(eq, *shapes, optimize="greedy")
    return expr

"""Expectation values of a batch in the Heisenberg picture: when the data batch enters only in the product stage
(an embedding and the noise right after it, the usual QML circuit), the ``M`` observables are walked back
through the rest of the circuit instead of walking ``S x B`` density matrices forward, and then contracted
with the product state of every batch element.

``Tr(O S(rho)) = vec(O^T) . S vec(rho)``, so an observable steps back through each step's transpose (a unitary
``U`` becomes ``U^T`` on the ket wires and ``U^dagger`` on the bra wires; a channel its transposed
superoperator; a permutation its inverse). The walk costs ``M / (S B)`` of the forward one (NW1: 8 observables
against 128 samples). The walk runs in the Pauli basis, in real arithmetic, where ``pauli.PauliWalk`` applies
(every permutation step Clifford), and its end is contracted with every sample's per-wire Bloch vectors
(``pauli.product_expvals``: two half-width Kronecker products and one GEMM). Everything is torch ops,
differentiable to any order.
"""

from __future__ import annotations

import torch
from pennylane.measurements import ExpectationMP
from torch.utils.checkpoint import checkpoint

from .....errors import ContractionTooLargeError
from ..._gates import typed_tensor
from ..network.plan import _fmt_bytes
from .measure import _word_reader
from .coefficients import real_coefficient
from .pauli import _paired, bloch_vectors, observable_terms, product_expvals, to_pauli
from .sparse_walk import sparse_start

HEISENBERG_MIN_RATIO = 2
"""The Heisenberg walk is used when the samples x stacked rows are at least this many times the observables."""

PAULI_WALK_MIN_RATIO = 0.5
"""The same where the walk runs in the Pauli basis: a real vector a quarter of a complex density matrix's flops
(NW1 at batch 8, 8 observables: 0.8 s a step walked back against 1.8 s forward, load 6)."""


WALK_WORKING_COPIES = 4
"""Observable-sized tensors a walk step needs beside the ones reverse mode keeps (its input, its output, a
matmul's reshaped copy, the gradient flowing back)."""


def heisenberg_applies(program, measurements, lead: int) -> bool:
    """Whether ``program``'s expectation values are cheaper walked back as observables (see the module notes), or
    the only way that fits: a density matrix over ``max_memory`` with a Pauli walk possible."""
    if program.preps or not measurements:
        return False
    if not all(isinstance(mp, ExpectationMP) and mp.obs is not None and mp.obs.pauli_rep is not None for mp in measurements):
        return False
    local = {si for slots in program.local.values() for si in slots}
    slots = program.structure.slots
    if not all(si in local for si, s in enumerate(slots) if s.batched or si in program.stacked):
        return False
    if lead < PAULI_WALK_MIN_RATIO * len(measurements) and not program.peak_bytes(lead) > program.max_memory:
        return False  # (checked before the walk's Clifford test: that one costs 2**n per wire)
    walk = program.pauli_walk()
    if walk.applies:
        return True
    return lead >= HEISENBERG_MIN_RATIO * len(measurements)


def observable_vectors(measurements, position: dict, n: int, dtype, device) -> torch.Tensor:
    """``vec(O_m^T)`` of every measured observable, ``[4**n, 1, M]`` (the layout of a density matrix with the
    observables as its batch axis)."""
    real_dtype = dtype.to_real()
    rows, cols, values = [], [], []
    for m, mp in enumerate(measurements):
        for word, c in mp.obs.pauli_rep.items():
            index, coef = _word_reader(dict(word), position, n)
            rows.append(torch.as_tensor(index, device=device))
            cols.append(torch.full((len(index),), m, device=device))
            values.append(torch.as_tensor(coef, dtype=dtype, device=device) * typed_tensor(real_coefficient(c), real_dtype, device))
    o = torch.zeros(1 << (2 * n), len(measurements), dtype=dtype, device=device)
    o = o.index_put((torch.cat(rows), torch.cat(cols)), torch.cat(values), accumulate=True)
    return o.reshape(1 << (2 * n), 1, len(measurements))


def heisenberg_expvals(program, values, measurements, lead_shape) -> list[torch.Tensor]:
    """Every expectation value of the batch, each ``lead_shape``, by the observables' walk back (in the Pauli
    basis where ``pauli.PauliWalk`` applies, else in the computational basis) and one contraction with the
    samples' Bloch vectors."""
    n = program.n
    position = {w: i for i, w in enumerate(program.structure.sim_wires)}
    walk = program.pauli_walk()
    S = lead_shape[0] if program.stacked else 1
    B = program.structure.batch_size or 1
    blocks = sorted(program._blocks(values), key=lambda item: item[0])
    bloch = [bloch_vectors(block.expand(S, B, 2, 2)).reshape(S * B, 4) for _, block in blocks]
    if walk.applies:
        real = values.dtype.to_real()
        keys, coef = observable_terms(measurements, position, n, real, values.device)
        out = walked_expvals(walk, keys, len(measurements), coef, values, [b.to(real) for b in bloch], program.max_memory)
    else:
        o = observable_vectors(measurements, position, n, values.dtype, values.device)
        _check_walk_memory(n, len(measurements), len(program.steps) + WALK_WORKING_COPIES, values.dtype.itemsize,
                           program.max_memory, "computational-basis")
        for step in reversed(program.steps):
            o = program.apply_step(o, values, step, transpose=True)
        o = to_pauli(o, n)
        out = product_expvals(o, [b.to(o.dtype) for b in bloch], n)
    return [r.reshape(lead_shape) for r in out.unbind(0)]


def walked_expvals(walk, keys, m: int, coef: torch.Tensor, values, bloch: list[torch.Tensor],
                   max_memory: float) -> torch.Tensor:
    """``[M, L]`` expectation values of the ``m`` observables (``pauli.observable_terms``: their strings ``keys``
    and coefficients ``coef``) walked back by ``walk`` and contracted with the samples' Bloch vectors.

    The walk starts sparse (``sparse_walk``: the strings reached, while they stay few) and goes on dense.
    Memory of the dense rest: where reverse mode would keep every matrix step's input for all ``M`` observables
    and that exceeds ``max_memory``, the observables walk in chunks, each under ``torch.utils.checkpoint`` (the
    forward keeps only the chunk's ``[c, L]`` values; the backward walks the chunk again with its graph, then frees
    it). A chunk of one observable that still does not fit is refused, before the walk, with its size."""
    n, itemsize, samples = walk.n, coef.dtype.itemsize, bloch[0].shape[0]
    ops = walk.operators(values, coef.dtype)
    start = sparse_start(walk, ops, keys, m, values.group[0].tape.operations)
    sparse_bytes = start.call_bytes(itemsize, samples)
    if sparse_bytes > max_memory:
        raise ContractionTooLargeError(
            f"The sparse Pauli walk of this noisy circuit on {n} wires needs about {_fmt_bytes(sparse_bytes)} "
            f"({start.map_entries} weighted coefficients x 2 x {itemsize} bytes, and its end's {samples} samples x "
            f"strings products), above max_memory={_fmt_bytes(max_memory)}. Raise the device's max_memory."
        )
    coef = start.walk(coef, ops)
    if start.steps == len(ops):
        return start.expvals(coef, bloch, max_memory - sparse_bytes)
    rest = ops[start.steps:]
    recording = torch.is_grad_enabled() and any(t.requires_grad for t in _tensors(rest, bloch, coef))
    matrices = sum(len(_paired(a)) if kind == "run" else kind == "matrix" for kind, a, _ in rest)
    kept = matrices + 1 if recording else 0  # + the end's contraction
    per_observable = (kept + WALK_WORKING_COPIES) * (1 << (2 * n)) * itemsize
    budget = max_memory - walk.table_bytes() - sparse_bytes
    chunk = min(m, int(budget // per_observable)) if budget > 0 else 0
    if chunk < 1:
        _check_walk_memory(n, 1, kept + WALK_WORKING_COPIES, itemsize, budget, "Pauli-basis",
                           walk.table_bytes() + sparse_bytes)

    def walk_and_contract(coef, *leaves, first=0, stop=m):
        return product_expvals(walk.apply(start.dense(coef, first, stop), rest), list(leaves), n)

    if chunk >= m:
        return walk_and_contract(coef, *bloch)
    bounds = [(a, min(a + chunk, m)) for a in range(0, m, chunk)]
    if not recording:
        return torch.cat([walk_and_contract(coef, *bloch, first=a, stop=b) for a, b in bounds], 0)
    return torch.cat([checkpoint(walk_and_contract, coef, *bloch, first=a, stop=b, use_reentrant=False)
                      for a, b in bounds], 0)


def _tensors(ops, bloch, coef):
    yield coef
    yield from bloch
    for kind, a, _ in ops:
        if kind == "run":
            yield from a.values()
        elif kind == "matrix":
            yield a


def _check_walk_memory(n: int, observables: int, copies: int, itemsize: int, budget: float, basis: str,
                       tables: int = 0) -> None:
    need = (1 << (2 * n)) * observables * copies * itemsize
    if need > budget:
        raise ContractionTooLargeError(
            f"The {basis} Heisenberg walk of this noisy circuit on {n} wires needs about {_fmt_bytes(need + tables)} "
            f"(4**{n} x {observables} observable(s) x {copies} kept copies x {itemsize} bytes"
            + (f", + {_fmt_bytes(tables)} of Clifford tables" if tables else "")
            + f"), above max_memory={_fmt_bytes(budget + tables)}. Use fewer wires, or raise the device's max_memory."
        )

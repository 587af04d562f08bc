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

from ..._gates import typed_tensor
from .measure import _word_reader
from .pauli import bloch_vectors, observable_coefficients, product_expvals, to_pauli

HEISENBERG_MIN_RATIO = 2
"""The Heisenberg walk is used when the samples x stacked rows are at least this many times the observables."""

PAULI_WALK_MIN_RATIO = 0.5
"""The same where the walk runs in the Pauli basis: a real vector a quarter of a complex density matrix's flops
(NW1 at batch 8, 8 observables: 0.8 s a step walked back against 1.8 s forward, load 6)."""


def heisenberg_applies(program, measurements, lead: int) -> bool:
    """Whether ``program``'s expectation values are cheaper walked back as observables (see the module notes)."""
    if program.preps or not measurements:
        return False
    if not all(isinstance(mp, ExpectationMP) and mp.obs is not None and mp.obs.pauli_rep is not None for mp in measurements):
        return False
    local = {si for slots in program.local.values() for si in slots}
    slots = program.structure.slots
    if not all(si in local for si, s in enumerate(slots) if s.batched or si in program.stacked):
        return False
    ratio = PAULI_WALK_MIN_RATIO if program.pauli_walk().applies else HEISENBERG_MIN_RATIO
    return lead >= ratio * len(measurements)


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
    """Every expectation value of the batch, each ``lead_shape``, by the observables' walk back (in the Pauli
    basis where ``pauli.PauliWalk`` applies, else in the computational basis) and one contraction with the
    samples' Bloch vectors."""
    n = program.n
    position = {w: i for i, w in enumerate(program.structure.sim_wires)}
    walk = program.pauli_walk()
    if walk.applies:
        real = values.dtype.to_real()
        o = walk.walk(observable_coefficients(measurements, position, n, real, values.device), values)
    else:
        o = observable_vectors(measurements, position, n, values.dtype, values.device)
        for step in reversed(program.steps):
            o = program.apply_step(o, values, step, transpose=True)
        o = to_pauli(o, n)
    S = lead_shape[0] if program.stacked else 1
    B = program.structure.batch_size or 1
    blocks = sorted(program._blocks(values), key=lambda item: item[0])
    bloch = [bloch_vectors(block.expand(S, B, 2, 2)).reshape(S * B, 4).to(o.dtype) for _, block in blocks]
    out = product_expvals(o, bloch, n)
    return [r.reshape(lead_shape) for r in out.unbind(0)]

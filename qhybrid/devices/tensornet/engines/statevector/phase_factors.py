"""A diagonal run's phase table as per-gate products over the high and low halves of the wires.

A run of Z-type gates (RZ, IsingZZ, MultiRZ, CRZ, PhaseShift, ...) has the phase exponent ``L(x) = sum_g theta_g
T[g, x]`` with every column a product of one factor per wire (a sign or a bit), so split over the wire halves
``x = (hi, lo)`` it is ``T[g] = outer(U[g], V[g])``. The dense table is ``2**n`` entries a gate, read once a step
each way (12.6 MB at 2**16 amplitudes and 24 gates); the factors are ``2**(n/2)`` a gate and ``L`` is one small
product, ``U^T diag(theta) V`` (``statevector.diagonal``, ``lightcone.stacked_node``).

>>> import numpy as np
>>> z = 1 - 2 * ((np.arange(16) >> 3) & 1) * 1.0  # Z on wire 0 of 4
>>> U, V = factored((0.5 * z)[None, None], 4)
>>> np.array_equal(np.outer(U[0, 0], V[0, 0]).reshape(-1), 0.5 * z)
True
"""

from __future__ import annotations

import numpy as np


def factored(table: np.ndarray, n: int) -> tuple:
    """A diagonal run's phase table ``[S, G, 2**n]`` as ``(U [S, G, 2**h], V [S, G, 2**(n-h)])`` with
    ``table[s, g] = outer(U[s, g], V[s, g])`` over the high and low halves of the wires, where every gate's
    column is such a product (Z-type gates are: a sign or bit per wire), else ``(table,)``. The dense table is
    read once a step each way (12.6 MB at 2**16 amplitudes and 24 gates); the factors fit in cache and the phases
    come from one small product (``stacked_node._phases``)."""
    h = n // 2
    if h == 0:
        return (table,)
    S, G, _ = table.shape
    M = table.reshape(S, G, 1 << h, 1 << (n - h))
    U = np.zeros((S, G, 1 << h))
    V = np.zeros((S, G, 1 << (n - h)))
    for s in range(S):
        for g in range(G):
            m = M[s, g]
            at = np.argwhere(m != 0)
            if not len(at):
                continue
            i, j = at[0]
            U[s, g], V[s, g] = m[:, j], m[i] / m[i, j]
    if not np.array_equal(np.einsum("sgi,sgj->sgij", U, V), M):
        return (table,)
    return U, V


PHASE_TABLE_MAX_VALUES = 64
"""A run whose gates all read one angle ``theta`` has ``L = theta C``, ``C`` its table summed over the gates; where
``C`` takes at most this many values (a QAOA cost layer: G16's 24 edges 20, a p=2 light cone's 6 to 14), its
phases are those values' ``exp(i theta c)`` taken at ``phase_values``' codes (``statevector.diagonal``,
``lightcone.stacked_node``), not a product with the table and ``exp(i L)`` over the whole state."""


def phase_values(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, codes)`` of a summed table: ``C == values[codes]`` (callers compare ``len(values)`` with
    ``PHASE_TABLE_MAX_VALUES`` where they use it, so that a cached pair serves whatever the bound).

    >>> phase_values(np.array([-1.5, 0.5, 0.5, -1.5]))
    (array([-1.5,  0.5]), array([0, 1, 1, 0]))
    """
    values, codes = np.unique(C, return_inverse=True)
    return values, codes.reshape(C.shape)


__all__ = ["factored", "phase_values", "PHASE_TABLE_MAX_VALUES"]

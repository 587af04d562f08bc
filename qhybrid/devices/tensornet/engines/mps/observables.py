"""Observables as sums of terms an MPS reads cheaply.

A term is ``(coefficient, factors)``; each factor ``(sites, matrix)`` in operator order. Terms whose factors
are all one-site become a product of one-site operators (one transfer sweep over their span, any span);
others are read from the reduced density matrix of their few sites. Coefficients stay what the observable
holds (torch tensors keep their gradient).
"""

from __future__ import annotations

import pennylane as qml
import torch

from .....errors import UnsupportedOperationError
from ..._gates import constant_matrix, generic_matrix

Term = tuple[object, list]


def observable_terms(obs, site_of: dict, dtype, device) -> list[Term]:
    """``obs`` as a list of terms (see the module); ``site_of`` maps wire labels to sites."""
    if isinstance(obs, qml.ops.SProd):
        return [(_times(obs.scalar, c), f) for c, f in observable_terms(obs.base, site_of, dtype, device)]
    if isinstance(obs, qml.ops.Sum):
        return [t for op in obs.operands for t in observable_terms(op, site_of, dtype, device)]
    if isinstance(obs, qml.ops.Prod):
        terms: list[Term] = [(1.0, [])]
        for op in obs.operands:
            sub = observable_terms(op, site_of, dtype, device)
            terms = [(_times(c1, c2), f1 + f2) for c1, f1 in terms for c2, f2 in sub]
        return terms
    if isinstance(obs, qml.Identity):
        return [(1.0, [])]
    try:
        mat = constant_matrix(obs, dtype, device) if not obs.data else generic_matrix(obs, obs.data, dtype, device)
    except qml.operation.MatrixUndefinedError as exc:
        raise UnsupportedOperationError(
            f"method='mps' reads observables with a matrix; {obs.name} on wires {obs.wires.tolist()} has none."
        ) from exc
    return [(1.0, [(tuple(site_of[w] for w in obs.wires), mat)])]


def _times(a, b):
    if isinstance(a, float) and a == 1.0:
        return b
    if isinstance(b, float) and b == 1.0:
        return a
    return a * b


def one_site_product(factors: list) -> dict[int, torch.Tensor] | None:
    """The factors as ``{site: matrix}`` (matrices on one site multiplied in operator order), or None where
    a factor spans several sites."""
    ops: dict[int, torch.Tensor] = {}
    for sites, mat in factors:
        if len(sites) != 1:
            return None
        s = sites[0]
        ops[s] = mat if s not in ops else ops[s] @ mat
    return ops


def dense_on(factors: list, sites: list[int], dtype, device) -> torch.Tensor:
    """The product of ``factors`` as one matrix on ascending ``sites`` (first the most significant bit)."""
    k = len(sites)
    pos = {s: j for j, s in enumerate(sites)}
    out = torch.eye(1 << k, dtype=dtype, device=device).reshape((2,) * (2 * k))
    for fsites, mat in factors:
        m = len(fsites)
        t = mat.reshape((2,) * (2 * m))
        rows = [pos[s] for s in fsites]
        # out <- F @ out: contract F's column legs with out's row legs at ``rows``
        out = torch.tensordot(t, out, dims=(list(range(m, 2 * m)), rows))
        # tensordot put F's row legs first, then out's remaining legs in order: move them back
        remaining = [j for j in range(2 * k) if j not in rows]
        perm = [0] * (2 * k)
        for idx, j in enumerate(rows):
            perm[j] = idx
        for idx, j in enumerate(remaining):
            perm[j] = m + idx
        out = out.permute(perm)
    return out.reshape(1 << k, 1 << k)


def term_sites(factors: list) -> list[int]:
    return sorted({s for sites, _ in factors for s in sites})


def squared(terms: list[Term]) -> list[Term]:
    """The terms of ``O @ O`` for ``O`` the sum of ``terms`` (for the variance)."""
    return [(_times(c1, c2), f1 + f2) for c1, f1 in terms for c2, f2 in terms]

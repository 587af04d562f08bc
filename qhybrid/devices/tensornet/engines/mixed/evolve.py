"""Density-matrix steps on a ``[4**n, S, B]`` tensor: the vectorised ``rho`` as a state of ``2 n`` wires, wire ``w``'s
ket bit at position ``2 w`` and its bra bit at ``2 w + 1`` (interleaved: ``rho[k, b]`` at row ``interleave(k, b)``),
stack and batch last.

A unitary ``U`` on wires ``W`` is ``U`` on the ket wires and ``conj(U)`` on the bra wires: the pure engine's
kernels (``engines.statevector.kernels``) applied twice, never the ``4**k`` superoperator of a unitary. A channel
is its superoperator (``channels``) on the ket and bra wires together; for one wire those are adjacent, so it is
one matmul of a ``4 x 4`` matrix with no transposed copy of the state. The initial state is a product of one
``2 x 2`` density matrix per wire (the single-wire operators that come before a wire's first multi-wire operator
act there), or of a prepared state's block.
"""

from __future__ import annotations

import string
from typing import Sequence

import numpy as np
import torch

from ..statevector import kernels

_LETTERS = string.ascii_letters


def apply_matrix(rho: torch.Tensor, m: torch.Tensor, wires: Sequence[int], n: int, lead: bool,
                 real: bool = False) -> torch.Tensor:
    """``m`` (``[D, D]``, or ``[S|1, B|1, D, D]`` with ``lead``) on ``wires`` of the ``n``-wire state ``rho``:
    one matmul where the wires are adjacent and ascending, else an einsum (``real``: ``m`` is real-valued by
    construction, known from the plan: a large ``rho`` may then take a real GEMM)."""
    k = len(wires)
    q = wires[0]
    if tuple(wires) == tuple(range(q, q + k)):
        if lead:
            return kernels.apply_lead(rho, m, q, k)
        return kernels.apply_plain(rho, m, q, k, real)
    return kernels.apply_scattered(rho, m, list(wires), n, lead)


def apply_unitary(rho: torch.Tensor, u: torch.Tensor, wires: Sequence[int], n: int, lead: bool,
                  real: bool = False) -> torch.Tensor:
    """``U rho U^dagger`` on the density matrix of ``n`` wires (``U`` on ket wires, ``conj(U)`` on bra wires)."""
    rho = apply_matrix(rho, u, [2 * w for w in wires], 2 * n, lead, real)
    return apply_matrix(rho, u.conj(), [2 * w + 1 for w in wires], 2 * n, lead, real)


def apply_superoperator(rho: torch.Tensor, s: torch.Tensor, wires: Sequence[int], n: int, lead: bool,
                        real: bool = False) -> torch.Tensor:
    """A channel's superoperator ``s`` (``[4**k, 4**k]``, ket bits then bra bits) on ``wires`` of ``rho``."""
    return apply_matrix(rho, s, [2 * w for w in wires] + [2 * w + 1 for w in wires], 2 * n, lead, real)


def apply_monomial(rho: torch.Tensor, src: torch.Tensor, phases: torch.Tensor | None, n: int) -> torch.Tensor:
    """A basis permutation with phases on both sides of ``rho``: ``src`` / ``phases`` are its action on the
    ``4**n`` rows (``monomial_rows``), one gather (and one multiply where some phase is not 1)."""
    out = _Gather.apply(rho, 0, src, _inverse(src))
    if phases is not None:
        out = out * phases.reshape(-1, *(1,) * (rho.ndim - 1))
    return out


def spread(x: np.ndarray, n: int) -> np.ndarray:
    """Bit ``j`` of ``x`` (``n`` bits) moved to bit ``2 j``."""
    out = np.zeros_like(x)
    for j in range(n):
        out |= ((x >> j) & 1) << (2 * j)
    return out


def interleave(k: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Rows of the entries ``rho[k, b]`` in the interleaved layout."""
    return (spread(k, n) << 1) | spread(b, n)


def monomial_rows(src: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A basis permutation ``psi'[x] = vals[x] psi[src[x]]`` of ``n`` wires as its action on the density
    matrix's ``4**n`` rows: ``rho'[k, b] = vals[k] conj(vals[b]) rho[src[k], src[b]]``."""
    d = 1 << n
    k, b = np.divmod(np.arange(d * d), d)
    rows = np.empty(d * d, dtype=np.int64)
    rows[interleave(k, b, n)] = interleave(src[k], src[b], n)
    phases = np.empty(d * d, dtype=complex)
    phases[interleave(k, b, n)] = vals[k] * np.conj(vals[b])
    return rows, phases


_INVERSES: dict = {}


def _inverse(src: torch.Tensor) -> torch.Tensor:
    """The inverse permutation of ``src`` (kept beside it: a program reuses its permutations every call)."""
    key = (src.data_ptr(), src.numel(), str(src.device))
    hit = _INVERSES.get(key)
    if hit is None or hit[0] is not src:
        inv = torch.empty_like(src)
        inv[src] = torch.arange(src.numel(), device=src.device)
        if len(_INVERSES) > 256:
            _INVERSES.clear()
        hit = _INVERSES[key] = (src, inv)
    return hit[1]


class _Gather(torch.autograd.Function):
    """``x.index_select(dim, perm)`` for a permutation, whose backward is the inverse gather (not a scatter-add)."""

    @staticmethod
    def forward(x, dim, perm, inverse):
        return x.index_select(dim, perm)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim, ctx.perm, ctx.inverse = inputs[1], inputs[2], inputs[3]

    @staticmethod
    def backward(ctx, g):
        return _Gather.apply(g, ctx.dim, ctx.inverse, ctx.perm), None, None, None


def local_unitary(rho: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``U rho U^dagger`` on small density matrices ``[..., D, D]`` (lead axes broadcast)."""
    return u @ rho @ u.mH


def local_superoperator(rho: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """A superoperator ``[..., D*D, D*D]`` on small density matrices ``[..., D, D]``."""
    d = rho.shape[-1]
    lead = torch.broadcast_shapes(rho.shape[:-2], s.shape[:-2])
    vec = rho.reshape(*rho.shape[:-2], d * d, 1)
    return (s @ vec).reshape(*lead, d, d)


def product_density(blocks: Sequence[tuple[tuple[int, ...], torch.Tensor]], n: int, S: int, B: int) -> torch.Tensor:
    """``[4**n, S, B]`` density matrix of a product of blocks ``(wires, rho_block)`` covering every wire once,
    each block ``[S|1, B|1, D, D]``: one einsum of the outer product, ket letters before bra letters."""
    if all(len(wires) == 1 for wires, _ in blocks):  # one wire each, in wire order: Kronecker products
        out = None
        for (w,), block in sorted(blocks, key=lambda item: item[0]):
            vec = block.expand(S, B, 2, 2).reshape(S, B, 4)
            out = vec if out is None else (out[..., :, None] * vec[..., None, :]).reshape(S, B, -1)
        return out.permute(2, 0, 1).contiguous()
    ket, bra = _LETTERS[:n], _LETTERS[n : 2 * n]
    s, b = _LETTERS[2 * n], _LETTERS[2 * n + 1]
    out = "".join(k + r for k, r in zip(ket, bra))
    terms, operands = [], []
    for wires, block in blocks:
        k = len(wires)
        operands.append(block.expand(S, B, *block.shape[2:]).reshape(S, B, *(2,) * (2 * k)))
        terms.append(s + b + "".join(ket[w] for w in wires) + "".join(bra[w] for w in wires))
    eq = ",".join(terms) + "->" + out + s + b
    return torch.einsum(eq, *operands).reshape(1 << (2 * n), S, B)

"""Exact moves of the orthogonality centre by QR, with the backward of the product ``Q (Q^H theta)``.

A centre move factors one site ``theta = Q R`` without truncating: ``Q`` stays as the isometric site and ``R``
goes into the neighbour. Nothing downstream sees ``Q`` and ``R`` other than through their product up to a
unitary gauge ``(Q W, W^H R)``, so only the part of the QR derivative that is not gauge counts (as in
:mod:`.svd`): ``d theta = Q g_R + (I - Q Q^H) g_Q R^{-H}``. For a wide or square block ``Q`` is unitary and
the second term vanishes; for a tall one it needs ``R`` invertible. A tall block with a (numerically)
singular ``R`` — a padded bond, whose Schmidt rank is below its size — takes the SVD split instead, whose
broadened ``1/s`` handles the zero values. With bonds fixed by structure (``cutoff=0``: ``fixed``) nothing may be
read back, so the choice is made from the shape alone: wide and square blocks by QR (no check needed), tall ones
by the SVD split (a padded bond's R is singular, and only a read could tell).

QR is about 3.5x cheaper than ``torch.linalg.svd`` on the ``[128, 64]`` complex blocks of a saturated chain
at bond 64 (one CPU thread: 0.8 vs 2.9 ms).
"""

from __future__ import annotations

import torch

from .first_order import first_order_only
from .svd import split

QR_DEVICES = frozenset({"cpu"})
"""Where centre moves use QR. Choosing between QR and the SVD needs the rank check's answer on the host,
a synchronisation per move on a GPU: there the SVD split (batched, no check) is kept."""

RANK_TOL = {torch.float64: 1e-10, torch.complex128: 1e-10, torch.float32: 1e-5, torch.complex64: 1e-5}
"""A tall block whose smallest ``|R_ii|`` is below this times its largest is treated as rank deficient (an
exactly singular ``R`` has a zero on its diagonal; Householder QR leaves about eps there): the SVD split
takes it."""


class _QR(torch.autograd.Function):
    """``theta [B, m, n] -> (Q [B, m, k], R [B, k, n])``, k = min(m, n); backward as in the module."""

    @staticmethod
    def forward(ctx, theta, factors):
        ctx.save_for_backward(*factors)
        return factors  # computed by the caller, which checks R first

    @staticmethod
    @first_order_only  # create_graph=True is refused by name (first_order.py)
    def backward(ctx, g_q, g_r):
        q, r = ctx.saved_tensors
        out = q @ g_r if g_r is not None else torch.zeros(*q.shape[:-1], r.shape[-1], dtype=q.dtype, device=q.device)
        if g_q is not None and q.shape[-2] > q.shape[-1]:
            y = g_q - q @ (q.mH @ g_q)
            out = out + torch.linalg.solve_triangular(r.mH, y, upper=False, left=False)
        return out, None


def _full_rank(r: torch.Tensor) -> bool:
    d = r.diagonal(dim1=-2, dim2=-1).abs()
    tol = RANK_TOL.get(r.dtype, 1e-10)
    return bool((d.min(-1).values > tol * d.max(-1).values).all())


def _flushed(block: torch.Tensor) -> torch.Tensor:
    """``block`` with entries below the square root of the dtype's smallest normal number set to zero. MKL's
    Householder QR returned NaN for ``Q`` and ``R`` of a rank-one complex block whose other entries fell to
    1e-320 (an exactly reachable MPS site, found by fuzzing; NumPy's QR was finite): such entries are zero to any
    result in that precision, and without them the factorization is finite. No value is read back."""
    tiny = torch.finfo(block.dtype.to_real()).tiny ** 0.5
    return torch.where(block.abs() < tiny, 0.0, block)


def exact_split(theta: torch.Tensor, centre: str, fixed: bool = False) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``theta`` ``[B, m, n]`` as ``left @ right`` without truncation; ``centre="right"``: ``left`` is an
    isometry, ``"left"``: ``right`` is a co-isometry. Returns left, right and the bond size, ``min(m, n)``.
    ``fixed``: choose QR or the SVD from the shape alone, reading no value (see the module).

    >>> theta = torch.randn(1, 8, 4, dtype=torch.complex128)
    >>> left, right, k = exact_split(theta, "right")
    >>> torch.allclose(left @ right, theta), k
    (True, 4)
    """
    if centre == "left":
        right, left, k = exact_split(theta.mH, "right", fixed)
        return left.mH, right.mH, k
    m, n = theta.shape[-2:]
    if theta.device.type in QR_DEVICES and not (fixed and m > n):
        q, r = torch.linalg.qr(_flushed(theta.detach()))
        if m <= n or _full_rank(r):
            q, r = _QR.apply(theta, (q, r))
            return q, r, q.shape[-1]
    left, right, _, k = split(theta, None, 0.0, "right")
    return left, right, k

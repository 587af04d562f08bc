"""The truncated split every MPS update is made of, with a backward that stays exact on degenerate spectra
and finite on vanishing singular values.

A split writes a block ``theta`` as ``U_k @ (U_k^H theta)``: ``U_k``, the ``k`` leading left singular vectors,
is the new isometric site, and ``U_k^H theta`` (renormalised when singular values were dropped) carries the
norm. Differentiating through ``torch.linalg.svd`` divides by ``s_j^2 - s_i^2`` for every pair and by
``s_i``: MPS of symmetric circuits have exactly degenerate Schmidt spectra (an ``IsingZZ`` layer on |+...+>)
and padded bonds have zero singular values, where torch's backward gives NaN/Inf or refuses. Here
:class:`_Split` differentiates ``U_k`` and ``U_k^H theta`` together, and because the second follows the
first the product is unchanged by any rotation ``U_k -> U_k W`` of the kept basis: the kept-kept block of the SVD
gradient is pure gauge and is dropped exactly (no ``1/(s_i - s_j)`` between kept values). What remains are
the pairs of a kept and a dropped value (the rotation of the kept subspace, Wan & Zhang 2019,
arXiv:1909.02659, eq. for dU) and, for tall blocks, ``1/s_i`` of kept values; both reciprocals are broadened
to Lorentzians ``1/x -> x / (x^2 + eps)`` (Liao, Liu, Wang & Xiang, PRX 9, 031041 (2019)), the pairs' relative
to their own scale, which changes nothing unless a kept and a dropped value tie or a kept value is zero
(where no gradient exists). Pairs whose kept value is at noise level get no term: at a cap that only cuts
among zero Schmidt values (padded bonds) the gradient is then the exact state's (see :data:`NOISE_FLOOR`).

With nothing dropped and ``m <= n`` the gradient is exactly ``U g_right``: the one of the exact state.
"""

from __future__ import annotations

import torch

from .first_order import first_order_only

PAIR_BROADENING = {torch.float64: 1e-12, torch.float32: 1e-8}
"""eps of the Lorentzian for a kept and a dropped value, ``x = s_i^2 - s_j^2``, relative to the pair's scale
``d = s_i^2 + s_j^2``: ``1/x -> x / (x^2 + eps d^2)``. Only a near-tie at the cut (relative gap below about
sqrt(eps), where the truncated state jumps) gets a capped, finite term; a small kept value against a zero
(``x = d``) keeps ``1/x`` to eps relative (an absolute eps bends it: by 6% for s_i = 2e-3 against eps = 1e-12,
which made the gradients at a cap that only cuts zero Schmidt values 1e-5 off, mps2.md)."""

NOISE_FLOOR = {torch.float64: 1e-16, torch.float32: 1e-7}
"""A kept ``s^2`` below this times ``s_max^2`` is noise (the Gram route's eigenvalues carry an absolute error
of about eps ``s_max^2``): its pairs with the dropped values, noise too, get no term. Their ``1/x`` is
unbounded where the factors it multiplies are noise, and the term is zero for every perturbation the
state can follow (one that keeps a zero Schmidt value zero to first order)."""

GRAM_DTYPES = frozenset({torch.float64, torch.complex128})
"""Dtypes whose wide and square blocks are factored by the Gram route: ``eigh(theta theta^H)`` gives ``U``, and
``U^H theta`` the rest, about 1.3x faster than ``torch.linalg.svd`` at 128x128 complex on one CPU thread. ``U``
is unitary to machine precision whatever the spectrum, so ``U (U^H theta)`` is exact and the kept part is the
projection on the leading eigenvectors. The singular values are the row norms of ``U^H theta``, exact to about
eps * s_max (a zero reads 1e-15, where the eigenvalues' square roots read 1e-8); only the singular vectors of
values below about sqrt(eps) * s_max are imprecise (a value there that a ``cutoff`` keeps is kept exactly, as
part of the projection). Single precision would lose its small values at 3e-4: it keeps the SVD."""

GRAM_TRUST = 1e-6
"""Where the Gram route's values stop being Schmidt values: a zero reads about eps * s_max^2 / s_small there
(its singular vector mixes with those of the smallest nonzero values, to eps * s_max^2 over their gap), 1e-10
when the spectrum reaches 1e-6. A split whose ``cutoff`` keeps a value below this times ``s_max`` is factored
again by ``torch.linalg.svd`` (values exact to eps * s_max): with the Gram values alone, 30 wires at depth 10
kept bonds of 45 where the Schmidt ranks are 32. A bond cap that cuts above it needs no second factoring."""

ZERO_BROADENING = {torch.float64: 1e-24, torch.float32: 1e-14}
"""eps of the Lorentzian for 1/s_i of a kept value: only values below about sqrt(eps) are touched."""


def _pair_inverse(s2_kept: torch.Tensor, s2_dropped: torch.Tensor, s2_max: torch.Tensor) -> torch.Tensor:
    """``[..., i, j] = 1 / (s2_kept[j] - s2_dropped[i])``, broadened (:data:`PAIR_BROADENING`), zero where the
    kept value is noise (:data:`NOISE_FLOOR`)."""
    eps = PAIR_BROADENING.get(s2_kept.dtype, 1e-12)
    x = s2_kept - s2_dropped
    d = s2_kept + s2_dropped
    f = x / (x * x + eps * d * d).clamp_min(torch.finfo(x.dtype).tiny)
    return f.masked_fill(s2_kept <= NOISE_FLOOR.get(x.dtype, 1e-16) * s2_max, 0.0)


def _small_inverse(s: torch.Tensor) -> torch.Tensor:
    """``1 / s`` broadened below about sqrt(eps) (:data:`ZERO_BROADENING`)."""
    return s / (s * s + ZERO_BROADENING.get(s.dtype, 1e-24))


def _svd(a: torch.Tensor):
    try:
        return torch.linalg.svd(a, full_matrices=False)
    except torch.linalg.LinAlgError:  # gesdd can fail on ill-conditioned input; gesvd is slower but robust
        driver = "gesvd" if a.device.type == "cuda" else None
        if driver is not None:
            return torch.linalg.svd(a, full_matrices=False, driver=driver)
        u, s, vh = torch.linalg.svd(a + torch.finfo(a.dtype.to_real()).eps * torch.randn_like(a), full_matrices=False)
        return u, s, vh


def kept_rank(s: torch.Tensor, max_bond: int | None, cutoff: float) -> int:
    """How many singular values a batch keeps: those above ``cutoff * s_max`` in any member, at most
    ``max_bond`` (one rank for the whole batch, so every member's tensors keep one shape).

    >>> kept_rank(torch.tensor([[1.0, 0.5, 1e-9]]), None, 1e-6)
    2
    """
    k = s.shape[-1]
    if cutoff > 0:
        keep = s > cutoff * s[..., :1]
        k = max(int(keep.sum(-1).max()), 1)
    if max_bond is not None:
        k = min(k, max_bond)
    return k


def _factor(theta: torch.Tensor, gram: bool):
    """``theta = u @ svh`` with ``u`` the left singular vectors (descending ``s``) and ``svh = S Vh``; ``vh``
    as well where ``theta`` is tall (None otherwise: the backward needs it only there).

    ``gram``: by the Gram route (see :data:`GRAM_DTYPES`; wide and square double-precision blocks, every
    two-site split of a saturated chain), else by ``torch.linalg.svd``."""
    if gram:
        _, u = torch.linalg.eigh(theta @ theta.mH)
        u = u.flip(-1)
        svh = u.mH @ theta
        # s_i = |row i of U^H theta|: exact to eps * s_max (the eigenvalues' square roots only to sqrt(eps) *
        # s_max: a zero Schmidt value would read 1e-8 and survive any cutoff near machine precision)
        return u, squared_norm_rows(svh).sqrt(), svh, None
    u, s, vh = _svd(theta)
    svh = s[..., None].to(vh.dtype) * vh
    return u, s, svh, (vh if theta.shape[-2] > s.shape[-1] else None)


def _factor_and_rank(theta: torch.Tensor, max_bond: int | None, cutoff: float):
    """:func:`_factor`'s factors and the kept rank; a Gram factoring whose cutoff would keep a value it cannot
    resolve (below :data:`GRAM_TRUST`) is done again by the SVD. One host read either way."""
    m, n = theta.shape[-2:]
    gram = m <= n and theta.dtype in GRAM_DTYPES
    u, s, svh, vh = _factor(theta, gram)
    if not (gram and 0 < cutoff < GRAM_TRUST):
        return u, s, svh, vh, kept_rank(s, max_bond, cutoff)
    top = s[..., :1]
    above, trusted = torch.stack([(s > cutoff * top).sum(-1).max(), (s > GRAM_TRUST * top).sum(-1).min()]).tolist()
    k = max(above, 1) if max_bond is None else min(max(above, 1), max_bond)
    if trusted >= k:
        return u, s, svh, vh, k
    u, s, svh, vh = _factor(theta, False)
    return u, s, svh, vh, kept_rank(s, max_bond, cutoff)


class _Split(torch.autograd.Function):
    """``theta [B, m, n] -> (U_k [B, m, k], S_k Vh_k [B, k, n], s [B, r])``: the kept left singular vectors,
    ``U_k^H theta`` (both differentiable, see the module) and every singular value (not differentiable).

    The forward takes ``ctx`` (not ``setup_context``): torch then skips binding the arguments by
    ``inspect.signature`` on every call (0.14 ms each, about 2% of a step)."""

    @staticmethod
    def forward(ctx, theta, max_bond, cutoff):
        u, s, svh, vh, k = _factor_and_rank(theta, max_bond, cutoff)
        ctx.save_for_backward(u, s, svh, vh)
        ctx.k = k
        ctx.mark_non_differentiable(s)
        return u[..., :k], svh[..., :k, :], s

    @staticmethod
    @first_order_only  # create_graph=True is refused by name (first_order.py)
    def backward(ctx, g_left, g_right, _gs):
        u, s, svh, vh = ctx.saved_tensors
        return split_backward(g_left, g_right, u, s, svh, vh, ctx.k), None, None


def split_backward(g_left, g_right, u, s, svh, vh, k: int) -> torch.Tensor:
    """The gradient of ``theta`` from those of ``U_k`` and ``U_k^H theta`` (see the module); ``svh`` is
    ``S Vh`` and ``vh`` is needed (not None) only for a tall block.

    With ``theta = U S Vh`` (reduced, r values) and the cotangent of ``U_k`` being ``g_left + theta g_right^H``
    (``right`` depends on ``U_k``), the in-range part ``U^H theta g_right^H = S Vh g_right^H`` is written from
    the factors, so the ``1/s`` of tall blocks only meets ``g_left``, which vanishes with ``s`` column by
    column: no cancellation of large terms divided by small values. Only the kept-dropped blocks of the
    rotation generator are nonzero, so they are formed alone: ``p`` (dropped rows, kept columns) and
    ``y = F * p`` with ``F[i, j] = 1/(s_j^2 - s_{k+i}^2)``, whose two blocks give ``U_k y^H (S Vh)_dropped``
    and ``U_dropped y (S Vh)_k``.
    """
    m, r = u.shape[-2], s.shape[-1]
    cdtype = u.dtype
    tall = m > r and g_left is not None
    uhg = u.mH @ g_left if tall else None
    coef = g_right  # out = U_k @ coef + ...
    out = None
    if k < r and (g_left is not None or g_right is not None):
        ud, sd = u[..., k:], svh[..., k:, :]
        p = None
        if g_left is not None:
            p = uhg[..., k:, :] if tall else ud.mH @ g_left
        if g_right is not None:
            p = sd @ g_right.mH if p is None else p + sd @ g_right.mH
        s2 = s * s
        f = _pair_inverse(s2[..., None, :k], s2[..., k:, None], s2[..., :1, None])
        y = f.to(cdtype) * p
        coef = y.mH @ sd if coef is None else coef + y.mH @ sd
        out = ud @ (y @ svh[..., :k, :])
    if coef is not None:
        out = u[..., :k] @ coef if out is None else out + u[..., :k] @ coef
    if tall:  # the kept columns also turn out of theta's column space
        gus = (g_left - u @ uhg) * _small_inverse(s[..., :k]).to(cdtype).unsqueeze(-2)
        out = out + gus @ vh[..., :k, :] if out is not None else gus @ vh[..., :k, :]
    if out is None:
        out = torch.zeros(*u.shape[:-2], m, svh.shape[-1], dtype=cdtype, device=u.device)
    return out


def squared_norm_rows(x: torch.Tensor) -> torch.Tensor:
    """``sum_j |x_ij|^2`` over the last dim (real arithmetic on a complex view, as :func:`squared_norm`)."""
    x = torch.view_as_real(x) if x.is_complex() else x.unsqueeze(-1)
    return x.pow(2).sum((-2, -1))


def squared_norm(x: torch.Tensor) -> torch.Tensor:
    """``sum |x|^2`` over the last two dims, without ``abs`` (whose complex kernel and backward are ~10x slower)."""
    if x.is_conj():  # a lazily conjugated view (a split towards the left): |conj x| = |x|
        x = x.conj()
    x = torch.view_as_real(x) if x.is_complex() else x.unsqueeze(-1)
    return x.pow(2).sum((-3, -2, -1))


def split(theta: torch.Tensor, max_bond: int | None, cutoff: float, centre: str):
    """``theta`` ``[B, m, n]`` as ``left [B, m, k] @ right [B, k, n]``, truncated. ``centre="right"``: ``left``
    is an isometry and ``right`` carries the norm; ``"left"``: the reverse. Returns left, right, the
    discarded weight ``[B]`` (dropped s^2 over the total, detached) and k. Dropping renormalises the kept
    part to the whole weight.

    >>> theta = torch.randn(2, 4, 6, dtype=torch.complex128)
    >>> left, right, discarded, k = split(theta, None, 0.0, "right")
    >>> torch.allclose(left @ right, theta), k, discarded.tolist()
    (True, 4, [0.0, 0.0])
    """
    if centre == "left":
        right, left, discarded, k = split(theta.mH, max_bond, cutoff, "right")
        return left.mH, right.mH, discarded, k
    uk, right, s = _Split.apply(theta, max_bond, cutoff)
    k = uk.shape[-1]
    if k == s.shape[-1]:
        return uk, right, torch.zeros_like(s[..., 0]), k
    total = (s * s).sum(-1)
    tiny = torch.finfo(total.dtype).tiny
    # the dropped weight itself, not 1 - kept: dropping numerical zeros (the default cutoff) reports 1e-30, not
    # the rounding of 1 - kept (+-1e-16 a split, summed over a circuit)
    discarded = ((s[..., k:] ** 2).sum(-1) / total.clamp_min(tiny)).detach()
    # renormalise to the whole weight (the norm of theta), differentiably
    whole = squared_norm(theta)
    part = squared_norm(right)
    right = right * torch.sqrt(whole / part.clamp_min(tiny)).to(right.dtype)[..., None, None]
    return uk, right, discarded, k

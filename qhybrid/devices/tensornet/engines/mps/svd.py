"""A batched SVD whose backward stays finite on degenerate and vanishing singular values, and the truncated
split of a two-sided block that every MPS update is made of.

The textbook SVD gradient (Wan & Zhang 2019, arXiv:1909.02659; torch's ``svd_backward``) divides by
``s_j^2 - s_i^2`` and by ``s_i``. MPS of symmetric circuits have exactly degenerate Schmidt spectra (an
``IsingZZ`` layer on |+...+>) and zero singular values in padded bonds, where torch's own backward returns
NaN/Inf. Following the tensor-network AD literature (Liao, Liu, Wang & Xiang, PRX 9, 031041 (2019)), both
reciprocals are broadened to Lorentzians, ``1/x -> x / (x^2 + eps)``: away from degeneracies the gradient is
the exact one to O(eps); at a degeneracy the broken term, whose numerator vanishes for a gauge-invariant loss
(every MPS expectation value is one), contributes nothing instead of NaN.
"""

from __future__ import annotations

import torch

BROADENING = {torch.float64: 1e-24, torch.float32: 1e-12}
"""eps of the Lorentzian 1/x -> x/(x^2+eps) per real dtype: x is s_i^2 - s_j^2 (or s_i) of a normalised state,
so eps ~ (1e-12)^2 in double precision only touches pairs closer than about 1e-12."""


def _inverse(x: torch.Tensor) -> torch.Tensor:
    eps = BROADENING.get(x.dtype, 1e-12)
    return x / (x * x + eps)


class StableSVD(torch.autograd.Function):
    """``torch.linalg.svd(a, full_matrices=False)`` with a Lorentzian-broadened backward (batched, real or
    complex). The loss must not depend on the singular vectors' phases (true of every quantity an MPS reads).

    >>> a = torch.randn(3, 4, 4, dtype=torch.float64, requires_grad=True)
    >>> u, s, vh = StableSVD.apply(a)
    >>> torch.allclose(u @ torch.diag_embed(s).to(u.dtype) @ vh, a)
    True
    """

    @staticmethod
    def forward(a: torch.Tensor):
        try:
            return torch.linalg.svd(a, full_matrices=False)
        except torch.linalg.LinAlgError:  # gesdd can fail on ill-conditioned input; gesvd is slower but robust
            if a.device.type == "cuda":
                return torch.linalg.svd(a, full_matrices=False, driver="gesvd")
            u, s, vh = torch.linalg.svd(a.cpu().to(torch.complex128 if a.is_complex() else torch.float64), full_matrices=False)
            return u.to(a), s.to(a.real.dtype if a.is_complex() else a.dtype).to(a.device), vh.to(a)

    @staticmethod
    def setup_context(ctx, inputs, output):
        u, s, vh = output
        ctx.save_for_backward(u, s, vh)

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        return svd_backward(gu, gs, gvh, u, s, vh)


def svd_backward(gu, gs, gvh, u, s, vh) -> torch.Tensor:
    """The gradient of ``a`` from those of its reduced SVD, with broadened reciprocals (see the module)."""
    m, n = u.shape[-2], vh.shape[-1]
    cdtype = u.dtype
    if gu is None and gvh is None:
        return u @ (gs.to(cdtype).unsqueeze(-1) * vh)
    s_c = s.to(cdtype)
    diff = s.unsqueeze(-2) ** 2 - s.unsqueeze(-1) ** 2  # [j, k] = s_k^2 - s_j^2
    f = _inverse(diff)
    f.diagonal(0, -2, -1).zero_()
    f = f.to(cdtype)
    inv_s = _inverse(s).to(cdtype)
    g = torch.zeros(u.shape[:-2] + (s.shape[-1], s.shape[-1]), dtype=cdtype, device=u.device)
    uhgu = None
    if gu is not None:
        uhgu = u.mH @ gu
        g = g + (f * (uhgu - uhgu.mH)) * s_c.unsqueeze(-2)
    if gvh is not None:
        gv = gvh.mH
        vhgv = vh @ gv
        g = g + s_c.unsqueeze(-1) * (f * (vhgv - vhgv.mH))
    if gs is not None:
        g = g + torch.diag_embed(gs.to(cdtype))
    if u.is_complex() and uhgu is not None:
        d = uhgu.diagonal(0, -2, -1)
        g = g + torch.diag_embed(1j * d.imag.to(cdtype) * inv_s)
    if m > n and gu is not None:
        gus = gu * inv_s.unsqueeze(-2)
        return (u @ g + gus - u @ (u.mH @ gus)) @ vh
    if m < n and gvh is not None:
        sgvh = inv_s.unsqueeze(-1) * gvh
        return u @ (g @ vh + sgvh - (sgvh @ vh.mH) @ vh)
    return u @ g @ vh


def stable_svd(a: torch.Tensor):
    """``(u, s, vh)`` of a batch of matrices; through :class:`StableSVD` only where a gradient is recorded."""
    if torch.is_grad_enabled() and a.requires_grad:
        return StableSVD.apply(a)
    return StableSVD.forward(a)


def kept_rank(s: torch.Tensor, max_bond: int | None, cutoff: float) -> int:
    """How many singular values a batch keeps: those above ``cutoff * s_max`` in any member, at most
    ``max_bond`` (one rank for the whole batch, so every member's tensors keep one shape)."""
    k = s.shape[-1]
    if cutoff > 0:
        keep = s > cutoff * s[..., :1]
        k = max(int(keep.sum(-1).max()), 1)
    if max_bond is not None:
        k = min(k, max_bond)
    return k


def truncated_split(theta: torch.Tensor, max_bond: int | None, cutoff: float):
    """``theta`` ``[B, m, n]`` as ``u [B, m, k]``, ``s [B, k]`` (renormalised to the kept weight) and
    ``vh [B, k, n]``, and the discarded weight ``[B]`` (sum of the dropped s^2 over the total)."""
    u, s, vh = stable_svd(theta)
    k = kept_rank(s, max_bond, cutoff)
    total = (s * s).sum(-1)
    if k < s.shape[-1]:
        kept = (s[..., :k] ** 2).sum(-1)
        discarded = (1 - kept / total.clamp_min(torch.finfo(total.dtype).tiny)).detach()
        u, s, vh = u[..., :k], s[..., :k], vh[..., :k, :]
        s = s * torch.rsqrt(kept.clamp_min(torch.finfo(kept.dtype).tiny)).unsqueeze(-1) * total.sqrt().unsqueeze(-1)
    else:
        discarded = torch.zeros_like(total)
    return u, s, vh, discarded

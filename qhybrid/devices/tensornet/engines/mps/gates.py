"""Gates on a batched MPS: one-site gates contract into their site; a block of k contiguous sites is merged,
multiplied by a gate (or its two sites exchanged: a SWAP) and split back with k-1 truncated SVDs (quimb's
"swap+split"). Every split leaves the orthogonality centre on the side of the next block, so a sweep of
blocks moves the centre once.

Circuits run the blocks of :mod:`.route`'s plan (:func:`apply_block`); :func:`apply_gate` applies one gate
on any sites by SWAPs to the first wire and back, leaving the chain's order as it was.
"""

from __future__ import annotations

import torch

from .state import MPS
from .svd import split


def apply_one_site(mps: MPS, mat: torch.Tensor, site: int) -> None:
    """``mat`` ``[2, 2]`` or ``[B, 2, 2]`` on ``site``: a unitary on the physical leg keeps the canonical form."""
    a = mps.sites[site]
    if mat.dim() == 2:
        mps.sites[site] = torch.einsum("ts,blsr->bltr", mat, a)
    else:
        mps.sites[site] = torch.einsum("bts,blsr->bltr", mat, a)


def in_site_order(mat: torch.Tensor, sites) -> tuple[torch.Tensor, list[int]]:
    """A k-wire gate's matrix with its wires reordered to ascending sites, and those sites."""
    k = len(sites)
    order = sorted(range(k), key=lambda j: sites[j])
    if order == list(range(k)):
        return mat, list(sites)
    lead = mat.shape[:-2]
    t = mat.reshape(*lead, *(2,) * (2 * k))
    nl = len(lead)
    perm = list(range(nl)) + [nl + j for j in order] + [nl + k + j for j in order]
    return t.permute(perm).reshape(*lead, 1 << k, 1 << k), [sites[j] for j in order]


def entry_site(sites) -> int:
    """The first site :func:`apply_gate` touches for a gate on ``sites`` (where the centre should wait):
    the first SWAP's left site when the wires are apart, else the leftmost wire.

    >>> entry_site((7, 2)), entry_site((3, 4))
    (6, 3)
    """
    ordered = sorted(sites)
    if len(ordered) > 1 and ordered[1] > ordered[0] + 1:
        return ordered[1] - 1
    return ordered[0]


def apply_gate(mps: MPS, mat: torch.Tensor, sites, towards: int | None = None) -> None:
    """``mat`` (``[2**k, 2**k]`` or batched ``[B, ...]``, first wire most significant) on ``sites``.

    ``towards``: the site of the next gate, where the orthogonality centre should end (None: the right end).
    """
    if len(sites) == 1:
        apply_one_site(mps, mat, sites[0])
        return
    mat, sites = in_site_order(mat, sites)
    first, k = sites[0], len(sites)
    swaps = []  # (left site) of each SWAP done to make the sites contiguous, undone in reverse
    for j in range(1, k):
        pos, target = sites[j], first + j
        for q in range(pos - 1, target - 1, -1):
            apply_block(mps, q, 2, None, towards=q - 1)
            swaps.append(q)
    back = towards if towards is not None else first + k
    apply_block(mps, first, k, mat, towards=back if not swaps else first + k)
    for q in reversed(swaps):
        apply_block(mps, q, 2, None, towards=back if q == swaps[0] else q + 2)


def apply_block(mps: MPS, start: int, k: int, mat: torch.Tensor | None, towards: int | None) -> None:
    """Merge sites ``start..start+k-1``, apply ``mat`` (None: swap a pair), split back with truncation."""
    stop = start + k - 1
    if mps.centre < start:
        mps.move_centre(start)
    elif mps.centre > stop:
        mps.move_centre(stop)
    theta = mps.sites[start]
    b, l = theta.shape[0], theta.shape[1]
    for i in range(start + 1, stop + 1):
        theta = torch.einsum("bpr,brsq->bpsq", theta.reshape(b, -1, theta.shape[-1]), mps.sites[i])
    r = theta.shape[-1]
    theta = theta.reshape(b, l, 1 << k, r)
    if mat is None:  # SWAP of two sites: exchange the physical legs
        theta = theta.reshape(b, l, 2, 2, r).transpose(2, 3).reshape(b, l, 4, r)
    elif mat.dim() == 2:
        theta = torch.einsum("ts,blsr->bltr", mat, theta)
    else:
        theta = torch.einsum("bts,blsr->bltr", mat, theta)
    if towards is not None and towards < start:
        _split_leftwards(mps, theta, start, k)
    else:
        _split_rightwards(mps, theta, start, k)


def _split_rightwards(mps: MPS, theta: torch.Tensor, start: int, k: int) -> None:
    b, l, _, r = theta.shape
    rest = theta.reshape(b, l * 2, -1)
    for j in range(k - 1):
        left, right, disc, chi = split(rest, mps.max_bond, mps.cutoff, "right")
        mps.record(disc, chi)
        mps.sites[start + j] = left.reshape(b, l, 2, chi)
        l = chi
        rest = right.reshape(b, l * 2, -1)
    mps.sites[start + k - 1] = rest.reshape(b, l, 2, r)
    mps.centre = start + k - 1


def _split_leftwards(mps: MPS, theta: torch.Tensor, start: int, k: int) -> None:
    b, l, _, r = theta.shape
    rest = theta.reshape(b, -1, 2 * r)
    for j in range(k - 1, 0, -1):
        left, right, disc, chi = split(rest, mps.max_bond, mps.cutoff, "left")
        mps.record(disc, chi)
        mps.sites[start + j] = right.reshape(b, chi, 2, r)
        r = chi
        rest = left.reshape(b, -1, 2 * r)
    mps.sites[start] = rest.reshape(b, l, 2, r)
    mps.centre = start

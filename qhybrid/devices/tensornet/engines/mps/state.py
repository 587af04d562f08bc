"""A batched matrix product state in mixed canonical form.

Site ``i`` holds ``[B, chi_left, 2, chi_right]``: the batch index (data batch times stacked variants, 1 when
there is none) is on every tensor, so one ``torch.linalg.svd`` call updates every member. Sites left of
``centre`` are left-isometric, those right of it right-isometric; the centre holds the norm. Gates and reads
keep the centre moving with them, so a local expectation value costs a few sites, not a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .qr import exact_split


@dataclass(frozen=True)
class RouteSummary:
    """What a run's routing plan does (``plan_cache_info`` reports it): its multi-site blocks ``spans``
    (``(start, width)``), how many there are and how many are SWAPs, the largest bond and the bytes its
    worst case may reach (``memory.worst_case``), and whether each split was checked against ``max_memory``."""

    spans: tuple
    splits: int
    swaps: int
    bond_bound: int
    worst_bytes: float
    guarded: bool


@dataclass
class MPS:
    """Site tensors, the orthogonality centre, and the discarded weight ``[B]`` of every truncation so far."""

    sites: list
    centre: int
    max_bond: int | None
    cutoff: float
    discarded: torch.Tensor
    fidelity: torch.Tensor
    """Product over truncations of the kept weight: the usual estimate of |<exact|truncated>|^2."""
    max_bond_seen: int = 1
    memo: dict = field(default_factory=dict)
    route: RouteSummary | None = None

    @property
    def n_sites(self) -> int:
        return len(self.sites)

    @property
    def batch(self) -> int:
        return self.sites[0].shape[0]

    def record(self, discarded: torch.Tensor, bond: int) -> None:
        self.discarded = self.discarded + discarded
        self.fidelity = self.fidelity * (1 - discarded)
        self.max_bond_seen = max(self.max_bond_seen, bond)

    def move_centre(self, to: int) -> None:
        """Move the orthogonality centre to site ``to`` by exact steps (QR, see :mod:`.qr`; no truncation). With
        ``cutoff=0`` (bonds fixed by structure) the steps read no value back."""
        fixed = self.cutoff == 0
        while self.centre < to:
            i = self.centre
            a = self.sites[i]
            b, l, d, r = a.shape
            left, right, k = exact_split(a.reshape(b, l * d, r), "right", fixed)
            self.sites[i] = left.reshape(b, l, d, k)
            self.sites[i + 1] = torch.einsum("bkr,brsq->bksq", right, self.sites[i + 1])
            self.centre = i + 1
        while self.centre > to:
            i = self.centre
            a = self.sites[i]
            b, l, d, r = a.shape
            left, right, k = exact_split(a.reshape(b, l, d * r), "left", fixed)
            self.sites[i] = right.reshape(b, k, d, r)
            self.sites[i - 1] = torch.einsum("blsr,brk->blsk", self.sites[i - 1], left)
            self.centre = i - 1


def product_state(bits, batch: int, dtype: torch.dtype, device, max_bond: int | None, cutoff: float) -> MPS:
    """The computational basis state ``bits`` (one 0/1 per site) as a bond-dimension-1 MPS.

    >>> mps = product_state([0, 1], 1, torch.complex128, "cpu", None, 0.0)
    >>> [tuple(a.shape) for a in mps.sites]
    [(1, 1, 2, 1), (1, 1, 2, 1)]
    """
    sites = []
    for bit in bits:
        a = torch.zeros(batch, 1, 2, 1, dtype=dtype, device=device)
        a[:, 0, int(bit), 0].fill_(1)  # a fill on the device, not a tensor from Python data
        sites.append(a)
    real = dtype.to_real()
    zeros = torch.zeros(batch, dtype=real, device=device)
    return MPS(sites, 0, max_bond, cutoff, zeros, torch.ones_like(zeros))


def to_state_vector(mps: MPS, keep: list[bool] | None = None) -> torch.Tensor:
    """The state ``[B, 2**n]`` (first site the most significant bit); the caller checks that it fits. ``keep``:
    only the sites marked True, every other one read at |0> (a wire no gate touched)."""
    b = mps.batch
    psi = torch.ones(b, 1, 1, dtype=mps.sites[0].dtype, device=mps.sites[0].device)
    for i, a in enumerate(mps.sites):
        if keep is not None and not keep[i]:
            a = a[:, :, :1, :]
        psi = torch.einsum("bpl,blsr->bpsr", psi, a).reshape(b, -1, a.shape[-1])
    return psi.reshape(b, -1)


def state_vector_elements(mps: MPS, keep: list[bool] | None = None) -> int:
    """The largest intermediate of :func:`to_state_vector`, in elements (for the memory guard)."""
    largest, dim = 0, 1
    for i, a in enumerate(mps.sites):
        dim *= 2 if keep is None or keep[i] else 1
        largest = max(largest, dim * a.shape[-1])
    return largest * mps.batch

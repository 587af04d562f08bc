"""Measurement processes read from a final MPS: expval, var, probs, state, density_matrix."""

from __future__ import annotations

import torch
from pennylane.measurements import DensityMatrixMP, ExpectationMP, ProbabilityMP, StateMP, VarianceMP

from .....errors import ContractionTooLargeError, UnsupportedOperationError
from ..network.plan import _fmt_bytes
from .measure import Environments
from .observables import dense_on, observable_terms, one_site_product, squared, term_sites
from .state import MPS, state_vector_elements, to_state_vector

DENSE_TERM_MAX_WIRES = 8
"""A term whose factors span several wires is read from the reduced density matrix of at most this many."""


class MPSReader:
    """Reads measurements of one final MPS (environments shared by every measurement)."""

    def __init__(self, mps: MPS, site_of: dict, wire_order, phase, max_memory: float):
        self.mps = mps
        self.env = Environments(mps)
        self.site_of = site_of
        self.wire_order = list(wire_order)
        self.phase = phase
        self.max_memory = max_memory
        self.dtype = mps.sites[0].dtype
        self.device = mps.sites[0].device

    def measure(self, mp) -> torch.Tensor:
        """``mp``'s value with a leading batch axis ``[B, ...]``."""
        if mp.mv is not None:
            raise UnsupportedOperationError("method='mps' measures observables, not mid-circuit measurement values.")
        if isinstance(mp, ExpectationMP):
            return self._expval(self._terms(mp.obs))
        if isinstance(mp, VarianceMP):
            terms = self._terms(mp.obs)
            mean = self._expval(terms)
            return self._expval(squared(terms)) - mean * mean
        if isinstance(mp, ProbabilityMP) and mp.obs is None:
            return self._probs(mp.wires)
        if isinstance(mp, DensityMatrixMP):
            return self._density(mp.wires)
        if isinstance(mp, StateMP):
            return self._state(mp.wires)
        raise UnsupportedOperationError(
            f"{type(mp).__name__} is not measured by method='mps' (expval, var, probs of wires, state, "
            "density_matrix of few wires, and with shots sample/counts are); use method='auto'."
        )

    def _terms(self, obs):
        return observable_terms(obs, self.site_of, self.dtype, self.device)

    def _expval(self, terms) -> torch.Tensor:
        total = None
        for coeff, factors in terms:
            ops = one_site_product(factors)
            if ops is not None:
                value = self.env.product_expval(ops).real
            else:
                sites = term_sites(factors)
                if len(sites) > DENSE_TERM_MAX_WIRES:
                    raise UnsupportedOperationError(
                        f"An observable term acts on {len(sites)} wires through a multi-wire factor; method='mps' "
                        f"reads such terms on at most {DENSE_TERM_MAX_WIRES} wires. Write it as Pauli words."
                    )
                rho = self.env.reduced_density(sites, False, self.max_memory)
                op = dense_on(factors, sites, self.dtype, self.device)
                value = torch.einsum("bij,ji->b", rho, op).real
            value = value * coeff if not (isinstance(coeff, float) and coeff == 1.0) else value
            total = value if total is None else total + value
        if total is None:
            return torch.zeros(self.mps.batch, dtype=self.dtype.to_real(), device=self.device)
        if isinstance(total, torch.Tensor) and total.dim() == 0:
            total = total.expand(self.mps.batch)
        return total

    def _sites(self, wires) -> tuple[list[int], list[int]]:
        """Ascending sites of ``wires`` (all wires if empty) and the permutation to ``wires``' order."""
        wires = list(wires) or self.wire_order
        sites = [self.site_of[w] for w in wires]
        ascending = sorted(sites)
        return ascending, [ascending.index(s) for s in sites]

    def _probs(self, wires) -> torch.Tensor:
        ascending, perm = self._sites(wires)
        p = self.env.reduced_density(ascending, True, self.max_memory)
        return _permute_bits(p, perm, 1).clamp_min(0)

    def _density(self, wires) -> torch.Tensor:
        ascending, perm = self._sites(wires)
        rho = self.env.reduced_density(ascending, False, self.max_memory)
        return _permute_bits(rho, perm, 2)

    def _state(self, wires) -> torch.Tensor:
        """The state of ``wires`` (all if empty). A subset is the tape's wires (the readout plan's state for
        entropies, purity, ...): every other wire is untouched, still |0>, and is projected out."""
        keep = None
        if list(wires) and len(wires) < self.mps.n_sites:
            keep = [False] * self.mps.n_sites
            for w in wires:
                keep[self.site_of[w]] = True
        elements = state_vector_elements(self.mps, keep)
        need = elements * self.mps.sites[0].element_size()
        if need > self.max_memory:
            raise ContractionTooLargeError(
                f"qml.state() of {len(wires) or self.mps.n_sites} wires needs about {_fmt_bytes(need)} as a state vector, above "
                f"max_memory={_fmt_bytes(self.max_memory)}: method='mps' keeps the state compressed. Measure "
                "expectation values, probs of few wires or samples instead."
            )
        psi = to_state_vector(self.mps, keep)
        if self.phase is not None:
            psi = psi * self.phase.reshape(-1, 1)
        _, perm = self._sites(wires)  # the chain's order may differ from the wires' (routing moves wires)
        return _permute_bits(psi, perm, 1)


def _permute_bits(t: torch.Tensor, perm: list[int], n_axes: int) -> torch.Tensor:
    """``t`` ``[B, 2**k (, 2**k)]`` over ascending sites, with its bits reordered so bit j is ``perm[j]``."""
    if perm == sorted(perm):
        return t
    k = len(perm)
    b = t.shape[0]
    x = t.reshape(b, *(2,) * (k * n_axes))
    order = [0]
    for axis in range(n_axes):
        order += [1 + axis * k + p for p in perm]
    return x.permute(order).reshape(t.shape)

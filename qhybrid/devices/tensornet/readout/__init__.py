"""Readout: measurement plans (``readout``), reading measurements off states (``measure``), shot sampling
(``sampling``) and observables shared across variants (``shared_observables``); and the preprocessing transforms
that put a tape's measurements in the form the engines read (re-exported here).
"""

from .entropies import entropies_from_density_matrices
from .hermitian import refuse_non_hermitian
from .identity_terms import identity_terms_by_norm
from .measurement_values import measurement_values_as_observables
from .postselect import renormalise_postselection

__all__ = [
    "entropies_from_density_matrices",
    "identity_terms_by_norm",
    "measurement_values_as_observables",
    "refuse_non_hermitian",
    "renormalise_postselection",
]

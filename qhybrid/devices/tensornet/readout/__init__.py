"""Readout: measurement plans (``readout``), reading measurements off states (``measure``), shot sampling
(``sampling``) and observables shared across variants (``shared_observables``).
"""

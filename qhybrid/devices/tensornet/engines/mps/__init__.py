"""``method="mps"`` of the tensornet device: a batched, differentiable matrix product state with truncated SVDs.

Modules: ``svd`` (the stable-backward SVD and truncated split), ``qr`` (exact centre moves), ``state`` (the MPS
and its canonical form), ``gates`` (gate and SWAP blocks on contiguous sites), ``route`` (gate order and wire
placement along the chain; ``route_match``: the sorting router for wide sets of commuting gates), ``circuit``
(tape to MPS),
``measure`` (environments, expectations, reduced densities), ``observables`` (observables as terms),
``readout`` (measurement processes), ``sample`` (sequential sampling), ``settings`` (options, truncation
report), ``run`` (the entry point). See docs/MPS.md.
"""

from .run import run_mps
from .settings import MPSSettings, TruncationReport, TruncationWarning

__all__ = ["run_mps", "MPSSettings", "TruncationReport", "TruncationWarning"]

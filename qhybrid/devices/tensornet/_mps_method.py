"""The device face of ``method="mps"`` (``engines/mps``): its truncation report and its sampler.

A base class of :class:`~qhybrid.devices.tensornet.device.TensorNetworkDevice`, which sets ``self._mps``
(``MPSSettings``, or None for the exact methods) from its ``method``, ``max_bond_dim`` and ``cutoff``.
"""

from __future__ import annotations

from pennylane.tape import QuantumScript

from ...errors import UnsupportedOperationError
from .engines.mixed.channels import is_channel
from .engines.mps.sample import sample_tapes_mps
from .engines.mps.settings import MPSSettings, TruncationReport
from .readout.sampling import sample_tapes


class MPSMethod:
    _mps: MPSSettings | None = None

    @property
    def last_truncation(self) -> TruncationReport | None:
        """``method="mps"``: the discarded weight, fidelity estimate and largest bond of the last execution
        (None for the exact methods or before the first execution)."""
        return None if self._mps is None else self._mps.log.last

    def _sample_tapes(self, tapes: list[QuantumScript]) -> list:
        """PennyLane-shaped finite-shot results: sampled from the contracted state, or sequentially from the
        MPS (``method="mps"``)."""
        noisy = next((op for t in tapes for op in t.operations if is_channel(op)), None)
        if noisy is not None and getattr(self, "noise", "exact") == "trajectories":
            raise UnsupportedOperationError(
                f"{noisy.name} on wires {noisy.wires.tolist()} in a circuit with shots: noise='trajectories' gives "
                "analytic trajectory means (expval, probs, density_matrix without shots). Drop the shots, or sample "
                "the noisy circuit with noise='exact' (the default, method='auto': shots drawn from its density "
                "matrix)."
            )
        if self._mps is not None:
            return sample_tapes_mps(tapes, self.wires, self._mps, self._options([]), self._rng)
        return sample_tapes(tapes, self.wires, self._run_states, self._rng)

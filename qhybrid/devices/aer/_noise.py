"""PennyLane channels on Qiskit Aer: each channel in a tape becomes an Aer ``QuantumError`` (its Kraus operators)
placed in the circuit where the channel stands, so ``method="density_matrix"`` gives the exact noisy result and
any method with shots samples noisy trajectories. ``channel_error`` also serves users who build a
``qiskit_aer.noise.NoiseModel`` from PennyLane channels (``noise_model=`` on ``qhybrid.aer``).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
from qiskit.quantum_info import Kraus
from qiskit_aer.noise import QuantumError


def is_channel(op: qml.operation.Operator) -> bool:
    return isinstance(op, qml.operation.Channel)


def kraus_array(op: qml.operation.Operator) -> np.ndarray:
    """The channel's Kraus operators as one numpy array ``[r, (batch,) D, D]`` (PennyLane's wire order)."""
    mats = [qml.math.unwrap(k) for k in op.kraus_matrices()]
    mats = [k.detach().cpu().numpy() if hasattr(k, "detach") else np.asarray(k) for k in mats]
    return np.stack([np.asarray(k, dtype=complex) for k in mats])


def channel_error(channel) -> QuantumError:
    """An Aer ``QuantumError`` from a PennyLane channel or a ``[r, D, D]`` array of Kraus operators (PennyLane's
    wire order: append it to Qiskit qubits in reversed wire order, as ``qhybrid.aer`` does).

    >>> err = channel_error(qml.DepolarizingChannel(0.1, wires=0))
    >>> err.num_qubits
    1
    """
    kraus = kraus_array(channel) if isinstance(channel, qml.operation.Operator) else np.asarray(channel)
    if kraus.ndim != 3:
        raise ValueError(
            f"channel_error takes one channel's Kraus operators [r, D, D], got shape {kraus.shape}; a broadcast "
            "channel gives one error per batch element."
        )
    return QuantumError(Kraus(list(kraus)))

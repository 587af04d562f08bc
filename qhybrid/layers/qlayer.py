"""QLayer: a variational circuit as an ``nn.Module`` that returns the bitstring probabilities."""

from __future__ import annotations

import pennylane as qml
import torch

from ._base import VariationalLayer


class QLayer(VariationalLayer):
    """Encode the input into ``n_qubits``, run a trainable ansatz, return the probability of every
    computational-basis bitstring (``qml.probs``; wire 0 is the most significant bit).

    Args:
        n_qubits: circuit width; the output has ``2**n_qubits`` entries.
        n_layers: ansatz layers (the first axis of ``weight``).

    Keyword Args:
        encoding, rotation, ansatz, weight_shape, n_features, device, diff_method, reupload, noise:
            as for :class:`~qhybrid.ExpQLayer`.

    The weights are ``weight``, an ``nn.Parameter`` drawn uniformly from ``[0, 2*pi)``.

    >>> import torch, qhybrid
    >>> p = qhybrid.QLayer(3, 1)
    >>> model = torch.nn.Sequential(torch.nn.Linear(5, 3), p)   # a distribution over 8 classes
    >>> model(torch.randn(4, 5)).sum(-1)
    tensor([1.0000, 1.0000, 1.0000, 1.0000], grad_fn=<SumBackward1>)
    """

    @property
    def out_features(self) -> int:
        return 2**self.n_qubits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Bitstring probabilities for a batch (or one sample) of inputs.

        Args:
            x: ``(batch, in_features)`` or ``(in_features,)``; any leading axes are batch axes.

        Returns:
            ``(batch, 2**n_qubits)`` or ``(2**n_qubits,)``, non-negative and summing to 1 on the last
            axis, in the dtype of ``x`` and differentiable in ``x`` and ``weight``.

        >>> import torch, qhybrid
        >>> qhybrid.QLayer(2)(torch.zeros(2)).shape
        torch.Size([4])
        """
        return super().forward(x)

    def _measurements(self):
        return qml.probs(wires=self.wires)

    def _collect(self, result) -> torch.Tensor:
        return result


__all__ = ["QLayer"]

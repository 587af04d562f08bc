"""ExpQLayer: a variational circuit as an ``nn.Module`` that returns expectation values."""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch

from ..typing import DiffMethod
from ._ansatz import AnsatzLike
from ._base import VariationalLayer, check_observables
from ._encodings import EncodingName, Rotation
from ._noise import LayerNoise


class ExpQLayer(VariationalLayer):
    """Encode the input into ``n_qubits``, run a trainable ansatz, return ``<O_k>`` for each observable.

    Args:
        n_qubits: circuit width.
        n_layers: ansatz layers (the first axis of ``weight``).

    Keyword Args:
        encoding: ``"angle"`` (one rotation per feature, axis ``rotation``), ``"amplitude"`` (features as
            amplitudes, zero-padded to ``2**n_qubits`` and normalised) or ``"iqp"`` (``qml.IQPEmbedding``).
        rotation: ``"X"``, ``"Y"`` or ``"Z"``, the axis of angle encoding.
        ansatz: ``"strongly-entangling"`` (weights ``(n_layers, n_qubits, 3)``), ``"basic-entangler"``
            (RX + CNOT ring, ``(n_layers, n_qubits)``), ``"hardware-efficient"`` (RY + CZ ladder,
            ``(n_layers, n_qubits)``) or a callable ``fn(weights, wires)`` recording one layer.
        weight_shape: one layer's weight shape; required with a callable ansatz, which then gets
            ``weight[i]`` of that shape for layer ``i`` (so ``weight`` is ``(n_layers, *weight_shape)``).
        observables: PennyLane operators to measure, or ``"X"``/``"Y"``/``"Z"`` for that Pauli on each
            wire; None means ``qml.Z`` on each wire.
        n_features: input width; default ``n_qubits`` (``2**n_qubits`` for amplitude encoding). Angle
            encoding accepts fewer than ``n_qubits``, amplitude encoding up to ``2**n_qubits``.
        device: the quantum device; None means a ``qhybrid.device("tensornet")`` with ``n_qubits`` wires
            whose precision follows the inputs (complex128 for float64, complex64 for float32).
        diff_method: ``"best"``, ``"adjoint"``, ``"parameter-shift"`` or ``"backprop"``.
        reupload: encode the input again before every ansatz layer (data re-uploading).
        check_finite: refuse inputs or weights holding NaN or inf with an error naming the rows (they would
            otherwise give NaN results and NaN weight gradients, silently); one ``isfinite`` pass per call.
        capture: ``"cuda-graph"`` to capture each input shape's forward and backward as CUDA graphs and
            replay them (GPU only; see docs/GPU.md); None (default) runs uncaptured.
        noise: channels after the encoding and after every ansatz layer: a probability ``p`` (a
            ``DepolarizingChannel(p)`` on every wire) or a function ``noise(wires)`` queuing channels; the
            circuit then runs on the device's mixed-state engine (docs/NOISE.md). None: noiseless.

    The weights are ``weight``, an ``nn.Parameter`` drawn uniformly from ``[0, 2*pi)``
    (:meth:`reset_parameters`).

    >>> import torch, qhybrid
    >>> q = qhybrid.ExpQLayer(4, 2, encoding="angle", rotation="Y")
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), q, torch.nn.Linear(4, 2))
    >>> model(torch.randn(16, 8)).shape
    torch.Size([16, 2])
    """

    def __init__(
        self,
        n_qubits: int,
        n_layers: int = 1,
        *,
        encoding: EncodingName = "angle",
        rotation: Rotation = "Y",
        ansatz: AnsatzLike = "strongly-entangling",
        weight_shape: Sequence[int] | int | None = None,
        observables: Sequence[qml.operation.Operator] | str | None = None,
        n_features: int | None = None,
        device=None,
        diff_method: DiffMethod = "best",
        reupload: bool = False,
        check_finite: bool = True,
        capture: str | None = None,
        noise: LayerNoise = None,
    ) -> None:
        super().__init__(
            n_qubits,
            n_layers,
            encoding=encoding,
            rotation=rotation,
            ansatz=ansatz,
            weight_shape=weight_shape,
            n_features=n_features,
            device=device,
            diff_method=diff_method,
            reupload=reupload,
            check_finite=check_finite,
            capture=capture,
            noise=noise,
        )
        self.observables = check_observables(observables, self.wires)
        self.out_features = len(self.observables)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Expectation values for a batch (or one sample) of inputs.

        Args:
            x: ``(batch, in_features)`` or ``(in_features,)``; any leading axes are batch axes.

        Returns:
            ``(batch, out_features)`` or ``(out_features,)``: ``<O_k>`` in ``[-1, 1]`` for Pauli
            observables, in the dtype of ``x`` (float32 in, float32 out) and differentiable in ``x`` and
            ``weight``.

        >>> import torch, qhybrid
        >>> q = qhybrid.ExpQLayer(3)
        >>> q(torch.zeros(5, 3)).shape, q(torch.zeros(3)).shape
        (torch.Size([5, 3]), torch.Size([3]))
        """
        return super().forward(x)

    def _measurements(self):
        return [qml.expval(ob) for ob in self.observables]

    def _collect(self, result) -> torch.Tensor:
        return torch.stack(list(result), dim=-1)


__all__ = ["ExpQLayer"]

"""Data encodings: how a layer writes its input features into the circuit.

Each encoding is an :class:`Encoding` found by name with :func:`get_encoding`. An encoding records
PennyLane operations only; the data batch stays a leading axis of the feature tensor, so the whole batch
is one broadcast execution on the device.
"""

from __future__ import annotations

from typing import Literal, Sequence

import pennylane as qml
import torch

from ..devices._device_assert import assert_on_device

EncodingName = Literal["angle", "amplitude", "iqp"]
"""The encodings a layer offers by name."""

Rotation = Literal["X", "Y", "Z"]
"""The rotation axis of angle encoding."""

IQP_REPEATS = 1
"""How many times the IQP embedding repeats its Hadamard + diagonal block."""


class Encoding:
    """Contract of a data encoding.

    ``default_features(n_qubits)`` is the input width a layer expects when none is given,
    ``check_features(n_features, n_qubits)`` raises a ValueError naming both sizes when that width
    does not fit, and calling the encoding with features of shape ``(..., n_features)`` records the
    encoding gates on ``wires``. ``reuploadable`` says whether it may be applied again mid-circuit.
    """

    name: str = ""
    reuploadable: bool = True

    def default_features(self, n_qubits: int) -> int:
        return n_qubits

    def check_features(self, n_features: int, n_qubits: int) -> None:
        if n_features != n_qubits:
            raise ValueError(
                f"{self.name} encoding takes one feature per qubit: n_features={n_features} does not match "
                f"n_qubits={n_qubits}."
            )

    def __call__(self, features: torch.Tensor, wires: Sequence) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AngleEncoding(Encoding):
    """One rotation per feature, ``R_rotation(x_i)`` on wire ``i`` (``qml.AngleEmbedding``).

    Takes up to ``n_qubits`` features; fewer leave the remaining wires untouched.
    """

    name = "angle"

    def __init__(self, rotation: Rotation = "Y"):
        if rotation not in ("X", "Y", "Z"):
            raise ValueError(f"rotation must be 'X', 'Y' or 'Z', got {rotation!r}.")
        self.rotation = rotation

    def check_features(self, n_features: int, n_qubits: int) -> None:
        if not 1 <= n_features <= n_qubits:
            raise ValueError(
                f"angle encoding needs 1 to n_qubits={n_qubits} features, got n_features={n_features}; "
                "add qubits or reduce the features (e.g. with PCA or an nn.Linear before the layer)."
            )

    def __call__(self, features: torch.Tensor, wires: Sequence) -> None:
        n = features.shape[-1]
        qml.AngleEmbedding(features, wires=list(wires)[:n], rotation=self.rotation)

    def __repr__(self) -> str:
        return f"AngleEncoding(rotation={self.rotation!r})"


class AmplitudeEncoding(Encoding):
    """Features as the amplitudes of the state: zero-padded to ``2**n_qubits`` and L2-normalised.

    The normalisation is a torch operation, so gradients flow to the raw features. The state is
    prepared from ``|0...0>``, so this encoding cannot be re-uploaded.
    """

    name = "amplitude"
    reuploadable = False

    def default_features(self, n_qubits: int) -> int:
        return 2**n_qubits

    def check_features(self, n_features: int, n_qubits: int) -> None:
        if not 1 <= n_features <= 2**n_qubits:
            raise ValueError(
                f"amplitude encoding holds at most 2**n_qubits={2**n_qubits} features "
                f"(n_qubits={n_qubits}), got n_features={n_features}."
            )

    def __call__(self, features: torch.Tensor, wires: Sequence) -> None:
        qml.StatePrep(amplitude_state(features, len(wires)), wires=wires, validate_norm=False)


def amplitude_state(features: torch.Tensor, n_qubits: int) -> torch.Tensor:
    """``features`` zero-padded to ``2**n_qubits`` along the last axis and divided by their L2 norm.

    >>> amplitude_state(torch.tensor([3.0, 4.0, 0.0]), 2)
    tensor([0.6000, 0.8000, 0.0000, 0.0000])
    """
    pad = 2**n_qubits - features.shape[-1]
    if pad:
        features = torch.nn.functional.pad(features, (0, pad))
    norm = torch.linalg.vector_norm(features, dim=-1, keepdim=True)
    # checked where the features live: a read to the host every call would stop a captured step
    assert_on_device(norm != 0, "amplitude encoding got an all-zero feature vector, which has no normalised state.")
    return features / norm


class IQPEncoding(Encoding):
    """Havlicek-style IQP feature map (``qml.IQPEmbedding``): Hadamards, ``RZ(x_i)`` and ``MultiRZ(x_i x_j)``
    on every pair, repeated :data:`IQP_REPEATS` times. Takes exactly one feature per qubit."""

    name = "iqp"

    def __call__(self, features: torch.Tensor, wires: Sequence) -> None:
        qml.IQPEmbedding(features, wires=wires, n_repeats=IQP_REPEATS)


def get_encoding(name: EncodingName, *, rotation: Rotation = "Y") -> Encoding:
    """The encoding called ``name``; ``rotation`` is used by angle encoding only.

    >>> get_encoding("angle", rotation="X")
    AngleEncoding(rotation='X')
    """
    if name == "angle":
        return AngleEncoding(rotation)
    if name == "amplitude":
        return AmplitudeEncoding()
    if name == "iqp":
        return IQPEncoding()
    raise ValueError(f"Unknown encoding {name!r}; choose 'angle', 'amplitude' or 'iqp'.")


__all__ = [
    "EncodingName",
    "Rotation",
    "Encoding",
    "AngleEncoding",
    "AmplitudeEncoding",
    "IQPEncoding",
    "amplitude_state",
    "get_encoding",
]

"""Trainable ansätze: the weight-carrying part of a layer's circuit, one layer at a time.

Each ansatz is an :class:`Ansatz` found by :func:`get_ansatz` (a name, or a user callable). Layers are
applied one by one so that data re-uploading can interleave the encoding between them; applying every
layer in order records the same gates as the matching PennyLane template with all layers at once.
"""

from __future__ import annotations

from typing import Callable, Literal, Sequence, Union

import pennylane as qml
import torch

AnsatzName = Literal["strongly-entangling", "basic-entangler", "hardware-efficient"]
"""The ansätze a layer offers by name."""

AnsatzFn = Callable[[torch.Tensor, Sequence], None]
"""A user ansatz: ``fn(weights, wires)`` records one layer's gates."""

AnsatzLike = Union[AnsatzName, AnsatzFn]


class Ansatz:
    """Contract of an ansatz.

    ``weight_shape(n_layers, n_qubits)`` is the shape of the whole weight tensor; its first axis runs
    over layers. ``layer(weights, wires, index)`` records layer ``index`` given ``weights[index]``.
    """

    name: str = ""

    def weight_shape(self, n_layers: int, n_qubits: int) -> tuple[int, ...]:
        raise NotImplementedError

    def layer(self, weights: torch.Tensor, wires: Sequence, index: int) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class StronglyEntangling(Ansatz):
    """``qml.StronglyEntanglingLayers``: a general rotation per wire, then a CNOT ring whose range grows
    with the layer index (PennyLane's default ranges). Weights ``(n_layers, n_qubits, 3)``."""

    name = "strongly-entangling"

    def weight_shape(self, n_layers: int, n_qubits: int) -> tuple[int, ...]:
        return (n_layers, n_qubits, 3)

    def layer(self, weights: torch.Tensor, wires: Sequence, index: int) -> None:
        n = len(wires)
        if n == 1:  # one wire: rotations only (PennyLane refuses a range of 0, and has no CNOT to place)
            qml.StronglyEntanglingLayers(weights.unsqueeze(0), wires=wires)
            return
        qml.StronglyEntanglingLayers(weights.unsqueeze(0), wires=wires, ranges=((index % (n - 1)) + 1,))


class BasicEntangler(Ansatz):
    """``qml.BasicEntanglerLayers``: ``RX`` per wire, then a CNOT ring. Weights ``(n_layers, n_qubits)``."""

    name = "basic-entangler"

    def weight_shape(self, n_layers: int, n_qubits: int) -> tuple[int, ...]:
        return (n_layers, n_qubits)

    def layer(self, weights: torch.Tensor, wires: Sequence, index: int) -> None:
        qml.BasicEntanglerLayers(weights.unsqueeze(0), wires=wires, rotation=qml.RX)


class HardwareEfficient(Ansatz):
    """``RY`` per wire, then a ladder of ``CZ(i, i+1)``. Weights ``(n_layers, n_qubits)``."""

    name = "hardware-efficient"

    def weight_shape(self, n_layers: int, n_qubits: int) -> tuple[int, ...]:
        return (n_layers, n_qubits)

    def layer(self, weights: torch.Tensor, wires: Sequence, index: int) -> None:
        for i, wire in enumerate(wires):
            qml.RY(weights[i], wires=wire)
        for a, b in zip(wires[:-1], wires[1:]):
            qml.CZ(wires=[a, b])


class CallableAnsatz(Ansatz):
    """A user function ``fn(weights, wires)`` applied once per layer with that layer's
    ``weights`` of shape ``weight_shape``; the whole weight tensor is ``(n_layers, *weight_shape)``."""

    def __init__(self, fn: AnsatzFn, weight_shape: Sequence[int]):
        self.fn = fn
        self.per_layer_shape = tuple(int(s) for s in weight_shape)
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def weight_shape(self, n_layers: int, n_qubits: int) -> tuple[int, ...]:
        return (n_layers, *self.per_layer_shape)

    def layer(self, weights: torch.Tensor, wires: Sequence, index: int) -> None:
        self.fn(weights, wires)

    def __repr__(self) -> str:
        return f"CallableAnsatz({self.name}, weight_shape={self.per_layer_shape})"


_BY_NAME = {cls.name: cls for cls in (StronglyEntangling, BasicEntangler, HardwareEfficient)}


def get_ansatz(ansatz: AnsatzLike, weight_shape: Sequence[int] | int | None = None) -> Ansatz:
    """The ansatz for a name or a callable; a callable needs ``weight_shape`` (one layer's weights).

    >>> get_ansatz("hardware-efficient").weight_shape(2, 4)
    (2, 4)
    >>> get_ansatz(lambda w, wires: qml.RY(w[0], wires[0]), weight_shape=(1,)).weight_shape(3, 2)
    (3, 1)
    """
    if isinstance(ansatz, str):
        if ansatz not in _BY_NAME:
            raise ValueError(f"Unknown ansatz {ansatz!r}; choose one of {sorted(_BY_NAME)} or pass a callable.")
        if weight_shape is not None:
            raise ValueError(f"weight_shape is only for a callable ansatz; {ansatz!r} fixes its own shape.")
        return _BY_NAME[ansatz]()
    if callable(ansatz):
        if weight_shape is None:
            raise ValueError(
                "A callable ansatz needs weight_shape=, the shape of the weights one call "
                "fn(weights, wires) takes (one layer)."
            )
        if isinstance(weight_shape, int):
            weight_shape = (weight_shape,)
        return CallableAnsatz(ansatz, weight_shape)
    raise TypeError(f"ansatz must be a name or a callable (weights, wires) -> None, got {type(ansatz).__name__}.")


__all__ = [
    "AnsatzName",
    "AnsatzFn",
    "AnsatzLike",
    "Ansatz",
    "StronglyEntangling",
    "BasicEntangler",
    "HardwareEfficient",
    "CallableAnsatz",
    "get_ansatz",
]

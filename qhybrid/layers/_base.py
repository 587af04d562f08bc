"""The shared body of ExpQLayer and QLayer: encoding + ansatz (optionally re-uploaded) on a device.

A subclass only says what to measure (``_measurements``) and how to turn the QNode's result into one
``(batch, out_features)`` tensor (``_collect``).
"""

from __future__ import annotations

import math
from typing import Sequence

import pennylane as qml
import torch
from torch import nn

from ..workflow._capture import capture_graphs, module_call, replaying
from ..workflow._functorch import plain
from ..interfaces._compile import quantum_boundary
from ..workflow.qnode import QNode
from ..typing import DiffMethod
from ._ansatz import AnsatzLike, get_ansatz
from ._encodings import EncodingName, Rotation, get_encoding
from ._noise import LayerNoise, layer_noise

WEIGHT_INIT_LOW = 0.0
WEIGHT_INIT_HIGH = 2 * math.pi
"""Weights start uniform in ``[WEIGHT_INIT_LOW, WEIGHT_INIT_HIGH)``: every rotation angle equally likely."""

_COMPLEX_FOR_REAL = {torch.float64: torch.complex128}
"""Simulation precision of an auto-created device for a real compute dtype; anything else runs complex64."""


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


class VariationalLayer(nn.Module):
    """Base of the circuit layers: ``encode(x) -> ansatz layer 0 -> ... -> measure``, or with
    ``reupload=True`` ``encode(x) -> layer 0 -> encode(x) -> layer 1 -> ...``.

    Subclasses implement ``_measurements()`` (PennyLane measurement processes on ``self.wires``),
    ``_collect(result)`` (the QNode result as one tensor with the outputs on the last axis) and set
    ``out_features``. Arguments are those of :class:`~qhybrid.ExpQLayer` less ``observables``.
    """

    out_features: int

    def __init__(
        self,
        n_qubits: int,
        n_layers: int = 1,
        *,
        encoding: EncodingName = "angle",
        rotation: Rotation = "Y",
        ansatz: AnsatzLike = "strongly-entangling",
        weight_shape: Sequence[int] | int | None = None,
        n_features: int | None = None,
        device=None,
        diff_method: DiffMethod = "best",
        reupload: bool = False,
        check_finite: bool = True,
        capture: str | None = None,
        noise: LayerNoise = None,
    ) -> None:
        super().__init__()
        self.noise = layer_noise(noise)
        name = type(self).__name__
        tdev = getattr(device, "torch_device", None)
        self._graphs = capture_graphs(capture, name, torch_device=tdev, diff_method=diff_method)
        self.check_finite = bool(check_finite)
        self.n_qubits = _positive_int(n_qubits, "n_qubits")
        self.n_layers = _positive_int(n_layers, "n_layers")
        self.encoding = get_encoding(encoding, rotation=rotation)
        self.ansatz = get_ansatz(ansatz, weight_shape)
        self.reupload = bool(reupload)
        if self.reupload and not self.encoding.reuploadable:
            raise ValueError(
                f"{self.encoding.name} encoding prepares the state from |0...0> and cannot be re-uploaded "
                "between layers; use reupload=False or encoding='angle' / 'iqp'."
            )
        if n_features is None:
            n_features = self.encoding.default_features(self.n_qubits)
        self.encoding.check_features(_positive_int(n_features, "n_features"), self.n_qubits)
        self.in_features = n_features
        self.qdevice = device
        self.wires = self._wires_of(device)
        self.diff_method = diff_method
        self.weight = nn.Parameter(torch.empty(self.ansatz.weight_shape(self.n_layers, self.n_qubits)))
        self._auto_devices: dict[torch.dtype, object] = {}
        self.reset_parameters()

    def _wires_of(self, device) -> list:
        if device is None or device.wires is None:
            return list(range(self.n_qubits))
        if len(device.wires) < self.n_qubits:
            raise ValueError(
                f"device has {len(device.wires)} wires but the layer needs n_qubits={self.n_qubits}; "
                f"create it with wires={self.n_qubits} (or pass device=None for one sized to the layer)."
            )
        return list(device.wires)[: self.n_qubits]

    def reset_parameters(self) -> None:
        """Draw the weights uniformly from ``[0, 2*pi)``."""
        with torch.no_grad():
            nn.init.uniform_(self.weight, WEIGHT_INIT_LOW, WEIGHT_INIT_HIGH)

    def quantum_device(self, dtype: torch.dtype | None = None):
        """The device that runs the circuit for inputs of real ``dtype`` (default: the weights' dtype).

        The one given as ``device=``, or else a ``tensornet`` device with ``n_qubits`` wires that
        simulates in complex128 for float64 and complex64 otherwise, created once and kept (its plan cache
        makes later batches cheap)."""
        if self.qdevice is not None:
            return self.qdevice
        complex_dtype = _COMPLEX_FOR_REAL.get(dtype or self.weight.dtype, torch.complex64)
        dev = self._auto_devices.get(complex_dtype)
        if dev is None:
            from ..workflow._device_factory import device as make_device

            dev = make_device("tensornet", wires=self.n_qubits, dtype=complex_dtype)
            self._auto_devices[complex_dtype] = dev
        return dev

    def _circuit(self, inputs: torch.Tensor, weights: torch.Tensor):
        for index in range(self.n_layers):
            if index == 0 or self.reupload:
                self.encoding(inputs, self.wires)
                self._add_noise()
            self.ansatz.layer(weights[index], self.wires, index)
            self._add_noise()
        return self._measurements()

    def _add_noise(self) -> None:
        if self.noise is not None:
            self.noise(self.wires)

    def _measurements(self):
        raise NotImplementedError

    def _collect(self, result) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if replaying(self._graphs):  # capture="cuda-graph": replay
            return module_call(self, self._graphs, (x,))
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{type(self).__name__} takes a torch.Tensor, got {type(x).__name__}.")
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            got = "a scalar" if x.ndim == 0 else f"{x.shape[-1]} features"
            raise ValueError(
                f"{type(self).__name__} expects {self.in_features} input features on the last axis, got {got} "
                f"(input shape {tuple(x.shape)}); reshape the input or build the layer for that width."
            )
        if x.is_complex():
            raise TypeError(f"{type(self).__name__} takes real inputs, got dtype {x.dtype}.")
        out_dtype = x.dtype if x.is_floating_point() else self.weight.dtype
        compute = torch.promote_types(out_dtype, self.weight.dtype)
        batch_shape = x.shape[:-1]
        flat = x.to(compute).reshape(-1, self.in_features) if x.ndim > 2 else x.to(compute)
        if flat.ndim == 2 and flat.shape[0] == 0:  # an empty batch: no circuit to run (PennyLane fails too)
            # (0 as a function of the weights and the input: both get empty or zero gradients, as from nn.Linear)
            link = 0 * self.weight.sum() + (0 * flat.sum() if flat.requires_grad else 0)
            return (x.new_zeros(*batch_shape, self.out_features) + link).to(out_dtype)
        out = self._quantum(flat)
        if x.ndim > 2:
            out = out.reshape(*batch_shape, self.out_features)
        return out.to(out_dtype)

    @quantum_boundary
    def _quantum(self, flat: torch.Tensor) -> torch.Tensor:
        # the finiteness check reads tensor values, so it sits inside the one untraced step too
        if self.check_finite:
            _check_finite(type(self).__name__, plain(flat), plain(self.weight))  # torch.func: the values beneath
        return self._collect(self._qnode_for(self.quantum_device(flat.dtype))(flat, self.weight))

    def _qnode_for(self, device) -> QNode:
        """The layer's own qnode on ``device``, kept: its static-structure trace makes a repeat call of the
        same input shape gather the new values into the cached circuit without recording it again. The
        layer's settings are part of the trace's key (changing one after construction re-traces)."""
        key = (id(device), self.diff_method, self._settings())
        qnodes = self.__dict__.setdefault("_qnodes", {})
        qnode = qnodes.get(key)
        if qnode is None or qnode.device is not device:
            qnode = qnodes[key] = QNode(self._circuit, device, self.diff_method, static_structure=True)
        return qnode

    def _settings(self) -> tuple:
        observables = getattr(self, "observables", None)
        return (
            self.n_layers,
            self.reupload,
            tuple(self.wires),
            _state(self.encoding),
            _state(self.ansatz),
            None if observables is None else tuple(map(id, observables)),
            _state(self.noise),
        )

    def __getstate__(self):
        state = super().__getstate__()
        state["_auto_devices"] = {}
        state.pop("_qnodes", None)
        return state

    def extra_repr(self) -> str:
        parts = [
            f"n_qubits={self.n_qubits}",
            f"n_layers={self.n_layers}",
            f"in_features={self.in_features}",
            f"out_features={self.out_features}",
            f"encoding={self.encoding!r}",
            f"ansatz={self.ansatz!r}",
        ]
        if self.reupload:
            parts.append("reupload=True")
        if self.qdevice is not None:
            parts.append(f"device={self.qdevice.name}")
        return ", ".join(parts)


FINITE_ROWS_SHOWN = 10


def _check_finite(layer: str, x: torch.Tensor, weight: torch.Tensor) -> None:
    """NaN / inf in the inputs or weights would give NaN outputs and NaN weight gradients silently.

    Skipped while a CUDA graph is being captured: the check reads a flag back to the host, which capture
    forbids (the eager warm-up calls before capture have checked the same shapes)."""
    if x.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    if not bool(torch.isfinite(weight).all()):
        bad = torch.nonzero(~torch.isfinite(weight.detach()))[:FINITE_ROWS_SHOWN].tolist()
        raise ValueError(
            f"{layer}: its weight holds NaN or inf (at {bad}); an earlier step diverged. Lower the learning "
            "rate or clip gradients, and re-initialise the weights (reset_parameters())."
        )
    finite = torch.isfinite(x.detach())
    if bool(finite.all()):
        return
    rows = torch.nonzero(~finite.reshape(-1, x.shape[-1]).all(-1)).reshape(-1)
    shown = rows[:FINITE_ROWS_SHOWN].tolist()
    more = f" and {len(rows) - len(shown)} more" if len(rows) > len(shown) else ""
    raise ValueError(
        f"{layer}: input rows {shown}{more} (of {x.reshape(-1, x.shape[-1]).shape[0]}) contain NaN or inf; "
        "they would give NaN outputs and NaN weight gradients. Clean or drop those rows (e.g. "
        "torch.nan_to_num), or pass check_finite=False to skip this check."
    )


def check_observables(observables, wires: list) -> list:
    """Observables as a list of PennyLane operators on ``wires``; None means ``Z`` on each wire and a
    letter ``"X"``/``"Y"``/``"Z"`` that Pauli on each wire."""
    if observables is None:
        observables = "Z"
    if isinstance(observables, str):
        paulis = {"X": qml.X, "Y": qml.Y, "Z": qml.Z}
        if observables not in paulis:
            raise ValueError(f"observables given as a string must be 'X', 'Y' or 'Z', got {observables!r}.")
        return [paulis[observables](w) for w in wires]
    if isinstance(observables, qml.operation.Operator):
        observables = [observables]
    observables = list(observables)
    if not observables:
        raise ValueError("observables is empty; give at least one operator (or None for Z on each wire).")
    for k, ob in enumerate(observables):
        if not isinstance(ob, qml.operation.Operator):
            raise TypeError(f"observables[{k}] must be a PennyLane operator, got {type(ob).__name__}.")
        outside = [w for w in ob.wires if w not in wires]
        if outside:
            raise ValueError(f"observables[{k}] = {ob} acts on wire(s) {outside}, outside the layer's wires {wires}.")
    return observables


def _state(part) -> tuple:
    """An encoding's, ansatz's or noise model's identity and plain settings: a setting changed in place after a
    call (``layer.encoding.rotation = "X"``) re-traces; keyed by identity alone, the old circuit ran on."""
    settings = getattr(part, "__dict__", None) or {}
    return (id(part),) + tuple(
        (name, value if isinstance(value, (str, int, float, bool, type(None))) else id(value))
        for name, value in sorted(settings.items())
    )


__all__ = ["VariationalLayer", "check_observables", "WEIGHT_INIT_LOW", "WEIGHT_INIT_HIGH"]

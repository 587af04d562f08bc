"""``qhybrid.tensornet``: a tensor-network simulator, a PennyLane device and a torch executor in one."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pennylane as qml
import psutil
import torch
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.preprocess import decompose, validate_device_wires, validate_measurements
from pennylane.measurements import MeasurementProcess
from pennylane.tape import QuantumScript
from pennylane.transforms.core import CompilePipeline

from ...errors import GradientError, UnsupportedOperationError
from ...typing import Backend, Optimizer
from ._measure import ANALYTIC_MEASUREMENTS
from ..._variant import Variant, tape_parameters
from ._simulate import CacheInfo, PlanCache, SimOptions, simulate
from ._structure import SKIPPED_OPS

DEFAULT_MEMORY_FRACTION = 0.5
"""Without an explicit ``max_memory``, a contraction may use this fraction of the RAM available now."""

MATRIX_MAX_WIRES = 10
"""Operators on more wires than this are decomposed rather than turned into one dense tensor."""

_BACKENDS = ("torch",)


def _stopping_condition(op: qml.operation.Operator) -> bool:
    if op.name in SKIPPED_OPS or op.name == "GlobalPhase":
        return True
    if isinstance(op, qml.operation.StatePrepBase):
        return True
    if isinstance(op, MeasurementProcess) or op.name == "MidMeasureMP":
        return False
    return op.has_matrix and (len(op.wires) <= MATRIX_MAX_WIRES or not op.has_decomposition)


def _supported_measurement(mp: MeasurementProcess) -> bool:
    return isinstance(mp, ANALYTIC_MEASUREMENTS)


class TensorNetworkDevice(Device):
    """Tensor-network simulator whose results and gradients are torch tensors on the parameters' device.

    Args:
        wires: number of wires or their labels (None: the circuit's own wires).

    Keyword Args:
        dtype: ``torch.complex128`` (default) or ``torch.complex64``; results are the matching real dtype.
        torch_device: where tensors live; None follows the circuit's parameters (CPU if none are tensors).
        backend: ``"torch"`` (CPU or CUDA). The seam for ``"cutensornet"`` is the contraction plan.
        max_memory: bytes a single intermediate tensor may take; None means half of the RAM available.
        optimizer: contraction-path finder, ``"auto"``, ``"greedy"``, ``"optimal"`` or ``"cotengra"``.
        plan_cache_size: how many compiled circuit structures to keep.

    >>> dev = TensorNetworkDevice(wires=2)
    >>> tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.CNOT([0, 1])], [qml.probs()])
    >>> dev.execute(tape)
    array([0.5, 0. , 0. , 0.5])
    """

    short_name = "qhybrid.tensornet"

    def __init__(
        self,
        wires=None,
        shots=None,
        *,
        dtype: torch.dtype = torch.complex128,
        torch_device: str | torch.device | None = None,
        backend: Backend = "torch",
        max_memory: float | None = None,
        optimizer: Optimizer = "auto",
        plan_cache_size: int = 1024,
    ) -> None:
        super().__init__(wires=wires)
        if shots is not None:
            self._shots = qml.measurements.Shots(shots)
        if dtype not in (torch.complex128, torch.complex64):
            raise ValueError(f"dtype must be torch.complex128 or torch.complex64, got {dtype}.")
        if backend == "auto":
            backend = "torch"
        if backend not in _BACKENDS:
            raise ValueError(
                f"backend {backend!r} is not available; choose one of {_BACKENDS} (cutensornet comes with "
                "the GPU extra)."
            )
        self.dtype = dtype
        self.torch_device = None if torch_device is None else torch.device(torch_device)
        self.backend = backend
        self.max_memory = max_memory
        self.optimizer = optimizer
        self._cache = PlanCache(plan_cache_size)

    @property
    def name(self) -> str:
        return self.short_name

    # --- qhybrid's own API ------------------------------------------------------------------
    def plan_cache_info(self) -> CacheInfo:
        """Hits, misses and size of the plan cache (one entry per circuit structure)."""
        return self._cache.info()

    def clear_plan_cache(self) -> None:
        self._cache.clear()

    def _options(self, params: Sequence) -> SimOptions:
        device = self.torch_device
        if device is None:
            device = next((p.device for p in params if isinstance(p, torch.Tensor)), torch.device("cpu"))
        max_memory = self.max_memory
        if max_memory is None:
            max_memory = DEFAULT_MEMORY_FRACTION * psutil.virtual_memory().available
        return SimOptions(self.dtype, device, float(max_memory), self.optimizer)

    def simulate_variants(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """Run each (tape, parameters) variant; variants of one structure share one contraction.

        Each result is a tuple with one torch tensor per measurement, differentiable in the parameters.
        """
        first = [p for v in variants for p in v.params[:8]]
        return simulate(variants, self.wires, self._options(first), self._cache)

    def execute_torch(self, tapes: Sequence[QuantumScript]) -> list[tuple[torch.Tensor, ...]]:
        """Torch results of already-preprocessed tapes, a tuple per tape with one tensor per measurement."""
        return self.simulate_variants([Variant(t, tape_parameters(t)) for t in tapes])

    # --- PennyLane device API --------------------------------------------------------------
    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> CompilePipeline:
        program = CompilePipeline()
        program.add_transform(
            decompose,
            stopping_condition=_stopping_condition,
            skip_initial_state_prep=True,
            name=self.name,
            error=UnsupportedOperationError,
        )
        program.add_transform(validate_device_wires, self.wires, name=self.name)
        program.add_transform(
            validate_measurements, analytic_measurements=_supported_measurement, name=self.name
        )
        return program

    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        if execution_config is None:
            return True
        if circuit is not None and circuit.shots:
            return False
        return execution_config.gradient_method in {"adjoint", "backprop", "best", "device"}

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        return self.supports_derivatives(execution_config, circuit)

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit=None) -> ExecutionConfig:
        config = config or ExecutionConfig()
        updates = {}
        method = config.gradient_method
        if method in ("best", "device"):
            method = "adjoint"
            updates["gradient_method"] = method
        if config.use_device_gradient is None:
            updates["use_device_gradient"] = method in {"adjoint", "backprop"}
        if config.use_device_jacobian_product is None:
            updates["use_device_jacobian_product"] = method == "adjoint"
        if config.grad_on_execution is None:
            updates["grad_on_execution"] = False
        if method == "backprop":
            updates["convert_to_numpy"] = False
        return replace(config, **updates)

    def execute(self, circuits, execution_config: ExecutionConfig | None = None):
        single = isinstance(circuits, QuantumScript)
        tapes = [circuits] if single else list(circuits)
        if any(t.shots for t in tapes):
            raise UnsupportedOperationError(
                "qhybrid.tensornet samples no shots yet; run it analytically (shots=None)."
            )
        variants = [Variant(t, tape_parameters(t)) for t in tapes]
        as_torch = any(isinstance(p, torch.Tensor) for v in variants for p in v.params)
        if not as_torch:
            variants = [Variant(v.tape, [_to_tensor(p) for p in v.params]) for v in variants]
        raw = self.simulate_variants(variants)
        results = tuple(_pennylane_structure(r, as_torch) for r in raw)
        return results[0] if single else results

    def compute_vjp(self, circuits, cotangents, execution_config: ExecutionConfig | None = None):
        from ...gradients.adjoint_tn import AdjointTN

        single = isinstance(circuits, QuantumScript)
        tapes = [circuits] if single else list(circuits)
        cots = [cotangents] if single else list(cotangents)
        vjps = AdjointTN(self).vjp_of_tapes(tapes, cots)
        return vjps[0] if single else tuple(vjps)

    def execute_and_compute_vjp(self, circuits, cotangents, execution_config=None):
        return self.execute(circuits, execution_config), self.compute_vjp(circuits, cotangents, execution_config)

    def compute_derivatives(self, circuits, execution_config: ExecutionConfig | None = None):
        from ...gradients.adjoint_tn import AdjointTN

        single = isinstance(circuits, QuantumScript)
        tapes = [circuits] if single else list(circuits)
        jacs = AdjointTN(self).jacobian_of_tapes(tapes)
        return jacs[0] if single else tuple(jacs)

    def execute_and_compute_derivatives(self, circuits, execution_config=None):
        return self.execute(circuits, execution_config), self.compute_derivatives(circuits, execution_config)


def _to_tensor(p):
    if isinstance(p, torch.Tensor):
        return p
    arr = np.asarray(qml.math.unwrap(p)) if not isinstance(p, (int, float, complex)) else p
    return torch.as_tensor(arr)


def _pennylane_structure(result: tuple, as_torch: bool):
    if not as_torch:
        result = tuple(r.detach().cpu().numpy() for r in result)
    return result[0] if len(result) == 1 else result


__all__ = ["TensorNetworkDevice", "GradientError"]

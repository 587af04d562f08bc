"""``qhybrid.tensornet``: a tensor-network simulator, a PennyLane device and a torch executor in one."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pennylane as qml
import psutil
import torch
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.modifiers import simulator_tracking, single_tape_support
from pennylane.devices.preprocess import (
    decompose,
    no_sampling,
    validate_device_wires,
    validate_measurements,
    validate_observables,
)
from pennylane.exceptions import DeviceError
from pennylane.math import Interface
from pennylane.measurements import (
    ClassicalShadowMP,
    ExpectationMP,
    MeasurementProcess,
    SampleMeasurement,
    ShadowExpvalMP,
    StateMeasurement,
)
from pennylane.tape import QuantumScript
from pennylane.transforms import broadcast_expand, defer_measurements
from pennylane.transforms.core import CompilePipeline

from ...errors import GradientError, UnsupportedOperationError
from ...typing import Backend, Optimizer
from ..._variant import Variant, tape_parameters
from .._protocol import vjp_calculator
from ._autograd import execute_traced, is_traced
from ._pathfind import DEFAULT_PLAN_TIME
from ._readout import ReadoutPlan, plan_readout
from ._sampling import sample_tapes
from ._simulate import CacheInfo, PlanCache, SimOptions, simulate
from .backends import BACKEND_NAMES, get_backend
from ._structure import SKIPPED_OPS

DEFAULT_MEMORY_FRACTION = 0.5
"""Without an explicit ``max_memory``, a contraction may use this fraction of the RAM available now."""

MATRIX_MAX_WIRES = 10
"""Operators on more wires than this are decomposed rather than turned into one dense tensor."""


_DEVICE_GRADIENTS = frozenset({"adjoint", "backprop", "best", "device"})
"""Gradient methods the device answers itself (anything else is a PennyLane gradient transform)."""

_MCM_METHODS = frozenset({None, "device", "deferred"})
"""Mid-circuit measurements run deferred: as controlled gates on extra wires (qml.defer_measurements)."""


class UnsupportedOnDeviceError(UnsupportedOperationError, DeviceError):
    """An operator or measurement qhybrid.tensornet cannot run; a PennyLane ``DeviceError`` as well, so
    PennyLane's tools (and its device test suite's ``--skip-ops``) recognise it."""


# --- preprocessing --------------------------------------------------------------------------


def _rebinds(op: qml.operation.Operator) -> bool:
    """Whether the simulator can put new parameter values into ``op`` (some composite operators, such
    as ``Evolution``, cannot take back their own ``data``)."""
    try:
        qml.ops.functions.bind_new_parameters(op, list(op.data))
    except (IndexError, ValueError, TypeError, AttributeError):
        return False
    return True


def _contracts_whole(op: qml.operation.Operator) -> bool:
    """Whether ``op`` is contracted as one tensor (True) or must be decomposed first (False)."""
    if op.name in SKIPPED_OPS or op.name == "GlobalPhase":
        return True
    if isinstance(op, qml.operation.StatePrepBase):
        return True  # mid-circuit ones are caught by _decompose_for_tensornet
    if isinstance(op, MeasurementProcess) or op.name == "MidMeasureMP":
        return False
    if not op.has_matrix or (len(op.wires) > MATRIX_MAX_WIRES and op.has_decomposition):
        return False
    if op.num_params and op.name not in _NATIVE_GATES and op.has_decomposition:
        return _rebinds(op)
    return True


@qml.transform
def _decompose_for_tensornet(tape: QuantumScript, *, device_wires, target_gates, name: str):
    """Decompose every operator the contraction cannot take as one tensor.

    State preparations stay whole only where no earlier operator touched their wires; elsewhere they are
    decomposed into gates. Broadcast operators stay broadcast: the batch is one more tensor index.
    """
    late_preps, touched = set(), set()
    for op in tape.operations:
        if isinstance(op, qml.operation.StatePrepBase) and not touched.isdisjoint(op.wires):
            late_preps.add(id(op))
        touched.update(op.wires)

    def stopping_condition(op):
        return id(op) not in late_preps and _contracts_whole(op)

    return decompose(
        tape,
        stopping_condition=stopping_condition,
        skip_initial_state_prep=False,
        device_wires=device_wires,
        target_gates=target_gates,
        name=name,
        error=UnsupportedOnDeviceError,
    )


def _observable_analytic(obs, is_expval: bool) -> bool:
    if isinstance(obs, qml.ops.CompositeOp):
        return all(_observable_analytic(o, is_expval) for o in obs.operands)
    if isinstance(obs, qml.ops.SymbolicOp):
        return _observable_analytic(obs.base, is_expval)
    if obs.name == "SparseHamiltonian":
        return is_expval
    return obs.pauli_rep is not None or obs.has_matrix or obs.has_diagonalizing_gates


def _observable_sampled(obs) -> bool:
    if isinstance(obs, qml.ops.CompositeOp):
        return all(_observable_sampled(o) for o in obs.operands)
    if isinstance(obs, qml.ops.SymbolicOp):
        return _observable_sampled(obs.base)
    return obs.has_diagonalizing_gates


def _analytic_measurement(mp: MeasurementProcess) -> bool:
    if not isinstance(mp, StateMeasurement):
        return False
    return mp.obs is None or _observable_analytic(mp.obs, isinstance(mp, ExpectationMP))


def _sample_measurement(mp: MeasurementProcess) -> bool:
    if isinstance(mp, (ClassicalShadowMP, ShadowExpvalMP)):
        return True
    if not isinstance(mp, SampleMeasurement):
        return False
    return mp.obs is None or _observable_sampled(mp.obs)


def _null_postprocessing(results):
    return results[0]


@qml.transform
def _expand_broadcast_shadows(tape: QuantumScript):
    """Classical shadows draw one random basis per shot and cannot share a batch: split those tapes."""
    if tape.batch_size is not None and any(
        isinstance(mp, (ClassicalShadowMP, ShadowExpvalMP)) for mp in tape.measurements
    ):
        return broadcast_expand(tape)
    return (tape,), _null_postprocessing


# --- the device -------------------------------------------------------------------------------


_AVAILABLE = [0.0, -1.0]  # (bytes, when read)
AVAILABLE_MEMORY_TTL_S = 1.0
"""The free-memory reading behind the default max_memory is reused this long (reading it costs more than a
small circuit's whole step)."""


def _available_memory() -> float:
    now = time.monotonic()
    if now - _AVAILABLE[1] > AVAILABLE_MEMORY_TTL_S:
        _AVAILABLE[:] = [float(psutil.virtual_memory().available), now]
    return _AVAILABLE[0]


@simulator_tracking
@single_tape_support
class TensorNetworkDevice(Device):
    """Tensor-network simulator whose results and gradients are torch tensors on the parameters' device.

    It is also the PennyLane device ``"qhybrid.tensornet"`` (``qml.device("qhybrid.tensornet", wires=4)``):
    capabilities in ``tensornet.toml``; analytic expval/var/probs/state/density_matrix (and every other
    state measurement, read off the contracted state); finite shots (sample, counts, shot vectors) by
    sampling the contracted state; ``diff_method="adjoint"`` (device VJPs by reverse mode through the
    contraction, chosen by ``"best"``) and ``"backprop"`` (torch or autograd parameters).

    Args:
        wires: number of wires or their labels (None: the circuit's own wires).
        shots: default shots of PennyLane workflows on this device (deprecated by PennyLane in favour of
            ``qml.set_shots``); the device always follows each tape's own ``shots``.

    Keyword Args:
        dtype: ``torch.complex128`` (default) or ``torch.complex64``; results are the matching real dtype.
        torch_device: where tensors live; None follows the circuit's parameters (CPU if none are tensors).
        backend: what executes contraction plans: ``"torch"`` (default; CPU or CUDA), ``"cutensornet"``
            (NVIDIA cuTensorNet on a CUDA GPU, ``pip install 'qhybrid[gpu]'``) or ``"auto"`` (cutensornet
            where it runs, else torch). Plans serve circuits with state preparation and circuits on
            more than 20 wires; narrower circuits run the compiled state-vector program in torch on the
            parameters' device. See docs/GPU.md.
        max_memory: bytes a single intermediate tensor may take; None means half of the RAM available.
            The cutensornet backend also keeps cuTensorNet's workspace for one contraction within it
            (and within 80% of the GPU's free memory), refusing a network that cannot fit.
        optimizer: contraction-path finder, ``"auto"``, ``"greedy"``, ``"optimal"`` or ``"cotengra"``.
        plan_time: seconds the contraction-path searches of one circuit structure may take (default
            1.0): a greedy path comes at once, a randomised search only where the greedy path is costly;
            0 means greedy paths only. Raise it for long training runs of costly networks.
        plan_cache_size: how many compiled circuit structures to keep.
        seed: seed of the numpy ``Generator`` that draws shots (an int, a ``SeedSequence``, a
            ``Generator``, or None for fresh entropy).

    >>> dev = TensorNetworkDevice(wires=2)
    >>> tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.CNOT([0, 1])], [qml.probs()])
    >>> dev.execute(tape)
    array([0.5, 0. , 0. , 0.5])
    """

    short_name = "qhybrid.tensornet"
    reverse_mode = True
    """Results are differentiable torch tensors: the adjoint JPC can run on this device."""
    config_filepath = str(Path(__file__).with_name("tensornet.toml"))

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
        plan_time: float = DEFAULT_PLAN_TIME,
        seed=None,
    ) -> None:
        super().__init__(wires=wires)
        if shots is not None:
            self._shots = qml.measurements.Shots(shots)
        if dtype not in (torch.complex128, torch.complex64):
            raise ValueError(f"dtype must be torch.complex128 or torch.complex64, got {dtype}.")
        if backend not in BACKEND_NAMES:
            raise ValueError(
                f"backend {backend!r} is not known; choose one of {BACKEND_NAMES} (cutensornet comes with the "
                "GPU extra: pip install 'qhybrid[gpu]')."
            )
        if not plan_time >= 0:  # also refuses NaN
            raise ValueError(f"plan_time must be a number of seconds >= 0, got {plan_time!r}.")
        self.plan_time = float(plan_time)
        self.dtype = dtype
        self.torch_device = None if torch_device is None else torch.device(torch_device)
        if backend == "cutensornet":  # refuse now, with the reason, rather than at the first circuit
            get_backend(backend, self.torch_device if self.torch_device is not None else "cuda")
        self.backend = backend
        self.max_memory = max_memory
        self.optimizer = optimizer
        self._cache = PlanCache(plan_cache_size)
        self._rng = np.random.default_rng(seed)

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
            device = _tensor_device(params)
        max_memory = self.max_memory
        if max_memory is None:
            max_memory = DEFAULT_MEMORY_FRACTION * _available_memory()
        return SimOptions(self.dtype, device, float(max_memory), self.optimizer, self.backend, self.plan_time)

    def simulate_variants(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """Run each (tape, parameters) variant; variants of one structure share one contraction.

        Each result is a tuple with one torch tensor per measurement, differentiable in the parameters.
        """
        sampled = [i for i, v in enumerate(variants) if v.tape.shots]
        if not sampled:
            first = variants[0]
            seen = first.gather.inputs if first.gather is not None else first.params
            return simulate(variants, self.wires, self._options(seen), self._cache)
        exact = [i for i, v in enumerate(variants) if not v.tape.shots]
        results: list = [None] * len(variants)
        if exact:
            for i, r in zip(exact, self.simulate_variants([variants[i] for i in exact])):
                results[i] = r
        for i, r in zip(sampled, self._sample_variants([variants[i] for i in sampled])):
            results[i] = r
        return results

    def _sample_variants(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """Finite-shot results (no gradient through sampling) as torch tensors, one per measurement."""
        for v in variants:
            if v.tape.shots.has_partitioned_shots:
                raise UnsupportedOperationError(
                    f"Shot vectors ({v.tape.shots}) are served through PennyLane's API "
                    "(qml.qnode on qml.device('qhybrid.tensornet')); qhybrid.execute takes one shot count."
                )
        tapes = [v.bound_tape(detach=True) for v in variants]
        out = []
        for tape, res in zip(tapes, sample_tapes(tapes, self.wires, self._run_states, self._rng)):
            items = (res,) if len(tape.measurements) == 1 else tuple(res)
            out.append(tuple(_as_torch_result(r) for r in items))
        return out

    def execute_torch(self, tapes: Sequence[QuantumScript]) -> list[tuple[torch.Tensor, ...]]:
        """Torch results of already-preprocessed tapes, a tuple per tape with one tensor per measurement."""
        return self.simulate_variants([Variant(t, tape_parameters(t)) for t in tapes])

    # --- PennyLane device API: configuration ------------------------------------------------
    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        """Adjoint and backprop, analytic only (finite shots go to PennyLane's parameter-shift)."""
        if execution_config is None:
            return True
        method = execution_config.gradient_method
        if method not in _DEVICE_GRADIENTS:
            return False
        if method == "backprop" and execution_config.interface in (Interface.JAX, Interface.JAX_JIT):
            return False
        if circuit is not None and circuit.shots and method in ("adjoint", "backprop"):
            # asked for by name: say what to use instead (PennyLane's own message names no fix)
            raise GradientError(
                f"Device {self} does not support {method} with requested circuit: it has finite shots "
                f"({circuit.shots}), and {method} differentiates exact results. Use diff_method='parameter-shift' "
                "for sampled gradients, or drop the shots."
            )
        return circuit is None or not circuit.shots

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        return self.supports_derivatives(execution_config, circuit)

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit=None) -> ExecutionConfig:
        """Resolve ``"best"``/``"device"`` to ``"adjoint"`` (``"backprop"`` for higher derivatives) and
        answer adjoint with device VJPs: one reverse pass through the contraction per backward call, where
        a Jacobian would cost one per output element. PennyLane's default ``device_vjp=False`` cannot be
        told apart from an explicit one, so adjoint always uses the VJP (the numbers are the same)."""
        config = config or ExecutionConfig()
        updates = {}
        method = config.gradient_method
        if method in ("best", "device"):
            method = "backprop" if config.derivative_order > 1 else "adjoint"
            updates["gradient_method"] = method
        if config.use_device_gradient is None:
            updates["use_device_gradient"] = method in {"adjoint", "backprop"}
        if method == "adjoint":
            updates["use_device_jacobian_product"] = True
        elif config.use_device_jacobian_product is None:
            updates["use_device_jacobian_product"] = False
        if config.grad_on_execution is None:
            updates["grad_on_execution"] = False
        if method == "backprop":
            updates["convert_to_numpy"] = False
        mcm = config.mcm_config
        if mcm.mcm_method not in _MCM_METHODS:
            raise DeviceError(
                f"mcm_method={mcm.mcm_method!r} is not supported by {self.name}; use mcm_method='deferred' "
                "(mid-circuit measurements become controlled gates on extra wires)."
            )
        updates["mcm_config"] = replace(mcm, mcm_method="deferred")
        return replace(config, **updates)

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> CompilePipeline:
        config = execution_config or ExecutionConfig()
        program = CompilePipeline()
        program.add_transform(defer_measurements, allow_postselect=False)
        program.add_transform(
            _decompose_for_tensornet,
            device_wires=self.wires,
            target_gates=self.capabilities.gate_set(),
            name=self.name,
        )
        program.add_transform(validate_device_wires, self.wires, name=self.name)
        program.add_transform(
            validate_measurements,
            analytic_measurements=_analytic_measurement,
            sample_measurements=_sample_measurement,
            name=self.name,
        )
        program.add_transform(
            validate_observables,
            stopping_condition=lambda obs: _observable_analytic(obs, True),
            stopping_condition_shots=_observable_sampled,
            name=self.name,
        )
        program.add_transform(_expand_broadcast_shadows)
        if config.gradient_method in ("adjoint", "backprop"):
            program.add_transform(no_sampling, name=f"{config.gradient_method} + {self.name}")
        return program

    # --- PennyLane device API: execution -----------------------------------------------------
    def execute(self, circuits, execution_config: ExecutionConfig | None = None):
        tapes = list(circuits)
        results: list = [None] * len(tapes)
        shot_ids = [i for i, t in enumerate(tapes) if t.shots]
        exact_ids = [i for i, t in enumerate(tapes) if not t.shots]
        if exact_ids:
            for i, r in zip(exact_ids, self._execute_exact([tapes[i] for i in exact_ids])):
                results[i] = r
        if shot_ids:
            sampled = sample_tapes([tapes[i] for i in shot_ids], self.wires, self._run_states, self._rng)
            for i, r in zip(shot_ids, sampled):
                results[i] = r
        return tuple(results)

    def _execute_exact(self, tapes: list[QuantumScript]) -> list:
        plans = [plan_readout(t, self.wires) for t in tapes]
        params = [tape_parameters(t) for t in tapes]
        flat = [p for per in params for p in per]
        if any(is_traced(p) for p in flat):  # backprop with autograd (pennylane.numpy) parameters
            sizes = [len(per) for per in params]

            def run(torch_params):
                per, start = [], 0
                for n in sizes:
                    per.append(torch_params[start : start + n])
                    start += n
                return self._run_plans(plans, per)

            return [_pennylane_structure(r) for r in execute_traced(run, flat)]
        if any(isinstance(p, torch.Tensor) for p in flat):  # backprop with torch parameters
            return [_pennylane_structure(r) for r in self._run_plans(plans, params)]
        with torch.no_grad():
            raw = self._run_plans(plans, params)
        return [_pennylane_structure(tuple(_to_numpy(x) for x in r)) for r in raw]

    def _run_plans(self, plans: Sequence[ReadoutPlan], params: Sequence[Sequence]) -> list[tuple]:
        """Torch results (one tuple per tape, one tensor per measurement) of planned tapes."""
        variants = [
            Variant(plan.core_tape, [_to_tensor(p) for p in _core_params(plan, per)])
            for plan, per in zip(plans, params)
        ]
        raw = self.simulate_variants(variants)
        return [plan.assemble(r) for plan, r in zip(plans, raw)]

    def _run_states(self, tapes: list[QuantumScript]) -> list[np.ndarray]:
        with torch.no_grad():
            raw = self.simulate_variants([Variant(t, [_to_tensor(p) for p in tape_parameters(t)]) for t in tapes])
        return [r[0].detach().cpu().numpy() for r in raw]

    # --- PennyLane device API: derivatives ---------------------------------------------------
    def compute_vjp(self, circuits, cotangents, execution_config: ExecutionConfig | None = None):
        """Vector-Jacobian products by reverse mode through the contraction (``AdjointTN``).

        ``cotangents[i]`` is shaped like tape ``i``'s result (PennyLane's d/dz convention for complex
        results); the answer per tape is a tuple with one array per trainable parameter, shaped like it.
        """
        prepared = [self._derivative_tape(t) for t in circuits]
        jpc = _adjoint(self)
        variants, trainable = [d.variant for d in prepared], [d.trainable for d in prepared]
        with torch.no_grad():
            results, saved = jpc.forward(variants, trainable)
            dy = [
                _core_cotangents(d.plan, res, _per_measurement(cot, len(d.plan.tape.measurements)))
                for d, res, cot in zip(prepared, results, cotangents)
            ]
            vjps = jpc.compute_vjp(variants, trainable, dy, saved)
        return tuple(_ParameterVJPs(d.per_parameter([_to_numpy(g) for g in per])) for d, per in zip(prepared, vjps))

    def execute_and_compute_vjp(self, circuits, cotangents, execution_config: ExecutionConfig | None = None):
        return self.execute(circuits, execution_config), self.compute_vjp(circuits, cotangents, execution_config)

    def compute_derivatives(self, circuits, execution_config: ExecutionConfig | None = None):
        """Jacobians from one VJP per output element, all sharing one forward contraction per tape.

        Per tape, PennyLane's structure: one array (one measurement, one trainable parameter), a tuple
        over parameters, a tuple over measurements, or a tuple over measurements of tuples over
        parameters; each array shaped ``result.shape + parameter.shape`` (so a broadcast parameter gives
        the full batch-by-batch block, diagonal since tapes of a batch are independent).
        """
        return tuple(self._jacobian(t) for t in circuits)

    def execute_and_compute_derivatives(self, circuits, execution_config: ExecutionConfig | None = None):
        return self.execute(circuits, execution_config), self.compute_derivatives(circuits, execution_config)

    def _derivative_tape(self, tape: QuantumScript) -> "_DerivativeTape":
        plan = plan_readout(tape, self.wires)
        params = [_to_tensor(p) for p in _core_params(plan, tape_parameters(tape))]
        trainable, positions = [], []
        for k, i in enumerate(tape.trainable_params):
            j = plan.param_map[i]
            if j is None:
                raise GradientError(
                    f"Parameter {i} of the tape belongs to the observable of a measurement that "
                    f"{self.name} reads off the state; it cannot be trainable with adjoint. Use backprop."
                )
            if params[j].is_floating_point() or params[j].is_complex():  # integers (basis states): 0
                trainable.append(j)
                positions.append(k)
        zeros = [np.zeros(np.shape(params[plan.param_map[i]])) for i in tape.trainable_params]
        return _DerivativeTape(plan, Variant(plan.core_tape, params), trainable, positions, zeros)

    def _jacobian(self, tape: QuantumScript):
        d = self._derivative_tape(tape)
        plan, variant, trainable = d.plan, d.variant, d.trainable
        n_meas, n_params = len(tape.measurements), len(tape.trainable_params)
        jpc = _adjoint(self)
        with torch.no_grad():
            (core,), saved = jpc.forward([variant], [trainable])
            outputs = plan.assemble(core)
            per_meas = []
            for m, out in enumerate(outputs):
                rows = [[] for _ in trainable]
                units = (1.0, 1j) if out.is_complex() else (1.0,)
                for e in range(max(out.numel(), 1)):
                    parts = []
                    for unit in units:
                        cot = [torch.zeros_like(o) for o in outputs]
                        cot[m].view(-1)[e] = unit
                        dy = _core_cotangents(plan, core, cot, torch_convention=True)
                        parts.append(jpc.compute_vjp([variant], [trainable], [dy], saved)[0])
                    for k in range(len(trainable)):
                        rows[k].append(parts[0][k] if len(parts) == 1 else parts[0][k] + 1j * parts[1][k])
                jac = [
                    _to_numpy(torch.stack(rows[k]).reshape(tuple(out.shape) + tuple(variant.params[j].shape)))
                    for k, j in enumerate(trainable)
                ]
                full = [np.zeros(tuple(out.shape) + z.shape) for z in d.zeros]
                jac = d.per_parameter(jac, full)
                per_meas.append(jac[0] if n_params == 1 else tuple(jac))
        if not n_params:
            per_meas = [() for _ in range(n_meas)]
        return per_meas[0] if n_meas == 1 else tuple(per_meas)


# --- helpers ------------------------------------------------------------------------------------


@dataclass
class _DerivativeTape:
    """A tape set up for AdjointTN: its readout plan, its core variant, and which of its trainable
    parameters (``positions``, among ``tape.trainable_params``) are differentiated as ``trainable``
    (indices into the variant's parameters); the others are integers, whose derivatives are zero."""

    plan: ReadoutPlan
    variant: Variant
    trainable: list
    positions: list
    zeros: list

    def per_parameter(self, values: list, fill: list | None = None) -> list:
        """One entry per trainable parameter of the tape: ``values`` where differentiated, else zeros."""
        out = list(self.zeros if fill is None else fill)
        for k, v in zip(self.positions, values):
            out[k] = v
        return out


class _ParameterVJPs(tuple):
    """One tape's VJPs, one array per trainable parameter (shapes may differ: broadcast and scalar).

    PennyLane's torch interface tests each tape's VJPs for emptiness with ``np.squeeze(vjps)``, which
    fails on arrays of different shapes; this tuple answers it with one entry per parameter.
    """

    def squeeze(self, axis=None):
        return np.zeros(len(self))


def _adjoint(device):
    return vjp_calculator(device)


def _core_params(plan: ReadoutPlan, params: Sequence) -> list:
    return [p for p, j in zip(params, plan.param_map) if j is not None]


def _per_measurement(cotangent, n_meas: int) -> list:
    return [cotangent] if n_meas == 1 else list(cotangent)


def _core_cotangents(plan: ReadoutPlan, core: Sequence[torch.Tensor], cots: Sequence, *, torch_convention=False):
    """Cotangents of the core tape's results from those of the tape's measurements.

    PennyLane's cotangent of a complex result is dL/dz; torch's backward wants dL/dz* (its conjugate).
    Measurements read off the state pass their cotangents back through that read-out.
    """
    dy = [torch.zeros_like(c) for c in core]
    for i, cot in zip(plan.core_index, cots):
        if i is not None:
            dy[i] = dy[i] + _as_cotangent(cot, core[i], torch_convention)
    if plan.needs_state:
        psi = core[0].detach().requires_grad_(True)
        with torch.enable_grad():
            outs = plan.assemble([psi] + [c.detach() for c in core[1:]])
        pairs = [
            (outs[m], _as_cotangent(cot, outs[m], torch_convention))
            for m, (i, cot) in enumerate(zip(plan.core_index, cots))
            if i is None and outs[m].requires_grad
        ]
        if pairs:
            (g,) = torch.autograd.grad([p[0] for p in pairs], [psi], [p[1] for p in pairs], allow_unused=True)
            if g is not None:
                dy[0] = dy[0] + g
    return dy


def _as_cotangent(cot, like: torch.Tensor, torch_convention: bool) -> torch.Tensor:
    """``cot`` as a tensor of ``like``'s shape, dtype and device (conjugated for torch if complex)."""
    t = cot if isinstance(cot, torch.Tensor) else torch.as_tensor(np.asarray(qml.math.unwrap(cot)))
    if t.is_complex() and not like.is_complex():
        t = t.real
    t = t.to(device=like.device, dtype=like.dtype)
    t = t.reshape(like.shape) if t.numel() == like.numel() else t.expand(like.shape)
    return t.conj() if like.is_complex() and not torch_convention else t


def _to_tensor(p):
    if isinstance(p, torch.Tensor):
        return p
    if isinstance(p, bool):
        return torch.tensor(p)
    if isinstance(p, int):
        return torch.tensor(p, dtype=torch.int64)
    if isinstance(p, float):
        return torch.tensor(p, dtype=torch.float64)
    if isinstance(p, complex):
        return torch.tensor(p, dtype=torch.complex128)
    return torch.as_tensor(np.asarray(qml.math.unwrap(p)))


def _as_torch_result(r) -> torch.Tensor:
    if isinstance(r, dict):  # counts have no tensor form
        raise UnsupportedOperationError(
            "qml.counts is served through PennyLane's API (qml.qnode on qml.device('qhybrid.tensornet')); "
            "use qml.sample or qml.probs with qhybrid.execute."
        )
    return r if isinstance(r, torch.Tensor) else torch.as_tensor(np.asarray(r))


def _to_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return np.asarray(t)


def _pennylane_structure(result: tuple):
    return result[0] if len(result) == 1 else tuple(result)


_NATIVE_GATES = frozenset(TensorNetworkDevice.capabilities.operations)

__all__ = ["TensorNetworkDevice", "UnsupportedOnDeviceError", "GradientError"]


def _tensor_device(params: Sequence) -> torch.device:
    """Where a run's tensors live: an accelerator before the CPU (a CPU tensor beside CUDA parameters is a
    constant such as a ``QubitUnitary`` matrix built with ``torch.tensor``), the CPU when none is a tensor."""
    for p in params:
        if isinstance(p, torch.Tensor) and p.device.type != "cpu":
            return p.device
    return torch.device("cpu")

"""``qhybrid.tensornet``: a tensor-network simulator, a PennyLane device and a torch executor in one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pennylane as qml
import torch
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.modifiers import simulator_tracking, single_tape_support
from pennylane.devices.preprocess import no_sampling, validate_device_wires, validate_measurements, validate_observables
from pennylane.math import Interface
from pennylane.tape import QuantumScript
from pennylane.transforms import defer_measurements
from pennylane.transforms.core import CompilePipeline

from ...errors import GradientError, UnsupportedOperationError, refuse_function_transforms
from ...typing import Backend, Optimizer
from ..._inference import outside_inference_mode
from ..._variant import Variant, tape_parameters
from .._collector import settle_long_lived
from .._memory import recent_available_memory
from .._malloc import tune_malloc
from .._threads import small_work_threads
from .plugin.autograd import execute_traced, is_traced
from .plugin.torch_tapes import run_torch_tapes
from .engines.network.pathfind import DEFAULT_PLAN_TIME, PathSettings
from .engines.network.hyper_tier import check_progress
from .engines.lightcone.spread import check_spread_options
from .readout.readout import ReadoutPlan, plan_readout
from .engines.mps.settings import mps_settings
from ._mps_method import MPSMethod
from ._options import CacheInfo, PlanCache, SimOptions, checked_max_memory, checked_plan_options, checked_torch_device
from ._options import path_store, tensor_device
from ._bound import run_bound
from ._simulate import simulate
from .backends import BACKEND_NAMES, get_backend
from .readout import entropies_from_density_matrices, identity_terms_by_norm, measurement_values_as_observables
from .readout import refuse_non_hermitian, renormalise_postselection
from ._empty_batch import with_empty_batches
from .engines.mixed import NoiseDraws, check_noise_options, trajectory_fields
from .plugin.conversions import _as_torch_result, _pennylane_structure, _to_numpy, _to_tensor
from .plugin.deferred_wires import spare_wires_for_deferral
from .plugin.imaginary_exponents import evolutions_from_exponentials
from .plugin.measured_cone import measured_cone
from .plugin.singleton_batches import broadcast_singletons
from .plugin.config import gives_torch, refuse_second_derivative_of_numpy_tapes, refuse_second_derivative_of_vjp, resolve_config
from .plugin.derivatives import _core_params, device_vjps, jacobian
from .plugin.preprocess import UnsupportedOnDeviceError, _analytic_measurement, _decompose_for_tensornet
from .plugin.preprocess import _expand_broadcast_shadows, _observable_analytic, _observable_sampled, _sample_measurement

DEFAULT_MEMORY_FRACTION = 0.5
"""Without an explicit ``max_memory``, a contraction may use this fraction of the memory the process can still
take now (``devices._memory.available_memory``)."""

DEFAULT_INTERMEDIATE_FRACTION = 0.125
"""Without an explicit ``max_memory``, one intermediate of a contraction plan may take this fraction of that memory
(plans are sliced to it): an einsum step holds its operands, torch's permuted copies of them and its result at
once, and the backward holds a step's cotangent beside them, so one step needs several times its largest tensor.
With the half above, an 8x8 lattice QAOA p=4 was planned with 4 GiB intermediates and died asking for one with
8.7 GB left (2026-11-26)."""

_DEVICE_GRADIENTS = frozenset({"adjoint", "backprop", "best", "device"})
"""Gradient methods the device answers itself (anything else is a PennyLane gradient transform)."""


@simulator_tracking
@single_tape_support
class TensorNetworkDevice(MPSMethod, Device):
    """Tensor-network simulator whose results and gradients are torch tensors on the parameters' device.

    It is also the PennyLane device ``"qhybrid.tensornet"`` (``qml.device("qhybrid.tensornet", wires=4)``):
    capabilities in ``tensornet.toml``; analytic expval/var/probs/state/density_matrix (and every other
    state measurement, read off the contracted state); finite shots (sample, counts, shot vectors) by
    sampling the contracted state; ``diff_method="adjoint"`` (device VJPs by reverse mode through the
    contraction) and ``"backprop"`` (torch or autograd parameters, every derivative order; what ``"best"``
    picks for those interfaces).

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
        max_memory: bytes a single intermediate tensor may take; None means half of what the process can still
            take (available RAM, less where `ulimit -v` or a container's cgroup limit leaves less) for state
            vectors and an eighth of it for a contraction plan's intermediates (plans are sliced to fit: a
            contraction step holds several tensors of its largest size at once).
            The cutensornet backend also keeps cuTensorNet's workspace for one contraction within it
            (and within 80% of the GPU's free memory), refusing a network that cannot fit.
        optimizer: contraction-path finder, ``"auto"``, ``"greedy"``, ``"optimal"`` or ``"cotengra"``.
        plan_time: seconds the contraction-path searches of one circuit structure may take (default
            1.0): a greedy path comes at once, a randomised search only where the greedy path is costly;
            0 means greedy paths only. Raise it for long training runs of costly networks. Costly networks plan
            on all cores, with a bar on stderr after 3 s (``progress``: None on a tty only, True, False).
        path_cache: where contraction paths are kept, by network structure, so a later process plans
            nothing: True (default) ``$QHYBRID_CACHE_DIR/paths`` or ``~/.cache/qhybrid/paths``, a
            directory, or False for none.
        plan_cache_size: how many compiled circuit structures to keep.
        seed: seed of the numpy ``Generator`` that draws shots (an int, a ``SeedSequence``, a
            ``Generator``, or None for fresh entropy).
        spread_classes: True (the default group) or a gloo/nccl ``ProcessGroup``: every rank runs its share of
            a wide circuit's light-cone classes; results are all-gathered, gradients summed (first order), each
            rank gets one process's numbers. Ranks must run the same circuits and parameters (checked); without
            ``torch.distributed`` initialised all runs here (warned once). See ``engines/lightcone/spread.py``.
        spread_slices: as ``spread_classes``, for the slices of each contraction sliced to ``max_memory``: every
            rank contracts its share, sums and gradients are all-reduced. Not with spread_classes. docs/SPREAD.md.
        method: ``"auto"`` (exact methods) or ``"mps"``, a truncated matrix product state with ``max_bond_dim``
            (None: no cap) and ``cutoff`` (None: drop numerical zeros, 0: keep all); docs/MPS.md.
        noise, trajectories: ``"exact"`` (default: the density-matrix engine) or ``"trajectories"`` (``trajectories``
            a sample, default 256, refused beside ``"exact"``; standard errors in ``trajectory_standard_errors``).

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
        plan_time: float = DEFAULT_PLAN_TIME, progress: bool | None = None,
        path_cache: bool | str | os.PathLike = True, seed=None,
        spread_classes=False, spread_slices=False,
        method: str = "auto", max_bond_dim: int | None = None, cutoff: float | None = None,
        noise: str = "exact", trajectories: int | None = None,
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
        self.plan_time = checked_plan_options(optimizer, plan_time)
        self.path_cache, self.progress = path_store(path_cache), check_progress(progress)
        self.dtype = dtype
        self.torch_device = checked_torch_device(torch_device)
        if backend == "cutensornet":  # refuse now, with the reason, rather than at the first circuit
            get_backend(backend, self.torch_device if self.torch_device is not None else "cuda")
        self.backend = backend
        self.max_memory = checked_max_memory(max_memory)
        self.optimizer = optimizer
        self._cache = PlanCache(plan_cache_size)
        self._rng = np.random.default_rng(seed)
        self.spread_classes, self.spread_slices = check_spread_options(spread_classes, spread_slices)
        self.method, self._mps = method, mps_settings(method, max_bond_dim, cutoff, dtype)
        self.noise, self.trajectories = check_noise_options(noise, trajectories)  # docs/NOISE.md
        self._noise_rng, self.trajectory_standard_errors = NoiseDraws(seed), []
        settle_long_lived()  # (the imported modules: not counted as new objects by the next full pass)
        tune_malloc()  # state buffers stay mapped between steps (devices/_malloc: ~700 page faults a step less)

    @property
    def name(self) -> str:
        return self.short_name

    # --- qhybrid's own API ------------------------------------------------------------------
    def plan_cache_info(self) -> CacheInfo:
        """Hits, misses and size of the plan cache (one entry per circuit structure)."""
        return self._cache.info()

    def clear_plan_cache(self) -> None:
        self._cache.clear()

    def _memory_budget(self) -> tuple[float, float]:
        """(bytes a contraction may take, elements one intermediate may hold): ``max_memory``, or fractions of
        what the process can still take."""
        if self.max_memory is None:
            room = recent_available_memory()
            return DEFAULT_MEMORY_FRACTION * room, DEFAULT_INTERMEDIATE_FRACTION * room / self.dtype.itemsize
        return float(self.max_memory), float(self.max_memory) / self.dtype.itemsize

    def _options(self, params: Sequence) -> SimOptions:
        device = self.torch_device
        if device is None:
            device = tensor_device(params)
        max_memory, elements = self._memory_budget()
        paths = PathSettings(self.optimizer, elements, self.path_cache, progress=self.progress)
        return SimOptions(self.dtype, device, float(max_memory), paths, self.backend, self.plan_time,
                          self.spread_classes, self._mps, **trajectory_fields(self), spread_slices=self.spread_slices)

    @outside_inference_mode
    @small_work_threads  # one intra-op thread for small states (devices/_threads)
    def simulate_variants(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """Run each (tape, parameters) variant; variants of one structure share one contraction.

        Each result is a tuple with one torch tensor per measurement, differentiable in the parameters.
        Variants with an empty batch get empty results (``_empty_batch``).
        """
        with_empty = with_empty_batches(variants, self.simulate_variants)
        if with_empty is not None:
            return with_empty
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

    def simulate_one_node(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]] | None:
        """``devices._protocol.one_node_results``: one gathered narrow circuit as one autograd node, else None."""
        return None if self._mps is not None else run_bound(self, variants)

    def _sample_variants(self, variants: Sequence[Variant]) -> list[tuple[torch.Tensor, ...]]:
        """Finite-shot results (no gradient through sampling) as torch tensors, one per measurement."""
        for v in variants:
            if v.tape.shots.has_partitioned_shots:
                raise UnsupportedOperationError(
                    f"Shot vector {v.tape.shots} reached simulate_variants, which takes one shot count per tape: "
                    "split it first (qhybrid.execute, qhybrid.qnode and the device's execute run one tape per setting)."
                )
        tapes = [v.bound_tape(detach=True) for v in variants]
        out = []
        for tape, res in zip(tapes, self._sample_tapes(tapes)):
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
                f"Device {self} does not support diff_method={method!r} with requested circuit: it has finite "
                f"shots ({circuit.shots}), and {method} differentiates exact results. Use "
                "diff_method='parameter-shift' for sampled gradients, or drop the shots."
            )
        return circuit is None or not circuit.shots

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        return self.supports_derivatives(execution_config, circuit)

    def setup_execution_config(self, config: ExecutionConfig | None = None, circuit=None) -> ExecutionConfig:
        """Resolve ``"best"``/``"device"`` to ``"backprop"`` where the interface differentiates it to every
        order (torch, autograd), else ``"adjoint"``; answer adjoint with device VJPs (one reverse pass per
        backward call, where a Jacobian costs one per output element), and with backprop for
        ``max_diff > 1``. See ``plugin.config.resolve_config``."""
        refuse_function_transforms(() if circuit is None else [circuit])  # every PennyLane execution asks here first
        return resolve_config(self, config, circuit)

    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> CompilePipeline:
        config = execution_config or ExecutionConfig()
        program = CompilePipeline()
        program.add_transform(broadcast_singletons)
        program.add_transform(evolutions_from_exponentials)
        program.add_transform(spare_wires_for_deferral, device_wires=self.wires)
        program.add_transform(defer_measurements, allow_postselect=True)
        program.add_transform(measurement_values_as_observables)
        program.add_transform(entropies_from_density_matrices)
        method = config.gradient_method
        outside = None if method is None or method in _DEVICE_GRADIENTS else getattr(method, "__name__", method)
        program.add_transform(renormalise_postselection, name=self.name, outside_gradient=outside)
        gates = self.capabilities.gate_set()
        program.add_transform(_decompose_for_tensornet, device_wires=self.wires, target_gates=gates, name=self.name)
        program.add_transform(refuse_non_hermitian)
        program.add_transform(identity_terms_by_norm)
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
        if self._mps is None:  # (an MPS holds wide states itself, truncated as the user chose)
            program.add_transform(measured_cone, device_wires=self.wires, max_memory=lambda: self._memory_budget()[0],
                                  itemsize=self.dtype.itemsize)
        program.add_transform(_expand_broadcast_shadows)
        if config.gradient_method in ("adjoint", "backprop"):
            program.add_transform(no_sampling, name=f"{config.gradient_method} + {self.name}")
        return program

    # --- PennyLane device API: execution -----------------------------------------------------
    def execute(self, circuits, execution_config: ExecutionConfig | None = None):
        tapes = list(circuits)
        refuse_second_derivative_of_numpy_tapes(tapes)
        results: list = [None] * len(tapes)
        shot_ids = [i for i, t in enumerate(tapes) if t.shots]
        exact_ids = [i for i, t in enumerate(tapes) if not t.shots]
        as_torch = gives_torch(execution_config)  # (PennyLane joins a gradient transform's numpy results with +)
        if exact_ids:
            for i, r in zip(exact_ids, self._execute_exact([tapes[i] for i in exact_ids], as_torch)):
                results[i] = r
        if shot_ids:
            for i, r in zip(shot_ids, self._sample_tapes([tapes[i] for i in shot_ids])):
                results[i] = r
        return tuple(results)

    def _execute_exact(self, tapes: list[QuantumScript], as_torch: bool = False) -> list:
        plans = [plan_readout(t, self.wires) for t in tapes]
        params = [tape_parameters(t) for t in tapes]
        flat = [p for per in params for p in per]
        if any(is_traced(p) for p in flat):  # backprop with autograd (pennylane.numpy) parameters
            sizes = [len(per) for per in params]

            def run(torch_params):
                ends = np.cumsum(sizes, dtype=int).tolist()
                return self._run_plans(plans, [torch_params[e - n : e] for n, e in zip(sizes, ends)])

            return [_pennylane_structure(r) for r in execute_traced(run, flat)]
        if any(isinstance(p, torch.Tensor) for p in flat):  # backprop with torch parameters
            return [_pennylane_structure(r) for r in run_torch_tapes(self._run_plans, plans, params)]
        with torch.no_grad():
            raw = self._run_plans(plans, params)
        # through torch PennyLane hands backprop's results on as they are: constants come back as tensors too
        return [_pennylane_structure(tuple(r if as_torch else (_to_numpy(x) for x in r))) for r in raw]

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
        refuse_second_derivative_of_vjp()
        return device_vjps(self, circuits, cotangents)

    def execute_and_compute_vjp(self, circuits, cotangents, execution_config: ExecutionConfig | None = None):
        return self.execute(circuits, execution_config), self.compute_vjp(circuits, cotangents, execution_config)

    def compute_derivatives(self, circuits, execution_config: ExecutionConfig | None = None):
        """Jacobians from one VJP per output element, all sharing one forward contraction per tape.

        Per tape, PennyLane's structure: one array (one measurement, one trainable parameter), a tuple
        over parameters, a tuple over measurements, or a tuple over measurements of tuples over
        parameters; each array shaped ``result.shape + parameter.shape`` (so a broadcast parameter gives
        the full batch-by-batch block, diagonal since tapes of a batch are independent).
        """
        refuse_second_derivative_of_vjp()
        return tuple(jacobian(self, t) for t in circuits)

    def execute_and_compute_derivatives(self, circuits, execution_config: ExecutionConfig | None = None):
        return self.execute(circuits, execution_config), self.compute_derivatives(circuits, execution_config)


__all__ = ["TensorNetworkDevice", "UnsupportedOnDeviceError", "GradientError"]

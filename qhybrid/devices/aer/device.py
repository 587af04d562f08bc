"""``qhybrid.aer``: PennyLane tapes on Qiskit Aer, one job per circuit structure, torch results."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import pennylane as qml
import torch
from pennylane.devices import Device, ExecutionConfig
from pennylane.devices.modifiers import simulator_tracking
from pennylane.devices.preprocess import decompose, validate_device_wires
from pennylane.exceptions import DeviceError
from pennylane.measurements import MeasurementProcess, Shots
from pennylane.tape import QuantumScript
from pennylane.transforms.core import CompilePipeline

from .._shot_vectors import split_shot_vectors
from ..._inference import outside_inference_mode
from ..._variant import Variant, tape_parameters
from ...errors import UnsupportedOperationError
from ..tensornet._options import CacheInfo, PlanCache
from ..tensornet._structure import standard_wires
from ..tensornet.readout.entropies import entropies_from_density_matrices
from ..tensornet.engines.lightcone.unitary_guard import non_unitary_matrix
from ..tensornet.readout.hermitian import refuse_non_hermitian
from ..tensornet.plugin.imaginary_exponents import evolutions_from_exponentials, pauli_rotations_from_evolutions
from ._convert import is_ready
from ._errors import AerSimulationError
from ._gpu import check_gpu
from ._measure import supported_analytic, supported_sample
from ._measure_sampled import sampling_groups_conflict
from ._simulate import RunContext, simulate
from ._tape_splits import split_for_sampling, standard_wire_order

METHODS = ("statevector", "density_matrix", "matrix_product_state")
"""Aer simulation methods the device drives ("automatic" picks one of these, see ``AerDevice``)."""

DEVICES = ("CPU", "GPU")

ZERO_THRESHOLD = 1e-15
"""Aer sets result entries below this to zero; its default (1e-10) would cost that much accuracy."""

SEED_BOUND = 2**31 - 1
"""Per-job simulator seeds are drawn from [0, SEED_BOUND) by the device's seeded generator."""


@simulator_tracking
class AerDevice(Device):
    """Qiskit Aer simulator as a PennyLane device and a qhybrid launcher target.

    Args:
        wires: number of wires or their labels (None: each circuit's own wires).
        shots: None for exact results, an int, or a shot vector such as ``[100, 1000]`` (results then
            come as a tuple over shot settings, as in PennyLane).

    Keyword Args:
        seed: seeds the per-job simulator seeds, so a run of the same jobs is reproducible.
        method: ``"statevector"`` (default), ``"density_matrix"``, ``"matrix_product_state"`` or
            ``"automatic"`` (density_matrix with a noise model and no shots, statevector otherwise).
        device: ``"CPU"`` or ``"GPU"`` (needs qiskit-aer-gpu and a CUDA GPU; checked here).
        noise_model: a ``qiskit_aer.noise.NoiseModel``. Exact noisy results need
            ``method="density_matrix"``; with shots any method samples noisy trajectories. Circuits using
            gates outside the noise model's basis are transpiled to it (``optimization_level=0``).
        shot_sampling: ``"auto"`` (default) draws the shots from Aer's exact outcome probabilities
            (one exact run per parameter set, counts drawn with the device's seeded generator) whenever
            that is the same distribution: no noise model, or ``density_matrix`` with noise that does
            not touch measurements. ``"aer"`` always samples with Aer's measure instructions (slower:
            Aer keeps per-shot bookkeeping). Noisy statevector trajectories and readout errors always
            use Aer's sampling.
        aer_options: further ``AerSimulator`` options (``max_parallel_threads``, ``precision``,
            ``cuStateVec_enable``, ...).
        cache_size: how many compiled circuit structures to keep.

    Every parameter set of one circuit structure (broadcast batch elements, parameter-shift variants) runs
    in a single Aer job (``parameter_binds``); ``job_count`` counts jobs.

    >>> dev = AerDevice(wires=2)
    >>> tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.CNOT([0, 1])], [qml.probs()])
    >>> dev.execute(tape)
    array([0.5, 0. , 0. , 0.5])
    """

    short_name = "qhybrid.aer"

    def __init__(
        self,
        wires=None,
        shots=None,
        *,
        seed: int | None = None,
        method: str = "statevector",
        device: str = "CPU",
        noise_model=None,
        shot_sampling: str = "auto",
        aer_options: dict[str, Any] | None = None,
        cache_size: int = 256,
    ) -> None:
        super().__init__(wires=wires)
        self._shots = Shots(shots)
        from qiskit_aer import AerSimulator
        from qiskit_aer.noise import NoiseModel

        if noise_model is not None and not isinstance(noise_model, NoiseModel):
            raise TypeError(f"noise_model must be a qiskit_aer.noise.NoiseModel, got {type(noise_model).__name__}.")
        if method == "automatic":
            method = "density_matrix" if noise_model is not None and not self._shots else "statevector"
        if method not in METHODS:
            raise ValueError(f"method {method!r} is not supported by qhybrid.aer; choose one of {METHODS} or 'automatic'.")
        if device not in DEVICES:
            raise ValueError(f"device must be 'CPU' or 'GPU', got {device!r}.")
        if noise_model is not None and not self._shots and method != "density_matrix":
            raise ValueError(
                f"Exact (shots=None) noisy results need method='density_matrix'; method={method!r} would give one "
                "noisy trajectory. Use method='density_matrix', or set shots to sample trajectories."
            )
        if shot_sampling not in ("auto", "aer"):
            raise ValueError(f"shot_sampling must be 'auto' or 'aer', got {shot_sampling!r}.")
        if device == "GPU":
            check_gpu()
        self.shot_sampling = shot_sampling
        self._probability_sampling = shot_sampling == "auto" and (
            noise_model is None or (method == "density_matrix" and "measure" not in noise_model.noise_instructions)
        )
        self.method = method
        self.aer_device = device
        self.noise_model = noise_model
        self.seed = seed
        options = {"runtime_parameter_bind_enable": True, "zero_threshold": ZERO_THRESHOLD, **(aer_options or {})}
        self.simulator = AerSimulator(method=method, device=device, noise_model=noise_model, **options)
        self._basis = frozenset(AerSimulator(method=method).configuration().basis_gates)
        self._noise_basis = frozenset(self.simulator.configuration().basis_gates)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._cache = PlanCache(cache_size, option="cache_size")
        self.job_count = 0
        """Aer jobs run so far (one per circuit structure and shot count in each batch)."""

    @property
    def name(self) -> str:
        return self.short_name

    # --- qhybrid's own API ------------------------------------------------------------------
    def circuit_cache_info(self) -> CacheInfo:
        """Hits, misses and size of the compiled-circuit cache (one entry per circuit structure)."""
        return self._cache.info()

    def clear_circuit_cache(self) -> None:
        self._cache.clear()

    def _context(self) -> RunContext:
        return RunContext(
            wires=self.wires,
            basis=self._basis,
            mixed=self.method == "density_matrix",
            cache=self._cache,
            run_job=self._run_job,
            sampling_rng=self._sampling_rng,
            probability_sampling=self._probability_sampling,
            finalize=self._finalize,
        )

    def _sampling_rng(self) -> np.random.Generator:
        with self._lock:
            return np.random.default_rng(int(self._rng.integers(SEED_BOUND)))

    def _run_job(self, circuits, parameter_binds, shots: int | None, memory: bool):
        if shots is None and self.noise_model is not None and self.method != "density_matrix":
            raise ValueError(
                "Exact (shots=None) noisy results need method='density_matrix'; set shots on the tape or the device."
            )
        with self._lock:
            self.job_count += 1
            seed = int(self._rng.integers(SEED_BOUND))
        binds = parameter_binds if any(parameter_binds) else None
        job = self.simulator.run(circuits, parameter_binds=binds, shots=shots or 1, memory=memory, seed_simulator=seed)
        result = job.result()
        if not result.success:
            raise AerSimulationError(f"Aer job failed: {getattr(result, 'status', 'no status')}")
        return result

    def _finalize(self, qc):
        """Transpile the gates to the noise model's basis when it does not name some of them."""
        if self.noise_model is None:
            return qc
        names = {inst.operation.name for inst in qc.data}
        if names <= self._noise_basis:
            return qc
        from qiskit import transpile
        from qiskit.circuit.library import get_standard_gate_name_mapping

        standard = set(get_standard_gate_name_mapping())
        basis = sorted(n for n in self._noise_basis if n in standard)
        return transpile(qc, basis_gates=basis, optimization_level=0)

    def _stopping_condition(self, op: qml.operation.Operator) -> bool:
        if isinstance(op, MeasurementProcess) or op.name == "MidMeasureMP":
            return False
        return is_ready(op, self._basis)

    def _expansion(self, tape: QuantumScript) -> str | None:
        """What a tape needs before it goes to Aer: None (run as it is), ``"sampling"`` (split measurements
        that cannot share one set of samples) or ``"preprocess"`` (this device's whole preprocessing, then
        that split)."""
        shots = tape.shots if tape.shots else self.shots
        if shots.has_partitioned_shots:
            return None  # reported by the runner with a clear message
        supported = supported_sample if shots else supported_analytic
        if not all(is_ready(op, self._basis) for op in tape.operations) or not all(
            supported(mp) for mp in tape.measurements
        ):
            return "preprocess"
        wires = self.wires if self.wires is not None else standard_wires(tape)
        return "sampling" if shots and sampling_groups_conflict(tape, wires) else None

    def _expansion_program(self, kind: str) -> CompilePipeline:
        program = self.preprocess_transforms() if kind == "preprocess" else CompilePipeline()
        program.add_transform(split_for_sampling, default_shots=self.shots, wires=self.wires)
        return program

    @outside_inference_mode
    def simulate_variants(self, variants: Sequence[Variant]) -> list[tuple]:
        """Run each (tape, parameters) variant: one Aer job per circuit structure in the batch.

        Each result is a tuple with one entry per measurement: float64 (complex128 for states) torch
        tensors on the parameters' device, a dict (list of dicts when broadcast) for counts. Tapes that
        were not preprocessed for this device (e.g. gradient runs of tapes preprocessed for tensornet)
        are first run through :meth:`preprocess_transforms`, parameter set by parameter set; so are sampled
        measurements that cannot share one set of samples (split into qubit-wise commuting groups here, not
        in the preprocessing, so that PennyLane's tracker counts the tape as default.qubit does).
        """
        expansions: dict[int, str | None] = {}  # per tape object: variants share their tapes
        programs: dict[str, CompilePipeline] = {}
        direct: list[Variant] = []
        plan: list[tuple] = []  # ("direct", index) or ("expanded", start, count, postprocess, n_measurements)
        for v in variants:
            key = id(v.tape)
            if key not in expansions:
                expansions[key] = self._expansion(v.tape)
            kind = expansions[key]
            if kind is None:
                plan.append(("direct", len(direct)))
                direct.append(v)
                continue
            if kind not in programs:
                programs[kind] = self._expansion_program(kind)
            tapes, post = programs[kind]((v.bound_tape(),))
            plan.append(("expanded", len(direct), len(tapes), post, len(v.tape.measurements)))
            direct.extend(Variant(t, tape_parameters(t)) for t in tapes)
        raw = simulate(direct, self._context(), self.shots) if direct else []
        out = []
        for entry in plan:
            if entry[0] == "direct":
                out.append(raw[entry[1]])
                continue
            _, start, count, post, n_meas = entry
            shaped = [r[0] if len(r) == 1 else tuple(r) for r in raw[start : start + count]]
            (res,) = post(shaped)
            out.append((res,) if n_meas == 1 else tuple(res))
        return out

    def execute_torch(self, tapes: Sequence[QuantumScript]) -> list[tuple]:
        """Torch results of already-preprocessed tapes, a tuple per tape with one entry per measurement."""
        return self.simulate_variants([Variant.of(t) for t in tapes])

    # --- PennyLane device API --------------------------------------------------------------
    def preprocess_transforms(self, execution_config: ExecutionConfig | None = None) -> CompilePipeline:
        program = CompilePipeline()
        if self.wires is None:  # each circuit's wires in PennyLane's standard order, fixed before decompositions
            program.add_transform(standard_wire_order)  # reorder them (CH's decomposition touches its target first)
        # (PennyLane's decompositions of imaginary exponentials and evolutions fail on torch tensors)
        program.add_transform(evolutions_from_exponentials)
        program.add_transform(pauli_rotations_from_evolutions)
        program.add_transform(refuse_mid_circuit_measurements, name=self.name)
        program.add_transform(refuse_non_unitary_matrices, name=self.name)
        program.add_transform(refuse_non_hermitian)  # (Aer would read the real part: 0 for Z(0) @ X(0))
        # measured as density matrices, their formulas applied in torch: a shift rule holds for the (linear) matrix,
        # not for the entropy (parameter-shift of vn_entropy itself gave 0 for 0.649)
        program.add_transform(entropies_from_density_matrices)
        program.add_transform(validate_device_wires, self.wires, name=self.name)
        program.add_transform(
            decompose,
            stopping_condition=self._stopping_condition,
            skip_initial_state_prep=False,
            name=self.name,
            error=UnsupportedOperationError,
        )
        program.add_transform(validate_aer_measurements, default_shots=self.shots, name=self.name)
        return program

    def supports_derivatives(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        return False

    def supports_vjp(self, execution_config: ExecutionConfig | None = None, circuit=None) -> bool:
        return False

    def execute(self, circuits, execution_config: ExecutionConfig | None = None):
        single = isinstance(circuits, QuantumScript)
        tapes = [circuits] if single else list(circuits)
        flat, spans = [], []
        for t in tapes:
            if not t.shots and self.shots.has_partitioned_shots:
                t = t.copy(shots=self.shots)
            split, post = split_shot_vectors(t)  # one Aer job per setting, results a tuple over settings
            spans.append((len(flat), len(split), post))
            flat.extend(split)
        variants = [Variant.of(t) for t in flat]
        as_torch = any(isinstance(p, torch.Tensor) for v in variants for p in v.params)
        raw = self.simulate_variants(variants)
        shaped = [_pennylane_structure(r, as_torch) for r in raw]
        results = tuple(post(shaped[a : a + n]) for a, n, post in spans)
        return results[0] if single else results


# --- transforms -----------------------------------------------------------------------------


@qml.transform
def refuse_mid_circuit_measurements(tape: QuantumScript, name: str = "qhybrid.aer"):
    """Mid-circuit measurements (``qml.measure``, postselection) are not run here: say where they are."""
    mcm = next((op for op in tape.operations if isinstance(op, qml.ops.MidMeasure)), None)
    if mcm is not None:
        raise UnsupportedOperationError(
            f"{name} does not run mid-circuit measurements ({mcm}). qhybrid.tensornet does (deferred onto spare "
            "wires; postselection with shots=None), as does default.qubit."
        )
    return (tape,), _first


@qml.transform
def refuse_non_unitary_matrices(tape: QuantumScript, name: str = "qhybrid.aer"):
    """Aer applies unitary gates: a matrix that is not one was decomposed into NaN angles (PennyLane's full
    ``metric_tensor`` inserts a controlled projector for its Hadamard tests: every entry came back NaN)."""
    odd = non_unitary_matrix(tape)
    if odd is not None:
        raise UnsupportedOperationError(
            f"{name} applies unitary gates only, and {odd} is not unitary. qhybrid.tensornet applies it as a matrix, "
            "as default.qubit does (for qml.metric_tensor on Aer: approx='block-diag' or 'diag', or "
            "qml.adjoint_metric_tensor)."
        )
    return (tape,), _first


@qml.transform
def validate_aer_measurements(tape: QuantumScript, default_shots: Shots = Shots(None), name: str = "qhybrid.aer"):
    """Every measurement must suit the shots the tape runs with (its own, else the device's)."""
    shots = tape.shots if tape.shots else default_shots
    supported = supported_sample if shots else supported_analytic
    for mp in tape.measurements:
        if not supported(mp):
            # PennyLane's wording (its device suite matches on it), then what would be accepted
            mode = f"with finite shots ({shots})" if shots else "for analytic simulation (shots=None)"
            raise DeviceError(
                f"Measurement {mp} not accepted {mode} on {name}: exact runs take state measurements "
                "(expval, var, probs, state, density_matrix, entropies, purity, ...), sampled runs take sample "
                "measurements (expval, var, probs, sample, counts, ...); measurements on mid-circuit "
                "measurement values are not supported."
            )
    return (tape,), _first


def _first(results):
    return results[0]


def _pennylane_structure(result: tuple, as_torch: bool):
    if not as_torch:
        result = tuple(r.detach().cpu().numpy() if isinstance(r, torch.Tensor) else r for r in result)
    return result[0] if len(result) == 1 else result


__all__ = ["AerDevice", "validate_aer_measurements", "split_for_sampling", "METHODS"]

"""Monte-Carlo trajectories for circuits whose channels are mixtures of unitaries (depolarizing, bit and phase
flips, Pauli errors, a ``QubitChannel`` of scaled unitaries): every trajectory's unitaries are drawn up front and
the circuit runs as one pure-state execution with the trajectories as (part of) its batch axis, each channel a
batched ``QubitUnitary``. Results are the trajectory means, unbiased for ``expval``, ``probs`` and
``density_matrix`` (linear in the state); their standard errors are kept on the device
(``trajectory_standard_errors``). Gradients in the gate parameters follow by backprop / adjoint through the pure
execution; noise strengths are not differentiable here (the draws do not depend on them smoothly).

Opt in with ``qhybrid.device("tensornet", wires=n, noise="trajectories", trajectories=T, seed=...)``.
"""

from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np
import pennylane as qml
import torch
from pennylane.measurements import DensityMatrixMP, ExpectationMP, ProbabilityMP

from .....errors import GradientError, UnsupportedOperationError
from ....._variant import Variant, tape_parameters
from ...._constants import on_device
from ..._rebound import rebound
from .channels import check_channel, is_channel

LINEAR_MEASUREMENTS = (ExpectationMP, ProbabilityMP, DensityMatrixMP)
"""Measurements whose trajectory mean is the noisy result (linear in the density matrix)."""

_EXACT = "qhybrid.device('tensornet', ...) with noise='exact' (the default: the density-matrix engine)"


NOISE_MODES = ("exact", "trajectories")
"""How circuits with channels run: density matrices (exact), or Monte-Carlo trajectories of mixtures of unitaries."""


DEFAULT_TRAJECTORIES = 256
"""Trajectories a sample under ``noise="trajectories"`` where the device is given no count."""


def check_noise_options(noise: str, trajectories: int | None) -> tuple[str, int]:
    """The device's ``noise`` and ``trajectories`` options, checked: a count is refused beside ``noise="exact"``,
    where nothing would read it (a user who asked for trajectories would get the density-matrix engine silently).

    >>> check_noise_options("trajectories", 64)
    ('trajectories', 64)
    >>> check_noise_options("trajectories", None)
    ('trajectories', 256)
    """
    if noise not in NOISE_MODES:
        raise ValueError(f"noise must be one of {NOISE_MODES}, got {noise!r}.")
    if trajectories is None:
        return noise, DEFAULT_TRAJECTORIES
    if isinstance(trajectories, bool) or not isinstance(trajectories, int) or trajectories < 1:
        raise ValueError(f"trajectories must be a positive int, got {trajectories!r}.")
    if noise != "trajectories":
        raise ValueError(
            f"trajectories={trajectories} is read only with noise='trajectories'; with noise={noise!r} channels run "
            "exactly, on the density-matrix engine. Pass noise='trajectories' to sample them, or drop trajectories=."
        )
    return noise, trajectories


def trajectory_fields(device) -> dict:
    """The ``SimOptions`` fields of a device's noise options; with trajectories, a fresh
    ``device.trajectory_standard_errors`` list that the run fills (per noisy tape, one tensor per measurement)."""
    if device.noise != "trajectories":
        return {}
    device.trajectory_standard_errors = []
    return dict(noise=device.noise, trajectories=device.trajectories, noise_rng=device._noise_rng,
                noise_log=device.trajectory_standard_errors)


class NoiseDraws:
    """A device's source of trajectory draws: one torch generator per torch device, all seeded from the device's
    ``seed`` (what ``numpy.random.default_rng`` takes: an int, a ``SeedSequence``, a ``Generator``, or None for fresh
    entropy), so the draws are made where the state lives: no host data in a step.

    >>> draws = NoiseDraws(seed=3)
    >>> draws.generator(torch.device("cpu")) is draws.generator(torch.device("cpu"))
    True
    """

    def __init__(self, seed: int | None):
        self.seed = int(np.random.default_rng(seed).integers(1 << 62))
        self._generators: dict = {}

    def generator(self, device: torch.device) -> torch.Generator:
        device = torch.device(device)
        gen = self._generators.get(device)
        if gen is None:
            gen = self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
            if device.type == "cuda":
                _LIVE.add(self)
        return gen


_LIVE: weakref.WeakSet = weakref.WeakSet()
"""Draws that made a CUDA generator (CUDA generators themselves cannot be weakly referenced)."""


def cuda_generators() -> list[torch.Generator]:
    """Every live CUDA generator of the devices' draws: a captured graph registers them (``qhybrid.cuda_graph``), so
    each replay draws fresh trajectories and advances the generator as an uncaptured step would."""
    return [g for draws in list(_LIVE) for d, g in draws._generators.items() if d.type == "cuda"]


class DrawnUnitary(qml.QubitUnitary):
    """A channel's drawn unitaries, one per trajectory row: each a Kraus operator of a mixture checked when it was
    decomposed (``_mixture``), scaled, so a run takes them as unitary without checking their values (a host
    read a step)."""


def _mixture(op: qml.operation.Operator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, unitaries)`` with ``op = sum_r w_r U . U^dagger`` (CPU tensors, the keys of their device copies,
    ``on_device``); a clear error where ``op`` is not one. Channels with scalar parameters are looked up by name and
    values (a noise model repeats one channel on every wire after every layer: one Kraus decomposition for all of
    them)."""
    check_channel(op)
    data = [qml.math.unwrap(p.detach() if hasattr(p, "detach") else p) for p in op.data]
    if not all(np.ndim(p) == 0 for p in data):
        return tuple(map(torch.from_numpy, _unitary_mixture(op)))
    key = (op.name, len(op.wires), tuple(float(p) for p in data), repr(op.hyperparameters))
    hit = _MIXTURES.get(key)
    if hit is None:
        if len(_MIXTURES) > _MIXTURES_MAX:
            _MIXTURES.clear()
        hit = _MIXTURES[key] = tuple(map(torch.from_numpy, _unitary_mixture(op)))
    return hit


def _drawn(op, rows: int, draws: NoiseDraws, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``rows`` unitaries of ``op``'s mixture drawn on ``device``, where its tables are kept (made once per device)."""
    weights, unitaries = _mixture(op)
    weights, unitaries = on_device(weights, device, dtype.to_real()), on_device(unitaries, device, dtype)
    index = torch.multinomial(weights, rows, replacement=True, generator=draws.generator(device))
    return unitaries.index_select(0, index)


_MIXTURES: dict = {}
_MIXTURES_MAX = 1024
"""Cached channel decompositions (cleared past this many distinct ones)."""


def _unitary_mixture(op: qml.operation.Operator) -> tuple[np.ndarray, np.ndarray]:
    kraus = [np.asarray(qml.math.unwrap(k.detach() if hasattr(k, "detach") else k), dtype=complex) for k in op.kraus_matrices()]
    d = kraus[0].shape[-1]
    weights, unitaries = [], []
    for k in kraus:
        if k.ndim != 2:
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} has broadcast parameters; trajectories need one value per "
                f"channel. Use {_EXACT}."
            )
        kk = k.conj().T @ k
        w = float(np.trace(kk).real) / d
        if not np.allclose(kk, w * np.eye(d), atol=1e-12):
            raise UnsupportedOperationError(
                f"{op.name} on wires {op.wires.tolist()} is not a mixture of unitaries (its branch probabilities "
                f"depend on the state), so trajectories cannot draw it up front. Use {_EXACT}."
            )
        if w > 0:
            weights.append(w)
            unitaries.append(k / np.sqrt(w))
    return np.asarray(weights) / sum(weights), np.stack(unitaries)


def _check(tape: qml.tape.QuantumScript) -> None:
    for mp in tape.measurements:
        if not isinstance(mp, LINEAR_MEASUREMENTS):
            raise UnsupportedOperationError(
                f"{type(mp).__name__} is not linear in the state, so a trajectory mean does not estimate it; "
                f"trajectories serve expval, probs and density_matrix. Use {_EXACT}."
            )
    for op in tape.operations:
        if is_channel(op) and any(getattr(p, "requires_grad", False) for p in op.data):
            raise GradientError(
                f"{op.name} on wires {op.wires.tolist()} has a trainable noise strength; trajectories draw the noise "
                f"up front and give no derivative in it. Use {_EXACT}."
            )


def trajectory_tape(tape: qml.tape.QuantumScript, count: int, draws: NoiseDraws, dtype, device) -> qml.tape.QuantumScript:
    """``tape`` with every channel a ``DrawnUnitary`` broadcast over ``batch x count`` drawn unitaries and every
    broadcast parameter repeated ``count`` times (row ``b * count + t`` is trajectory ``t`` of sample ``b``).
    Channels and unbatched, untrained gates outside the measured wires' reverse light cone are left out (they
    cancel in every trajectory's result): no draws, no ops to build or plan for them."""
    batch = tape.batch_size
    rows = (batch or 1) * count
    cone = _reverse_light_cone(tape)
    if not any(is_channel(op) and i in cone for i, op in enumerate(tape.operations)):
        cone = set(range(len(tape.operations)))  # keep the draws: the rows are the trajectories
    ops = []
    for i, op in enumerate(tape.operations):
        if i not in cone and (is_channel(op) or (op.batch_size is None and not _trainable(op))):
            continue  # outside the measured wires' reverse light cone it cancels in every trajectory
        if is_channel(op):
            ops.append(DrawnUnitary(_drawn(op, rows, draws, dtype, device), wires=op.wires))
        elif batch is not None and op.batch_size is not None:
            data = [p.repeat_interleave(count, 0) if qml.math.ndim(p) > nd else p for p, nd in zip(op.data, _ndims(op))]
            ops.append(rebound(op, data))
        else:
            ops.append(op)
    return tape.copy(operations=ops)


def _ndims(op) -> tuple:
    """``op.ndim_params``; an ``Evolution``'s (PennyLane's property reads an attribute its batch check never sets
    there: AttributeError) is that of its one scalar parameter."""
    try:
        return op.ndim_params
    except AttributeError:
        return (0,) * len(op.data)


def _trainable(op) -> bool:
    """Whether a parameter of ``op`` records a gradient (kept: backprop gives it its zero derivative)."""
    return any(getattr(p, "requires_grad", False) for p in op.data)


def _reverse_light_cone(tape: qml.tape.QuantumScript) -> set[int]:
    """Indices of the operations that can act on the measured wires (every one where a measurement reads all
    wires): walking back from the measured wires, an operation touching the set joins it with its wires."""
    measured: set = set()
    for mp in tape.measurements:
        if len(mp.wires) == 0:
            return set(range(len(tape.operations)))
        measured.update(mp.wires)
    cone = set()
    for i in range(len(tape.operations) - 1, -1, -1):
        wires = tape.operations[i].wires
        if any(w in measured for w in wires):
            cone.add(i)
            measured.update(wires)
    return cone


def run_trajectories(group: Sequence[Variant], opts, simulate_pure, device_wires, cache) -> list[tuple]:
    """Trajectory means of every variant (one pure execution each), standard errors appended to ``opts.noise_log``."""
    out = []
    for v in group:
        tape = v.bound_tape()
        _check(tape)
        count = opts.trajectories
        traj = trajectory_tape(tape, count, opts.noise_rng, opts.dtype, opts.device)
        (res,) = simulate_pure([Variant(traj, tape_parameters(traj))], device_wires, opts, cache)
        means, errors = [], []
        for r in res:
            per = r.reshape(tape.batch_size or 1, count, *r.shape[1:])
            mean = per.mean(1)
            # (a complex entry's spread is its modulus's: sqrt(var re + var im), torch's std of a complex tensor)
            spread = per.std(1) if count > 1 else torch.zeros_like(mean.real)
            shape = mean.shape if tape.batch_size is not None else mean.shape[1:]
            means.append(mean.reshape(shape))
            errors.append((spread / np.sqrt(count)).reshape(shape).detach())
        if opts.noise_log is not None:
            opts.noise_log.append(tuple(errors))
        out.append(tuple(means))
    return out

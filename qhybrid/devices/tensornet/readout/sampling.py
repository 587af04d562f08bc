"""Finite shots: contract a tape's state once, then sample it with PennyLane's own sampler.

``sample``, ``counts``, finite-shot ``expval``/``var``/``probs``, classical shadows and shot vectors
all come from ``pennylane.devices.qubit.sampling.measure_with_samples``, which groups commuting
measurements, rotates the state into each group's eigenbasis and draws bitstrings with a numpy
``Generator``. The device contributes the state: every shot tape of a batch becomes a ``StateMP``
tape over the wires it touches or measures (wires no gate touches and no measurement reads stay
|0> and are left out), and all of them run through ``simulate_variants`` in one call.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from pennylane.devices.qubit.sampling import measure_with_samples
from pennylane.devices.qubit_mixed.sampling import measure_with_samples as mixed_measure_with_samples
import pennylane as qml
from pennylane.measurements import ExpectationMP, ShadowExpvalMP, StateMP, VarianceMP
from pennylane.tape import QuantumScript
from pennylane.wires import Wires

from ....errors import ContractionTooLargeError
from ..engines.mixed.channels import is_channel
from .readout import state_wires

PROBABILITY_NORM_DTYPE = np.complex128
"""States are sampled in double precision, whatever the simulation dtype, so their probabilities pass
PennyLane's sum-to-one check (1e-6) even after a complex64 contraction."""


def state_tape(tape: QuantumScript, device_wires: Wires | None) -> tuple[QuantumScript, Wires]:
    """An analytic tape returning the state of ``tape``'s wires, and those wires in the state's order."""
    wires = state_wires(tape, device_wires)
    return QuantumScript(tape.operations, [StateMP(wires=wires)], shots=None, trainable_params=[]), wires


def sample_tapes(
    tapes: Sequence[QuantumScript],
    device_wires: Wires | None,
    run_states: Callable[[list[QuantumScript]], list],
    rng: np.random.Generator,
) -> list:
    """PennyLane-shaped results of shot tapes; ``run_states`` maps state tapes to their state tensors."""
    prepared = [state_tape(t, device_wires) for t in tapes]
    try:
        states = run_states([s for s, _ in prepared])
    except ContractionTooLargeError:
        n = max(len(w) for _, w in prepared)
        raise ContractionTooLargeError(
            f"Finite shots are drawn from a state vector, here of 2**{n} amplitudes ({n} wires), which does not fit "
            "in max_memory: the light cone of the measured wires spans them, or a measurement reads every wire "
            "(qml.sample(), qml.counts()). Measure named wires whose light cone is narrower, drop the shots "
            "(expectation values and probabilities of few wires are exact by light cones), or sample the circuit as "
            "a matrix product state: qhybrid.device('tensornet', ..., method='mps')."
        ) from None
    return [
        measure_tape(tape, np.asarray(psi, dtype=PROBABILITY_NORM_DTYPE), wires, rng)
        for tape, psi, (_, wires) in zip(tapes, states, prepared)
    ]


def _merged(mp):
    """``mp`` with a sum observable rebuilt from its Pauli sentence (repeated words merged: ``0.5 Z(0) + 2 Z(0)`` is
    ``2.5 Z(0)``, a one-term Hamiltonian its word): PennyLane's sampler dropped the measurement beside such sums (a
    batch's two values came back as the two measurements, an unbatched one failed)."""
    obs = mp.obs
    if not isinstance(mp, (ExpectationMP, VarianceMP)) or not isinstance(obs, qml.ops.Sum):
        return mp
    ps = obs.pauli_rep
    if ps is None or 1 < len(ps) == len(obs.operands):  # (no repeated word, more than one: as it is, no rebuild)
        return mp
    return type(mp)(obs=ps.operation(wire_order=obs.wires))


def _numbers(mp):
    """``mp`` with its observable's tensor data as numpy arrays: the sampler works on the state in numpy, and PennyLane's
    eigenvalues of a sum of tensor coefficients fail ("only one element tensors can be converted"; a sampled result
    takes no autograd gradient: parameter-shift's runs give it one)."""
    obs = mp.obs
    if obs is None or not any(isinstance(d, torch.Tensor) for d in obs.data):
        return mp
    data = [d.detach().cpu().numpy() if isinstance(d, torch.Tensor) else d for d in obs.data]
    return type(mp)(obs=qml.ops.functions.bind_new_parameters(obs, data))


def _mapped(mp, mapping: dict):
    """``mp`` on the state's wire positions. PennyLane's ``map_wires`` of a ``shadow_expval`` maps its wires, not its
    observables, which then read positions by their labels (device wires [2, 0, 1]: 0.0103 for 0.6965)."""
    if isinstance(mp, ShadowExpvalMP):
        H = [h.map_wires(mapping) for h in mp.H] if isinstance(mp.H, (list, tuple)) else mp.H.map_wires(mapping)
        return ShadowExpvalMP(H, seed=mp.seed, k=mp.k)
    return mp.map_wires(mapping)


def measure_tape(tape: QuantumScript, psi: np.ndarray, wires: Wires, rng: np.random.Generator):
    """Sample ``tape``'s measurements from its flat (or ``(batch, 2**n)``) state ``psi`` over ``wires``."""
    batched = tape.batch_size is not None
    n = len(wires)
    noisy = any(map(is_channel, tape.operations))  # then ``psi`` is the density matrix (engines.mixed)
    psi = psi.reshape(((psi.shape[0],) if batched else ()) + (2,) * (2 * n if noisy else n))
    mapping = {w: i for i, w in enumerate(wires)}
    mps = [_mapped(_numbers(_merged(mp)), mapping) for mp in tape.measurements]
    sampler = mixed_measure_with_samples if noisy else measure_with_samples
    results = sampler(mps, psi, tape.shots, is_state_batched=batched, rng=rng)
    if len(tape.measurements) == 1:
        if tape.shots.has_partitioned_shots:
            return tuple(r[0] for r in results)
        return results[0]
    return results

"""Finite shots on ``method="mps"``: bitstrings drawn site by site from the MPS (sequential sampling), then
PennyLane's own ``process_samples`` of each measurement.

With the centre at site 0 every later site is right-isometric, so the marginal of site ``i`` given the bits
drawn before is the squared norm of the partial contraction: one ``[shots, chi]`` x ``[chi, 2, chi]``
product a site, no state vector. Each measurement's observable is first rotated to its eigenbasis by its
diagonalizing gates (an MPS of the rotated circuit per measurement with a non-diagonal observable).
"""

from __future__ import annotations

import numpy as np
import torch
from pennylane.tape import QuantumScript
from pennylane.wires import Wires

from ....._variant import tape_parameters
from .....errors import UnsupportedOperationError
from .circuit import build_mps
from .run import site_order
from .state import MPS


def sample_bits(mps: MPS, shots: int, rng: np.random.Generator) -> np.ndarray:
    """``[B, shots, n]`` bitstrings (int64, as default.qubit's) drawn from the (normalised) MPS, site 0 first."""
    mps.move_centre(0)
    b = mps.batch
    uniform = torch.as_tensor(rng.random((b, shots, mps.n_sites)), device=mps.sites[0].device)
    real = mps.sites[0].dtype.to_real()
    v = torch.ones(b, shots, 1, dtype=mps.sites[0].dtype, device=mps.sites[0].device)
    bits = []
    for i, a in enumerate(mps.sites):
        amp = torch.einsum("bpl,blsr->bpsr", v, a)
        weight = (amp.abs() ** 2).sum(-1)  # [B, shots, 2]
        p1 = weight[..., 1] / weight.sum(-1).clamp_min(torch.finfo(real).tiny)
        bit = (uniform[..., i].to(real) < p1).long()
        chosen = amp.gather(2, bit[..., None, None].expand(b, shots, 1, amp.shape[-1])).squeeze(2)
        norm = weight.gather(2, bit[..., None]).clamp_min(torch.finfo(real).tiny).sqrt()
        v = chosen / norm
        bits.append(bit)
    return torch.stack(bits, -1).cpu().numpy()  # (uint8 made sample - 1 wrap to 255)


def sample_tapes_mps(tapes, device_wires, settings, opts, rng: np.random.Generator) -> list:
    """PennyLane-shaped results of shot tapes (``sample_tapes``' contract), sampled from MPS."""
    return [_sample_tape(t, device_wires, settings, opts, rng) for t in tapes]


def _sample_tape(tape: QuantumScript, device_wires, settings, opts, rng):
    wires = site_order(tape, device_wires)
    site_of = {w: i for i, w in enumerate(wires)}
    shots = tape.shots
    batch = tape.batch_size
    per_mp = []
    for mp in tape.measurements:
        if mp.obs is None and mp.mv is not None:
            raise UnsupportedOperationError("method='mps' samples observables and wires, not mid-circuit values.")
        if not hasattr(mp, "process_samples"):  # classical shadows: PennyLane measures them on a state
            raise UnsupportedOperationError(
                f"{type(mp).__name__} on wires {mp.wires.tolist()} is not sampled by method='mps' (sample, counts "
                "and finite-shot expval, var, probs are); use method='auto'."
            )
        rotation = mp.diagonalizing_gates()
        circuit = QuantumScript(list(tape.operations) + list(rotation), [], shots=None)
        with torch.no_grad():
            mps, _, placed = build_mps(
                circuit, [torch.as_tensor(np.asarray(p)) if not isinstance(p, torch.Tensor) else p.detach() for p in tape_parameters(circuit)],
                site_of, len(wires), batch or 1, opts.dtype, opts.device, settings.max_bond_dim, settings.cutoff,
                opts.max_memory,
            )
            bits = sample_bits(mps, shots.total_shots, rng)[..., [placed[w] for w in wires]]
        members = []
        for b in range(bits.shape[0]):
            outs, start = [], 0
            for copy in shots.shot_vector:
                for _ in range(copy.copies):
                    stop = start + copy.shots
                    outs.append(mp.process_samples(bits[b], Wires(wires), shot_range=(start, stop)))
                    start = stop
            members.append(outs)
        per_shot = list(zip(*members))  # [shot partition][batch member]
        per_mp.append([_stack(m) if batch is not None else m[0] for m in per_shot])
    results = []
    for k in range(len(per_mp[0]) if per_mp else 0):
        items = tuple(per_mp[j][k] for j in range(len(per_mp)))
        results.append(items[0] if len(items) == 1 else items)
    if shots.has_partitioned_shots:
        return tuple(results)
    return results[0]


def _stack(values):
    if isinstance(values[0], dict):
        return list(values)
    return np.stack([np.asarray(v) for v in values])

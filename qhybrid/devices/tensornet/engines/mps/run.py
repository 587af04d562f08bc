"""``method="mps"``: variants in, torch results out (the tensornet device's ``simulate`` calls this)."""

from __future__ import annotations

from typing import Sequence

import torch

from ....._variant import Variant
from .....errors import CaptureError
from ..._structure import standard_wires
from ..mixed.channels import is_channel
from ..mixed.trajectories import run_trajectories
from ..network.plan import _fmt_bytes
from .circuit import build_mps
from .readout import MPSReader


def site_order(tape, device_wires) -> list:
    """Wires in MPS site order: the device's (every wire a site; unused ones stay |0>), else the tape's in PennyLane's
    standard order (``_structure.standard_wires``)."""
    return list(device_wires) if device_wires is not None else list(standard_wires(tape))


def run_mps(variants: Sequence[Variant], device_wires, opts, cache=None) -> list[tuple[torch.Tensor, ...]]:
    """Each variant's results (one tensor per measurement, differentiable in its parameters) from one batched
    MPS per variant; the truncation of the whole call goes to ``opts.mps``'s log (and warns above the limit).
    With ``noise="trajectories"`` a noisy variant runs as one MPS batched over its trajectories. What ran is
    recorded in ``cache`` (the device's plan cache: ``plan_cache_info().engines``)."""
    _refuse_capture_with_a_value_cutoff(opts)
    report: list = []
    structure: list = []

    def pure(vs, wires, o, c):
        return [_run_one(v, wires, o, c, report, structure) for v in vs]

    results = []
    for v in variants:
        if opts.noise == "trajectories" and any(is_channel(op) for op in v.tape.operations):
            n = len(site_order(v.tape, device_wires))
            _record(cache, ("mps-trajectories", n, opts.trajectories), f"noisy circuit, {n} wires", "trajectories",
                    f"noise='trajectories': {opts.trajectories} pure-state trajectories a sample, the batch of one "
                    "matrix product state (its own entry)")
            results.extend(run_trajectories([v], opts, pure, device_wires, cache))
        else:
            results.append(_run_one(v, device_wires, opts, cache, report, structure))
    opts.mps.report(report, tuple(structure))
    return results


def _refuse_capture_with_a_value_cutoff(opts) -> None:
    """A value cutoff sizes each bond from singular values read back per split: a CUDA-graph capture would fail
    deep inside with a CUDA error (or replay one call's bonds). Say so, and what is capturable."""
    settings = opts.mps
    if settings.fixed_bonds or torch.device(opts.device).type != "cuda" or not torch.cuda.is_current_stream_capturing():
        return
    cutoff = "cutoff=None (the default: numerical zeros dropped)" if settings.default_cutoff else f"cutoff={settings.cutoff:g}"
    raise CaptureError(
        f"method='mps' with {cutoff} sizes every bond from the singular values of its split, read back on each "
        "call: such a step cannot be captured as a CUDA graph. Capture with cutoff=0 and a max_bond_dim (bonds fixed "
        f"by the circuit's structure: qhybrid.device('tensornet', ..., method='mps', max_bond_dim={settings.max_bond_dim or 64}, "
        "cutoff=0); docs/MPS.md, 'Capture'), or run this step uncaptured."
    )


def _run_one(v: Variant, device_wires, opts, cache, report: list, structure: list | None = None) -> tuple[torch.Tensor, ...]:
    settings = opts.mps
    v = v.with_observables_bound()
    tape = v.tape
    wires = site_order(tape, device_wires)
    site_of = {w: i for i, w in enumerate(wires)}
    batch = tape.batch_size
    mps, phase, site_of = build_mps(
        tape, v.params, site_of, len(wires), batch or 1, opts.dtype, opts.device,
        settings.max_bond_dim, settings.cutoff, opts.max_memory,
    )
    _record_route(cache, mps, settings)
    reader = MPSReader(mps, site_of, wires, phase, opts.max_memory)
    outs = [reader.measure(mp) for mp in tape.measurements]
    if batch is None:
        outs = [o[0] for o in outs]
    # left on the device: read here with a value cutoff, when asked with bonds fixed by structure (settings.py)
    report.append((mps.discarded, mps.fidelity, mps.max_bond_seen))
    if structure is not None:
        structure.append((len(wires), mps.route.spans if mps.route is not None else None, mps.batch))
    return tuple(outs)


def _record_route(cache, mps, settings) -> None:
    route = mps.route
    if cache is None or route is None:
        return
    cutoff = f"{settings.cutoff:g}" + (" (the default: numerical zeros)" if settings.default_cutoff else "")
    checked = "checked split by split against max_memory" if route.guarded else "within max_memory"
    reason = (f"method='mps', max_bond_dim={settings.max_bond_dim}, cutoff={cutoff}: {route.splits} splits "
              f"({route.swaps} SWAPs); bonds at most {route.bond_bound}, worst case "
              f"{_fmt_bytes(route.worst_bytes)} ({checked})")
    key = ("mps", mps.n_sites, route.spans, settings.max_bond_dim, settings.cutoff, mps.batch)
    _record(cache, key, f"whole circuit, {mps.n_sites} wires", "matrix product state", reason)


class _Record:
    """A plan-cache entry that only says what ran (``PlanCache.info`` lists its ``engine_choices``)."""

    def __init__(self, what: str, engine: str, reason: str):
        # imported here: lightcone.choice imports _options, which imports this package (mps.settings)
        from ..lightcone.choice import EngineChoice

        self.engine_choices = (EngineChoice(what, engine, reason, None, None, None, None),)


def _record(cache, key, what: str, engine: str, reason: str) -> None:
    if cache is not None:
        cache.get(key, lambda: _Record(what, engine, reason))

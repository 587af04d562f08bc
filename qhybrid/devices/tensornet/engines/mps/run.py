"""``method="mps"``: variants in, torch results out (the tensornet device's ``simulate`` calls this)."""

from __future__ import annotations

from typing import Sequence

import torch

from ....._variant import Variant
from .circuit import build_mps
from .readout import MPSReader


def site_order(tape, device_wires) -> list:
    """Wires in MPS site order: the device's (every wire a site; unused ones stay |0>), else the tape's."""
    return list(device_wires) if device_wires is not None else list(tape.wires)


def run_mps(variants: Sequence[Variant], device_wires, opts) -> list[tuple[torch.Tensor, ...]]:
    """Each variant's results (one tensor per measurement, differentiable in its parameters) from one batched
    MPS per variant; the truncation of the whole call goes to ``opts.mps``'s log (and warns above the limit)."""
    settings = opts.mps
    results, report = [], []
    for v in variants:
        v = v.with_observables_bound()
        tape = v.tape
        wires = site_order(tape, device_wires)
        site_of = {w: i for i, w in enumerate(wires)}
        batch = tape.batch_size
        mps, phase, site_of = build_mps(
            tape, v.params, site_of, len(wires), batch or 1, opts.dtype, opts.device,
            settings.max_bond_dim, settings.cutoff,
        )
        reader = MPSReader(mps, site_of, wires, phase, opts.max_memory)
        outs = [reader.measure(mp) for mp in tape.measurements]
        if batch is None:
            outs = [o[0] for o in outs]
        results.append(tuple(outs))
        report.append((mps.discarded.tolist(), mps.fidelity.tolist(), mps.max_bond_seen))
    settings.report(report)
    return results

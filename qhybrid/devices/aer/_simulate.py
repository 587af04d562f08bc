"""Variants in, torch results out: group by circuit structure, bind every parameter set, one Aer job per
structure, read each measurement back.

Pure functions over a :class:`RunContext` (what the device provides: wires, basis gates, the job runner
and the structure cache), so the device class only holds options and state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pennylane as qml
import torch
from pennylane.measurements import CountsMP
from pennylane.wires import Wires

from ..._variant import Variant
from ...errors import UnsupportedOperationError
from ..tensornet._options import PlanCache
from ._convert import OpSlot, Template, build_template, matrix_key, op_slots, slot_matrices
from ._errors import AerSimulationError
from ._measure_analytic import AnalyticPlan
from ._measure_sampled import SamplePlan, counts_row
from ..tensornet._structure import standard_wires

MATRIX_TEMPLATES_PER_STRUCTURE = 64
"""Circuits kept per structure for distinct matrix values (QubitUnitary data); older ones are dropped."""


@dataclass
class RunContext:
    """What the simulation needs from the device."""

    wires: Wires | None
    basis: frozenset
    mixed: bool  # density-matrix method: qml.state() is the density matrix
    cache: PlanCache
    run_job: Callable  # (circuits, parameter_binds, shots, memory) -> qiskit Result
    sampling_rng: Callable  # () -> a numpy Generator for shots drawn from exact probabilities
    probability_sampling: bool = True  # draw shots from exact probabilities (see SamplePlan)
    finalize: Callable = lambda qc: qc  # e.g. transpile to a noise model's basis gates


@dataclass
class Program:
    """Everything built once for a structure: operation slots, measurement plan, circuits by matrix values."""

    slots: tuple[OpSlot, ...]
    plan: AnalyticPlan | SamplePlan
    wires: Wires
    used: tuple[int, ...]
    templates: dict = field(default_factory=dict)

    def template(self, tape, key, matrices, finalize) -> Template:
        t = self.templates.get(key)
        if t is None:
            if len(self.templates) >= MATRIX_TEMPLATES_PER_STRUCTURE:
                self.templates.pop(next(iter(self.templates)))
            t = build_template(self.slots, tape, self.wires, self.plan, matrices, finalize)
            self.templates[key] = t
        return t


def tape_shots(tape: qml.tape.QuantumScript, default: qml.measurements.Shots) -> int | None:
    """The shots a tape runs with: its own, else the device's; shot vectors must be split beforehand."""
    shots = tape.shots if tape.shots else default
    if not shots:
        return None
    if shots.has_partitioned_shots:
        raise UnsupportedOperationError(
            f"Shot vector {shots} reached the Aer job runner; shot vectors return one result per shot setting, "
            "so run them through qhybrid.execute, a QNode or the device's execute (each splits them)."
        )
    return int(shots.total_shots)


def _structure(tape, wires: Wires, shots: int | None, ctx: RunContext):
    slots = op_slots(tape, ctx.basis)
    if not shots and not ctx.mixed and any(s.kind == "channel" for s in slots):
        raise UnsupportedOperationError(
            "The circuit has noise channels; exact (shots=None) results of it need qhybrid.aer with "
            "method='density_matrix'. Other methods sample noisy trajectories: set shots."
        )
    if shots:
        # a state vector with channels is one noisy trajectory: its probabilities are not the mixture's (every shot
        # drawn from them fell on one trajectory's outcome); Aer's own shots run one trajectory each
        trajectories = not ctx.mixed and any(s.kind == "channel" for s in slots)
        plan = SamplePlan(tape, wires, from_probabilities=ctx.probability_sampling and not trajectories)
    else:
        plan = AnalyticPlan(tape, wires, mixed=ctx.mixed)
    ops_key = tuple((s.kind, s.name, s.wires, s.params[1] - s.params[0], s.steps) for s in slots)
    key = (tuple(wires), ops_key, plan.key, shots)
    return key, slots, plan


def _as_array(p) -> np.ndarray:
    if isinstance(p, torch.Tensor):
        return p.detach().cpu().numpy()
    return np.asarray(qml.math.unwrap(p))


def _torch(x, device) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x))
    if t.is_floating_point():
        t = t.to(torch.float64)
    elif t.is_complex():
        t = t.to(torch.complex128)
    return t if device is None else t.to(device)


def _result_device(params: Sequence):
    for p in params:
        if isinstance(p, torch.Tensor):
            return None if p.device.type == "cpu" else p.device
    return None


def simulate(variants: Sequence[Variant], ctx: RunContext, default_shots) -> list[tuple]:
    """Results of every variant, a tuple with one entry per measurement (torch tensors; counts are dicts)."""
    # readers take Hamiltonian coefficients and observable matrices from the tape
    rebound: dict = {}
    variants = [v.with_observables_bound(memo=rebound) for v in variants]
    memo: dict[int, tuple] = {}
    groups: dict[tuple, list[int]] = {}
    info = []
    for i, v in enumerate(variants):
        s = memo.get(id(v.tape))
        if s is None:
            shots = tape_shots(v.tape, default_shots)
            wires = ctx.wires if ctx.wires is not None else standard_wires(v.tape)  # (PennyLane's order)
            s = memo[id(v.tape)] = (*_structure(v.tape, wires, shots, ctx), shots, wires)
        info.append(s)
        groups.setdefault(s[0], []).append(i)

    results: list = [None] * len(variants)
    for key, members in groups.items():
        _, slots, plan, shots, wires = info[members[0]]
        used = tuple(j for s in slots if s.kind in ("recipe", "phase") for j in range(*s.params))
        program = ctx.cache.get(key, lambda: Program(slots, plan, wires, used))
        outs = _run_group(program, [variants[i] for i in members], shots, ctx)
        for i, out in zip(members, outs):
            results[i] = out
    return results


def _run_group(program: Program, group: Sequence[Variant], shots: int | None, ctx: RunContext) -> list[tuple]:
    converted: dict[int, np.ndarray] = {}

    def value(p, batch):
        a = converted.get(id(p))
        if a is None:
            a = converted[id(p)] = np.real(_as_array(p)).astype(float)
        if a.ndim == 0:
            return np.full(batch, float(a))
        if a.shape != (batch,):
            raise UnsupportedOperationError(
                f"A gate parameter of shape {a.shape} cannot be bound on qhybrid.aer (expected a scalar or a "
                f"broadcast axis of {batch})."
            )
        return a

    # every parameter set of every variant, sorted into circuits by the values of their matrix operators
    entries: dict[tuple, dict] = {}
    layout: list[list[tuple[tuple, int]]] = []  # per variant, per set: (circuit key, column)
    has_matrix = any(s.kind in ("matrix", "channel") for s in program.slots)
    for v in group:
        batch = v.tape.batch_size or 1
        flat = {j: value(v.params[j], batch) for j in program.used}
        mats = slot_matrices(program.slots, v.tape, v.params, batch) if has_matrix else [{}] * batch
        keys = [matrix_key(m) for m in mats] if has_matrix else [()] * batch
        where = []
        for b, mkey in enumerate(keys):
            e = entries.get(mkey)
            if e is None:
                e = entries[mkey] = {
                    "template": program.template(v.tape, mkey, mats[b], ctx.finalize),
                    "chunks": [],
                    "size": 0,
                }
            where.append((mkey, e["size"]))
            e["size"] += 1
            if b == 0 or keys[b - 1] != mkey or not e["chunks"] or e["chunks"][-1][0] is not flat:
                e["chunks"].append((flat, [b]))
            else:
                e["chunks"][-1][1].append(b)
        layout.append(where)

    circuits, binds, offsets = [], [], {}
    for mkey, e in entries.items():
        t: Template = e["template"]
        offsets[mkey] = _count(binds)
        if t.parameters:
            used = set(t.index)
            flat = {j: np.concatenate([f[j][rows] for f, rows in e["chunks"]]) for j in used}
            vals = t.values(flat)
            circuits.append(t.circuit)
            binds.append({p: vals[k].tolist() for k, p in enumerate(t.parameters)})
        else:
            circuits.extend([t.circuit] * e["size"])
            binds.extend({} for _ in range(e["size"]))
    drawn = bool(shots) and program.plan.from_probabilities
    memory = bool(shots) and program.plan.memory and not drawn
    result = ctx.run_job(circuits, binds, None if drawn else shots, memory)
    rng = ctx.sampling_rng() if drawn else None
    exps = result.results
    for k, exp in enumerate(exps):
        if not exp.success:
            raise AerSimulationError(f"Aer experiment {k} failed: {exp.status}")

    def experiment(mkey, column):
        return exps[offsets[mkey] + column]

    outs = []
    for v, where in zip(group, layout):
        exp_list = [experiment(mkey, col) for mkey, col in where]
        if shots:
            rows = []
            for exp in exp_list:
                if drawn:
                    rows.append(program.plan.draw(exp.data.to_dict(), shots, rng))
                    continue
                if program.plan.n_clbits == 0:
                    rows.append({"idx": np.zeros(1, dtype=np.int64), "cnt": np.array([float(shots)]), "shots": shots})
                    continue
                data = exp.data
                rows.append(counts_row(data.counts, shots, getattr(data, "memory", None) if memory else None))
            values = program.plan.read(rows, v.tape)
        else:
            rows = program.plan.collect([exp.data.to_dict() for exp in exp_list])
            values = program.plan.read(rows, v.tape)
        device = _result_device(v.params)
        batched = v.tape.batch_size is not None
        res = []
        for mp, val in zip(v.tape.measurements, values):
            if isinstance(mp, CountsMP):
                res.append(val if batched else val[0])
            else:
                t = _torch(val, device)
                res.append(t if batched else t[0])
        outs.append(tuple(res))
    return outs


def _count(binds: Sequence[dict]) -> int:
    """Experiments the circuits so far produce: one per bound set, one for a circuit without parameters."""
    return sum(len(next(iter(b.values()))) if b else 1 for b in binds)


__all__ = ["RunContext", "Program", "simulate", "tape_shots"]

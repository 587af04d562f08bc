"""Scaling plots: time of one forward + backward of the W1 circuit vs qubits and vs batch size.

    python -m benchmarks.plots [--out benchmarks] [--repeats 3]

qhybrid (adjoint) beside default.qubit (backprop) and lightning.qubit (adjoint), alternating in one
process, complex128, medians. Writes ``scaling_qubits.png``, ``scaling_batch.png`` and ``scaling.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from .workloads import make

SYSTEMS = ["qhybrid", "default.qubit backprop", "lightning.qubit adjoint"]
QUBITS = [4, 6, 8, 10, 12]
BATCHES = [1, 8, 32, 128, 512]
MAX_STEP_S = 5.0
"""A system whose warm-up step takes longer than this is not run at larger sizes."""


def _median(step, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def sweep(points, repeats, **fixed):
    out = {s: {} for s in SYSTEMS}
    dropped = set()
    for value in points:
        steps = {}
        for s in SYSTEMS:
            if s in dropped:
                continue
            kw = dict(fixed)
            kw[next(k for k in ("n_qubits", "batch") if k not in fixed)] = value
            step = make("W1", s, **kw)
            t0 = time.perf_counter()
            step()
            if time.perf_counter() - t0 > MAX_STEP_S:
                dropped.add(s)
            steps[s] = step
        times = {s: [] for s in steps}
        for _ in range(repeats):  # alternate
            for s, step in steps.items():
                times[s].append(_median(step, 1))
        for s, ts in times.items():
            out[s][value] = statistics.median(ts)
        print(value, {s: f"{t * 1e3:.1f} ms" for s, t in ((s, out[s][value]) for s in steps)}, flush=True)
    return out


def plot(data, xlabel, title, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for s, pts in data.items():
        xs = sorted(pts)
        ax.plot(xs, [pts[x] * 1e3 for x in xs], marker="o", label=s)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("forward + backward [ms]")
    ax.set_yscale("log")
    if "batch" in xlabel:
        ax.set_xscale("log", base=2)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    q = sweep(QUBITS, args.repeats, batch=32)
    b = sweep(BATCHES, args.repeats, n_qubits=8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.json"), "w") as fh:
        json.dump({"qubits_batch32": q, "batch_8qubits": b, "threads": torch.get_num_threads()}, fh, indent=1)
    plot(q, "qubits", "AngleEmbedding + 4 SEL layers, batch 32, complex128, 2 threads",
         os.path.join(args.out, "scaling_qubits.png"))
    plot(b, "batch size", "8 qubits, AngleEmbedding + 4 SEL layers, complex128, 2 threads",
         os.path.join(args.out, "scaling_batch.png"))


if __name__ == "__main__":
    main()

"""Cold planning of a deep QAOA workload: the first value + gradient step in a fresh process with an empty path
cache, with the hyper tier on one process (``QHYBRID_PLAN_WORKERS=1``) and over every core (the default),
alternating; the trees' total forward flops must be the same.

    python -m benchmarks.plan_cold [Q100p4 L8p4 ...] [--repeats N] [--timeout S] [--workers both|1|cores]
                                   [--max-memory GB] [--out FILE]

``hyper_s``: the seconds the hyper tier took (the costly trees' planning), ``flops``: the trees' forward flops,
``first_s`` / ``first_cpu_s``: the first step's wall and CPU seconds in the process, ``workers_cpu_s``: the CPU
seconds of its plan workers, ``cpu_s`` both together; ``load`` / ``load_after``: the 1-minute load around it.
Each run is its own process (nothing planned before: memo, path cache and compiled schedules empty), one
intra-op thread. ``--max-memory`` fixes the device's ``max_memory``: without it the planner's largest intermediate
follows the memory available at that moment, and a tree near that limit can change with it (an L8p4 class after
steps 1-3: 2^34.81 flops with its 2^27-element tree fitting under 2^27.5 elements, 2^33.77 when nothing or
everything fits; L8p4's final trees were the same at 3 GB, 6 GB and the default, 2026-11-28). Writes one JSON
row per run to ``--out`` (default benchmarks/results/plan_cold.json; the rows of other workloads there are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, os, resource, sys, time, torch
torch.set_num_threads(1)
from benchmarks.deep import qhybrid_step, tree_flops
from qhybrid.devices.tensornet.engines.network.pathfind import STATS
from benchmarks.workloads import deep_qaoa
n, edges, p = deep_qaoa(sys.argv[1])
step = qhybrid_step(n, edges, p, max_memory=float(sys.argv[2]) if sys.argv[2] != "none" else None)
t, cpu = time.perf_counter(), time.process_time()
step()
first, cpu = time.perf_counter() - t, time.process_time() - cpu
workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # the plan workers, joined by now
print(json.dumps({"first_s": first, "first_cpu_s": cpu, "workers_cpu_s": workers.ru_utime + workers.ru_stime,
                  "hyper_s": STATS.hyper_seconds, "hyper_networks": STATS.hyper, "flops": tree_flops(step.device)}))
"""


def cold_run(workload: str, workers: int | None, timeout: float, max_memory: float | None = None) -> dict:
    """One cold first step in a fresh process (``workers`` None: the default, every core; ``max_memory`` in bytes,
    None: the device's default, a share of the memory available)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("QHYBRID_PLAN_WORKERS", None)
    if workers is not None:
        env["QHYBRID_PLAN_WORKERS"] = str(workers)
    row = {"workload": workload, "workers": workers or "cores", "load": os.getloadavg()[0]}
    if max_memory is not None:
        row["max_memory"] = max_memory
    if hasattr(os, "sched_getaffinity"):
        row["cores"] = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as cache:
        env["QHYBRID_CACHE_DIR"] = cache
        began = time.perf_counter()
        try:
            memory = "none" if max_memory is None else repr(float(max_memory))
            out = subprocess.run([sys.executable, "-c", CHILD, workload, memory], env=env, capture_output=True, text=True,
                                 timeout=timeout, check=True)  # fmt: skip
            row.update(json.loads(out.stdout.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            row["error"] = f"over {timeout:.0f} s"
        except subprocess.CalledProcessError as exc:
            row["error"] = exc.stderr.strip().splitlines()[-1][:200]
        row["process_s"] = time.perf_counter() - began
        row["load_after"] = os.getloadavg()[0]
    if "first_cpu_s" in row:  # the CPU the first step took, in the process and its plan workers together
        row["cpu_s"] = row["first_cpu_s"] + row["workers_cpu_s"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=["Q100p4"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--workers", choices=["both", "1", "cores"], default="both",
                    help="plan in one process, over every core, or both alternating (default)")
    ap.add_argument("--max-memory", type=float, default=None, metavar="GB",
                    help="fix the device's max_memory (GB) so the trees are compared under one limit")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "plan_cold.json"))
    a = ap.parse_args()
    rows = []
    for workload in a.workloads:
        for _ in range(a.repeats):
            for workers in {"both": (1, None), "1": (1,), "cores": (None,)}[a.workers]:  # alternating: the load falls on both alike
                row = cold_run(workload, workers, a.timeout, None if a.max_memory is None else a.max_memory * 2**30)
                print(json.dumps(row), flush=True)
                rows.append(row)
    out = Path(a.out)
    try:  # rows of the workloads not run now are kept
        kept = [r for r in json.loads(out.read_text())["rows"] if r.get("workload") not in a.workloads]
    except (OSError, ValueError, KeyError, TypeError):
        kept = []
    out.write_text(json.dumps({"cores": len(os.sched_getaffinity(0)), "rows": kept + rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

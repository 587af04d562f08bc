"""qhybrid against the compiled peers (issues 19 and 21), alternating in one process per thread count.

    python -m benchmarks.peers_run                  # every workload, 1 thread then 2 threads
    python -m benchmarks.peers_run --quick          # end-to-end check: fewer steps, slowest rows skipped
    python -m benchmarks.peers_run --workloads W1,G16 --threads 1 --systems qhybrid,Catalyst

Per thread count a child process is started with the thread settings fixed before anything is imported
(``XLA_FLAGS`` must be set before jax loads): its CPU affinity pinned to that many cores,
``torch.set_num_threads``, ``OMP_NUM_THREADS`` (lightning, Catalyst) and for one thread
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``. In the child, per workload:
each system is built and run once (the *first step*: tracing and JIT compilation for the JAX peers and
Catalyst, plan search for qhybrid), once more as warm-up, then the timed steps are taken round-robin over
the systems (qhybrid, peer, peer, ..., qhybrid, ...) so a noisy patch of the machine hits all of them.
Systems whose warm-up step takes longer than ``SLOW_STEP_S`` get fewer timed steps.

Every row's loss and gradients are compared with qhybrid's (with ``GraphQLayer``'s where the plain qnode
fails); a deviation above ``TOLERANCE`` is printed, marked in the table, and makes the exit status 1.
A peer whose package is missing is reported "not installed (<ImportError>)", a system that raises is
reported "fails: <error>"; neither stops the run.

Writes ``<out>/peers.json`` and ``<out>/peers.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TOLERANCE = 1e-10
"""Largest allowed |peer - reference| over the loss and every gradient entry."""

SLOW_STEP_S = 2.0
"""A system whose warm-up step takes longer than this gets ``--slow-repeats`` timed steps."""

VERY_SLOW_STEP_S = 15.0
"""... and longer than this, no more steps: the warm-up step is its one timed step (W5 on torch
default.qubit: 25-55 s a step; quimb's Q100p1: minutes)."""

ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

QAOA_ROWS = ["qhybrid", "qhybrid static", "qhybrid GraphQLayer"]
JAX_ROWS = ["dq jax.jit", "hand jax.jit", "TC-NG", "Catalyst"]
PLAN: dict[str, list[str]] = {
    "W1": ["qhybrid", "qhybrid static", "dq torch", "lightning adjoint", *JAX_ROWS],
    "W2": ["qhybrid", "qhybrid static", "dq torch", *JAX_ROWS],
    "W5": ["qhybrid", "qhybrid static", "dq torch", *JAX_ROWS],
    "G16": [*QAOA_ROWS, "dq torch", "lightning adjoint", *JAX_ROWS],
    "Q100p1": [*QAOA_ROWS, "quimb torch"],
    "Q100p2": [*QAOA_ROWS, "quimb torch"],
    "Q100p3": [*QAOA_ROWS, "quimb torch"],
    "HEA50": ["qhybrid", "quimb torch", "TC-NG"],
}
"""Workload -> systems, qhybrid first (the reference)."""

SKIP: dict[tuple[str, str], str] = {
    ("W5", "TC-NG"): "skipped: ran out of memory in issue 21's measurement (vmap of 1024 closed networks)",
    ("HEA50", "TC-NG"): "skipped: JIT of 50 closed 50-qubit networks, compile time not yet measured (--all runs it)",
    ("Q100p2", "quimb torch"): "skipped: minutes a step (150 light-cone contractions with torch autograd)",
    ("Q100p3", "quimb torch"): "skipped: minutes a step (150 light-cone contractions with torch autograd)",
}
"""Rows not run by default (``--all`` runs them), with the reason printed in the table."""

QUICK_SKIP: dict[tuple[str, str], str] = {
    ("W5", "dq torch"): "skipped in --quick: ~25 s and ~6 GB a step",
    ("W2", "TC-NG"): "skipped in --quick: minutes of JIT compilation",
    ("W2", "dq jax.jit"): "skipped in --quick: 5 min of JIT compilation here, ~17 s a step",
    ("W2", "hand jax.jit"): "skipped in --quick: minutes of JIT compilation, GBs of saved states",
    ("W5", "dq jax.jit"): "skipped in --quick: minutes of JIT compilation, ~10 GB of saved states",
    ("W5", "hand jax.jit"): "skipped in --quick: ~10 GB of saved states (1024 x 156 gates x 64 KiB)",
}

QUICK_FIRST_ONLY = {"quimb torch"}
"""Systems that --quick runs once (checked, first step timed, no warm-up or timed steps)."""


# ----------------------------------------------------------------------------------------------- child


def _pin(threads: int) -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)
    return cpus


def _deviation(a, b) -> float:
    import numpy as np

    dev = abs(a[0] - b[0])
    for ga, gb in zip(a[1], b[1]):
        dev = max(dev, float(np.max(np.abs(np.asarray(ga) - np.asarray(gb)))))
    return dev


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _repeats(warm_s: float, repeats: int, slow_repeats: int) -> int:
    if warm_s > VERY_SLOW_STEP_S:
        return 0
    return slow_repeats if warm_s > SLOW_STEP_S else repeats


def run_workload(wid: str, systems: list[str], repeats: int, slow_repeats: int, skip: dict,
                 first_only: set = frozenset()) -> dict:
    import statistics

    from . import peers
    from .workloads import WORKLOADS

    wl = WORKLOADS[wid]
    data = peers.inputs(wl)
    rows, steps, ref = {}, {}, None
    for s in systems:
        if (wid, s) in skip:
            rows[s] = {"status": skip[(wid, s)]}
            continue
        why = peers.available(s)
        if why:
            rows[s] = {"status": why}
            continue
        try:
            t0 = time.perf_counter()
            step = peers.build(s, wl, data)
            first = step()
            t1 = time.perf_counter()
            if s not in first_only:
                step()
            t2 = time.perf_counter()
        except NotImplementedError as exc:
            rows[s] = {"status": f"n/a: {exc}"}
            continue
        except Exception as exc:  # a failing system is a result, not a crash
            rows[s] = {"status": f"fails: {_error(exc)}"}
            print(f"  {wid} {s}: fails: {_error(exc)}", flush=True)
            continue
        row = {"status": "ok", "first_s": t1 - t0, "warm_s": t2 - t1, "loss": first[0]}
        if ref is None:
            ref = (s, first)
        row["ref"] = ref[0]
        row["max_dev"] = _deviation(first, ref[1])
        if row["max_dev"] > TOLERANCE:
            row["mismatch"] = True
            print(f"  MISMATCH {wid} {s}: max |{s} - {ref[0]}| = {row['max_dev']:.2e} > {TOLERANCE}", flush=True)
        rows[s] = row
        if s in first_only:
            row["note"] = "first step only (--quick)"
        else:
            steps[s] = step
        print(f"  {wid} {s}: first {row['first_s']:.2f} s, warm {row['warm_s'] * 1e3:.1f} ms, "
              f"max dev {row['max_dev']:.1e} vs {ref[0]}", flush=True)
    want = {s: _repeats(rows[s]["warm_s"], repeats, slow_repeats) for s in steps}
    times = {s: [] for s in steps}
    for _ in range(max(want.values(), default=0)):
        for s, step in steps.items():
            if len(times[s]) < want[s]:
                t0 = time.perf_counter()
                step()
                times[s].append(time.perf_counter() - t0)
    for s, ts in times.items():
        ts = ts or [rows[s]["warm_s"]]
        rows[s].update(median_s=statistics.median(ts), times_s=ts, repeats=len(ts))
    return rows


def child(args) -> int:
    threads = args.child
    cpus = _pin(threads)
    import torch

    torch.set_num_threads(threads)
    skip = dict(SKIP) if not args.all else {}
    if args.quick and not args.all:
        skip.update(QUICK_SKIP)
    only = set(args.systems.split(",")) if args.systems else None
    out = {"threads": threads, "cpus": cpus, "torch_threads": torch.get_num_threads(),
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "workloads": {}}
    for wid in args.workloads.split(","):
        systems = [s for s in PLAN[wid] if only is None or s in only]
        print(f"{wid} at {threads} thread(s): {systems}", flush=True)
        first_only = QUICK_FIRST_ONLY if args.quick else set()
        out["workloads"][wid] = run_workload(wid, systems, args.repeats, args.slow_repeats, skip, first_only)
        with open(args.json, "w") as fh:  # after every workload: a killed run keeps what it finished
            json.dump(out, fh, indent=1)
    return 0


# ---------------------------------------------------------------------------------------------- parent


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("torch", "pennylane", "pennylane-lightning", "jax", "jaxlib", "pennylane-catalyst",
                 "tensorcircuit-ng", "quimb", "cotengra", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        out["qhybrid commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                               text=True, check=True).stdout.strip()
    except Exception:
        out["qhybrid commit"] = None
    return out


def _machine() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except Exception:
        return f"{os.cpu_count()} CPUs (lscpu unavailable)"
    keep = ("Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket",
            "Hypervisor vendor", "L1d cache", "L2 cache", "L3 cache")
    lines = [ln.strip() for ln in text.splitlines() if ln.split(":")[0].strip() in keep]
    return "; ".join(" ".join(ln.split()) for ln in lines)


def _child_env(threads: int) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    if threads == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + ONE_THREAD_XLA).strip()
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 timed steps (slow rows 1), the slowest rows skipped")
    ap.add_argument("--workloads", default=",".join(PLAN))
    ap.add_argument("--systems", default=None, help="comma list restricting the systems (qhybrid is the reference)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--slow-repeats", type=int, default=None)
    ap.add_argument("--all", action="store_true", help="also run the rows skipped by default")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.slow_repeats = args.slow_repeats or (1 if args.quick else 3)
    if args.child is not None:
        return child(args)
    from .peers_report import availability, markdown

    report = {"machine": _machine(), "versions": _versions(), "quick": args.quick, "tolerance": TOLERANCE,
              "availability": availability(), "runs": []}
    ok = [s for s, why in report["availability"].items() if why == "installed"]
    print("Peers installed: " + (", ".join(ok) or "none"), flush=True)
    for s, why in report["availability"].items():
        if why != "installed":
            print(f"Peer {s}: {why} (`make bench-peers` installs the peers in .venv-peers)", flush=True)
    t_start = time.perf_counter()
    for threads in [int(t) for t in args.threads.split(",")]:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
            path = fh.name
        cmd = [sys.executable, "-m", "benchmarks.peers_run", "--child", str(threads), "--json", path,
               "--workloads", args.workloads, "--repeats", str(args.repeats),
               "--slow-repeats", str(args.slow_repeats)]
        cmd += ["--quick"] * args.quick + ["--all"] * args.all
        cmd += ["--systems", args.systems] if args.systems else []
        rc = subprocess.run(cmd, env=_child_env(threads)).returncode
        run = {"threads": threads}
        if os.path.getsize(path):
            with open(path) as fh:
                run = json.load(fh)
        if rc != 0:
            run["error"] = f"child exited with status {rc} (workloads it finished are kept)"
        report["runs"].append(run)
        os.unlink(path)
    report["wall_s"] = time.perf_counter() - t_start
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out, "peers.md"), "w") as fh:
        fh.write(md)
    print(md)
    bad = [r for run in report["runs"] for w in run.get("workloads", {}).values() for r in w.values()
           if r.get("mismatch")]
    return 1 if bad or any("error" in run for run in report["runs"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

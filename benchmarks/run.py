"""Side-by-side benchmarks: qhybrid and its peers on the workloads of WORKLOADS.md, alternating in one process.

    python -m benchmarks.run [--quick] [--workloads W1,W4] [--out benchmarks/results] [--plots]

Each step is one forward + backward. Per (workload, system): 2 warm-up steps, then ``--repeats`` timed
steps taken alternately with the other systems of that workload (qhybrid, peer, qhybrid, peer, ...), so a
slow patch of the machine hits both. Peers that take seconds per step get ``--slow-repeats``. Peak memory
of the first three steps is measured in a fresh subprocess per (workload, system): the rise of the RSS
(sampled every millisecond) over what the process held after building the step, before its first run.

Writes ``<out>/results.json`` and ``<out>/results.md`` (medians, ratios peer / qhybrid, peak memory,
threads, plan-cache hit rate).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

from .workloads import PEERS_FOR, WORKLOADS, make

THREADS = 2
SLOW_STEP_S = 2.0
"""A system whose warm-up step takes longer than this gets ``--slow-repeats`` timed steps."""

DTYPES = {"complex128": torch.complex128, "complex64": torch.complex64}


def _time(step) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def run_workload(wid: str, systems: list[str], repeats: int, slow_repeats: int, dtype) -> dict:
    steps, warm = {}, {}
    for s in systems:
        try:
            step = make(wid, s, dtype)
            step()
            warm[s] = _time(step)
            steps[s] = step
        except Exception as exc:  # a peer that cannot run this workload is reported, not fatal
            print(f"  {wid} {s}: cannot run ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
    times = {s: [] for s in steps}
    want = {s: (slow_repeats if warm[s] > SLOW_STEP_S else repeats) for s in steps}
    for r in range(max(want.values(), default=0)):
        for s in steps:
            if len(times[s]) < want[s]:
                times[s].append(_time(steps[s]))
    out = {}
    for s, ts in times.items():
        out[s] = {"median_s": statistics.median(ts), "times_s": ts, "repeats": len(ts)}
        dev = getattr(steps[s], "device", None)
        if s == "qhybrid" and hasattr(dev, "plan_cache_info"):
            info = dev.plan_cache_info()
            out[s]["plan_cache"] = {"hits": info.hits, "misses": info.misses, "size": info.size}
    return out


def memory_probe(wid: str, system: str, dtype_name: str) -> None:
    """Child process: print the peak RSS rise (bytes) over three steps, sampled every millisecond by a
    thread, above the RSS held after building the step (imports and set-up excluded)."""
    import threading

    import psutil

    torch.set_num_threads(THREADS)
    step = make(wid, system, DTYPES[dtype_name])
    proc = psutil.Process()
    before = proc.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.001)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    for _ in range(3):
        step()
    done.set()
    thread.join()
    print(json.dumps({"peak_rise_bytes": max(peak[0] - before, 0)}))


def _memory(wid: str, system: str, dtype_name: str, timeout: float) -> float | None:
    cmd = [sys.executable, "-m", "benchmarks.run", "--memory-probe", wid, system, dtype_name]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return json.loads(res.stdout.strip().splitlines()[-1])["peak_rise_bytes"]
    except Exception:
        return None


def cache_hit_rate(epochs: int = 10, batches: int = 4) -> dict:
    """Plan-cache hits over a training loop of W1's layer (4 mini-batches an epoch, fresh data each)."""
    import pennylane as qml

    import qhybrid

    dev = qhybrid.device("tensornet", wires=8)
    from .workloads import sel_function

    f = qhybrid.qnode(dev, diff_method="adjoint")(sel_function(8))
    w = torch.rand(4, 8, 3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.01)
    per_epoch = []
    for e in range(epochs):
        h0, m0 = dev.plan_cache_info().hits, dev.plan_cache_info().misses
        for b in range(batches):
            x = torch.rand(128, 8, dtype=torch.float64)
            loss = torch.stack(f(x, w)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        info = dev.plan_cache_info()
        hits, misses = info.hits - h0, info.misses - m0
        per_epoch.append(hits / max(hits + misses, 1))
    del qml
    return {"per_epoch": per_epoch, "after_epoch_1": statistics.mean(per_epoch[1:]) if epochs > 1 else None}


def backward_forward_ratio(repeats: int = 9) -> dict:
    """W1: time of the forward alone and of forward + backward (adjoint), complex128."""
    import qhybrid

    from .workloads import sel_function

    dev = qhybrid.device("tensornet", wires=8)
    f = qhybrid.qnode(dev, diff_method="adjoint")(sel_function(8))
    x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
    w = torch.rand(4, 8, 3, dtype=torch.float64, requires_grad=True)
    fw, bw = [], []
    for r in range(repeats + 2):
        t0 = time.perf_counter()
        loss = torch.stack(f(x, w)).sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if r >= 2:
            fw.append(t1 - t0)
            bw.append(t2 - t1)
    fwd, bwd = statistics.median(fw), statistics.median(bw)
    return {"forward_s": fwd, "backward_s": bwd, "ratio": bwd / fwd}


def _fmt_t(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.1f} s"


def _fmt_mem(b) -> str:
    if b is None:
        return "—"
    return f"{b / 2**20:.1f} MiB"


def markdown(report: dict) -> str:
    lines = [
        f"torch threads: {report['threads']}; torch {report['versions']['torch']}, pennylane "
        f"{report['versions']['pennylane']}; {report['machine']}",
        "",
        "| workload | dtype | system | median | repeats | ratio peer/qhybrid | peak memory (RSS rise) |",
        "|---|---|---|---|---|---|---|",
    ]
    for wid, per_dtype in report["workloads"].items():
        for dname, res in per_dtype.items():
            q = res.get("qhybrid", {}).get("median_s")
            for s, r in res.items():
                ratio = "" if s == "qhybrid" or q is None else f"{r['median_s'] / q:.1f}x"
                lines.append(
                    f"| {wid} | {dname} | {s} | {_fmt_t(r['median_s'])} | {r['repeats']} | {ratio} | "
                    f"{_fmt_mem(r.get('peak_rise_bytes'))} |"
                )
    c64 = report.get("complex64_speedup", {})
    if c64:
        lines += ["", "| workload | qhybrid complex128 / complex64 |", "|---|---|"]
        lines += [f"| {w} | {v:.2f}x |" for w, v in c64.items()]
    if "cache" in report:
        c = report["cache"]
        lines += ["", f"Plan-cache hit rate, 10-epoch W1 training loop: epoch 1 {c['per_epoch'][0]:.0%}, "
                  f"epochs 2-10 {c['after_epoch_1']:.0%}."]
    if "bwd_fwd" in report:
        b = report["bwd_fwd"]
        lines += [f"W1 adjoint: forward {_fmt_t(b['forward_s'])}, backward {_fmt_t(b['backward_s'])}, "
                  f"backward/forward {b['ratio']:.2f}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, no memory probes of slow peers")
    # the structured rows (Q100pP, HEA50) and their peers are benchmarks.peers_run's
    ap.add_argument("--workloads", default="W1,W2,W3,W3b,W4,W5,G16", help=f"from {','.join(WORKLOADS)}")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--slow-repeats", type=int, default=None)
    ap.add_argument("--dtypes", default="complex128,complex64")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--peers", default=None, help="comma list to restrict the peers")
    ap.add_argument("--memory-probe", nargs=3, metavar=("WORKLOAD", "SYSTEM", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(THREADS)
    if args.memory_probe:
        memory_probe(*args.memory_probe)
        return 0
    repeats = args.repeats or (5 if args.quick else 9)
    slow = args.slow_repeats or (1 if args.quick else 3)
    import pennylane as qml

    report = {
        "threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "pennylane": qml.__version__, "python": platform.python_version()},
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "workloads": {},
    }
    for wid in args.workloads.split(","):
        report["workloads"][wid] = {}
        for dname in args.dtypes.split(","):
            peers = PEERS_FOR[wid] if dname == "complex128" else []  # peers compared in complex128
            if args.peers is not None:
                peers = [p for p in peers if p in args.peers.split(",")]
            systems = ["qhybrid", *peers]
            print(f"{wid} {dname}: {systems}", flush=True)
            res = run_workload(wid, systems, repeats, slow, DTYPES[dname])
            for s, r in res.items():
                if not args.no_memory and not (args.quick and r["median_s"] > SLOW_STEP_S):
                    r["peak_rise_bytes"] = _memory(wid, s, dname, timeout=max(120, 6 * r["median_s"] + 60))
                print(f"  {s}: {_fmt_t(r['median_s'])} x{r['repeats']}  mem {_fmt_mem(r.get('peak_rise_bytes'))}", flush=True)
            report["workloads"][wid][dname] = res
    c64 = {}
    for wid, per in report["workloads"].items():
        if "complex128" in per and "complex64" in per and "qhybrid" in per["complex64"]:
            c64[wid] = per["complex128"]["qhybrid"]["median_s"] / per["complex64"]["qhybrid"]["median_s"]
    report["complex64_speedup"] = c64
    report["cache"] = cache_hit_rate()
    report["bwd_fwd"] = backward_forward_ratio()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One and two intra-op threads, alternating in one process: the plain qnode and torch default.qubit on W1, W5.

    python -m benchmarks.threads [--workloads W1,W5] [--repeats 15] [--slow-repeats 3] [--no-peer]

Each system's step (``benchmarks.workloads.make(wl, system)``: a plain ``qhybrid.qnode``, adjoint, no static
trace; default.qubit torch backprop) is timed at one thread and at two, switching ``torch.set_num_threads``
between steps and rotating the order every round, so a busy patch of the machine hits every column. Also
times the plain qnode at two threads with the small-work scope off (``qhybrid.devices._threads``: what two
threads cost before it). Prints medians, the two-thread / one-thread ratios, default.qubit / qhybrid at each
thread count, per-step aten op calls, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from qhybrid.devices import _threads

from .workloads import make

SLOW_STEP_S = 2.0
"""A system whose warm-up step takes longer than this gets ``--slow-repeats`` timed steps."""


def _configs(peer: bool) -> list[tuple[str, str, int, bool]]:
    """(label, system, threads, small-work scope on)."""
    out = [
        ("qhybrid 1t", "qhybrid", 1, True),
        ("qhybrid 2t", "qhybrid", 2, True),
        ("qhybrid 2t, scope off", "qhybrid", 2, False),
    ]
    if peer:
        out += [("default.qubit 1t", "default.qubit backprop", 1, True), ("default.qubit 2t", "default.qubit backprop", 2, True)]
    return out


def _timed(step, threads: int, scope: bool, limit: int) -> float:
    torch.set_num_threads(threads)
    _threads.SMALL_WORK_AMPLITUDES = limit if scope else -1
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def _op_calls(step, threads: int) -> int:
    """aten op calls of one step (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(threads)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))


def run(workload: str, repeats: int, slow_repeats: int, peer: bool) -> dict[str, float]:
    limit = _threads.SMALL_WORK_AMPLITUDES
    configs = _configs(peer)
    steps = {system: make(workload, system) for _, system, _, _ in configs}
    warm = {}
    for label, system, threads, scope in configs:
        _timed(steps[system], threads, scope, limit)
        warm[label] = _timed(steps[system], threads, scope, limit)
    want = {label: slow_repeats if warm[label] > SLOW_STEP_S else repeats for label in warm}
    times: dict[str, list[float]] = {label: [] for label in warm}
    for r in range(max(want.values())):
        k = r % len(configs)
        for label, system, threads, scope in configs[k:] + configs[:k]:
            if len(times[label]) < want[label]:
                times[label].append(_timed(steps[system], threads, scope, limit))
    _threads.SMALL_WORK_AMPLITUDES = limit
    medians = {label: statistics.median(ts) for label, ts in times.items()}
    for label, ts in times.items():
        print(f"{workload:4s} {label:24s} median {medians[label] * 1e3:9.2f} ms  min {min(ts) * 1e3:9.2f} ms  ({len(ts)} steps)")
    q1, q2, q2off = medians["qhybrid 1t"], medians["qhybrid 2t"], medians["qhybrid 2t, scope off"]
    print(f"{workload:4s} qhybrid 2t / 1t: {q2 / q1:.2f} (scope off: {q2off / q1:.2f})")
    if peer:
        d1, d2 = medians["default.qubit 1t"], medians["default.qubit 2t"]
        print(f"{workload:4s} default.qubit 2t / 1t: {d2 / d1:.2f}")
        print(f"{workload:4s} default.qubit / qhybrid: 1t {d1 / q1:.1f}x, 2t {d2 / q2:.1f}x (scope off {d2 / q2off:.1f}x)")
    print(f"{workload:4s} qhybrid aten op calls a step: 1t {_op_calls(steps['qhybrid'], 1)}, 2t {_op_calls(steps['qhybrid'], 2)}")
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="W1,W5")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--slow-repeats", type=int, default=3)
    ap.add_argument("--no-peer", action="store_true", help="skip default.qubit (W5 takes it ~10 s and 6 GB a step)")
    args = ap.parse_args()
    threads = torch.get_num_threads()
    print(f"load average {os.getloadavg()}, cores {os.cpu_count()}, torch {torch.__version__}")
    try:
        for wl in args.workloads.split(","):
            run(wl, args.repeats, args.slow_repeats, not args.no_peer)
    finally:
        torch.set_num_threads(threads)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()

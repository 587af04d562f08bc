"""HEA24x8 and SEL24x4 (WORKLOADS.md) on qhybrid beside lightning.qubit's adjoint, alternating in one process.

Each row: value + gradient of (a) every ``<Z_i>`` (loss: their sum), (b) a ZZ-chain Hamiltonian, (c) one
global ``<Z...Z>``; the first call (planning included) apart, then the median of ``--repeats`` alternating
steps, the ratio lightning / qhybrid, and the largest difference of the results (values and gradients).
qhybrid's engine choice is printed from ``dev.plan_cache_info().engines``.

    OMP_NUM_THREADS=1 python -m benchmarks.wide_state --repeats 3 --out benchmarks/results/wide_state.md

``--state``: instead, ``qml.state()`` of HEA24x8 (no gradient) on qhybrid beside default.qubit, alternating, with
each one's peak anonymous resident memory above its start in states (sampled every 0.5 ms, as
``tests/devices/tensornet/test_memory_guard.py`` does).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time

import pennylane as qml

import torch

import qhybrid

from .workloads import WIDE_STATE_OUTPUTS, hea_function, make_wide_state

PEER = "lightning.qubit adjoint"


def _timed(step):
    t = time.perf_counter()
    out = step()
    return time.perf_counter() - t, out


def _difference(a, b) -> float:
    (va, ga), (vb, gb) = a, b
    return max([float((va - vb).abs())] + [float((x - y).abs().max()) for x, y in zip(ga, gb)])


def run(kinds, outputs, repeats: int, n: int) -> list[dict]:
    rows = []
    for kind in kinds:
        for out in outputs:
            ours, peer = make_wide_state(kind, out, "qhybrid", n=n), make_wide_state(kind, out, PEER, n=n)
            first_ours, a = _timed(ours)
            first_peer, b = _timed(peer)
            times = {"qhybrid": [], PEER: []}
            for _ in range(repeats):
                for name, step in (("qhybrid", ours), (PEER, peer)):
                    dt, _ = _timed(step)
                    times[name].append(dt)
            ours_s, peer_s = statistics.median(times["qhybrid"]), statistics.median(times[PEER])
            engine = ours.device.plan_cache_info().engines[0]
            row = dict(workload=f"{'HEA' if kind == 'hea' else 'SEL'}{n}x{8 if kind == 'hea' else 4}", outputs=out,
                       qhybrid_s=ours_s, peer_s=peer_s, ratio=peer_s / ours_s, first_qhybrid_s=first_ours,
                       first_peer_s=first_peer, diff=_difference(a, b), engine=str(engine),
                       load=os.getloadavg()[0])
            print(row, flush=True)
            rows.append(row)
    return rows


def _anonymous_resident() -> int:
    """Anonymous resident bytes of this process (library pages faulted back in do not count)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_states(call, state_bytes: int) -> tuple[float, float, object]:
    """(seconds, peak anonymous memory above the start in states of ``state_bytes``, result) of ``call()``."""
    before = _anonymous_resident()
    peak, done = [before], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _anonymous_resident())
            time.sleep(0.0005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    t = time.perf_counter()
    try:
        out = call()
    finally:
        dt = time.perf_counter() - t
        done.set()
        sampler.join()
    return dt, (max(peak[0], _anonymous_resident()) - before) / state_bytes, out


def state_rows(repeats: int, n: int) -> list[dict]:
    """``qml.state()`` of HEA{n}x8 on qhybrid and default.qubit, alternating: seconds and peak memory in states."""
    theta = torch.rand(8, n, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3

    circuit = hea_function(n, 8, ring=True, outputs=qml.state)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    peer = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")
    state_bytes = (1 << n) * 16
    times: dict = {"qhybrid": [], "default.qubit": []}
    peaks: dict = {"qhybrid": [], "default.qubit": []}
    results = {}
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first call of each (planning included) is reported apart
            for name, qn in (("qhybrid", ours), ("default.qubit", peer)):
                results[name] = None  # the previous state is freed before the next call's peak is sampled
                dt, states, results[name] = _peak_states(lambda: qn(theta), state_bytes)
                times[name].append(dt)
                peaks[name].append(states)
    diff = float((results["qhybrid"].reshape(-1) - results["default.qubit"].reshape(-1)).abs().max())
    row = dict(workload=f"HEA{n}x8 qml.state()", qhybrid_s=statistics.median(times["qhybrid"][1:]),
               peer_s=statistics.median(times["default.qubit"][1:]), first_qhybrid_s=times["qhybrid"][0],
               first_peer_s=times["default.qubit"][0], qhybrid_states=max(peaks["qhybrid"]),
               peer_states=max(peaks["default.qubit"]), diff=diff, load=os.getloadavg()[0])
    row["ratio"] = row["peer_s"] / row["qhybrid_s"]
    print(row, flush=True)
    return [row]


def state_report(rows: list[dict]) -> str:
    lines = [
        f"## qml.state() beside default.qubit ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"torch threads {torch.get_num_threads()}; median of alternating calls after the first; peak = anonymous "
        "resident memory above the start, in states; ratio = default.qubit / qhybrid.",
        "",
        "| workload | qhybrid s | default.qubit s | ratio | first call qhybrid / default.qubit s | peak states qhybrid / default.qubit | max diff | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['qhybrid_s']:.2f} | {r['peer_s']:.2f} | {r['ratio']:.2f} | "
            f"{r['first_qhybrid_s']:.1f} / {r['first_peer_s']:.1f} | {r['qhybrid_states']:.2f} / {r['peer_states']:.2f} | "
            f"{r['diff']:.1e} | {r['load']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def report(rows: list[dict]) -> str:
    lines = [
        f"## 24-wire hardware-efficient circuits beside {PEER} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, torch threads "
        f"{torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; value + gradient "
        "of the outputs' sum, median of alternating steps; ratio = lightning / qhybrid (above 1: qhybrid faster).",
        "",
        "| workload | outputs | qhybrid s | lightning s | ratio | first step qhybrid / lightning s | max diff | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['outputs']} | {r['qhybrid_s']:.2f} | {r['peer_s']:.2f} | {r['ratio']:.2f} | "
            f"{r['first_qhybrid_s']:.1f} / {r['first_peer_s']:.1f} | {r['diff']:.1e} | {r['load']:.1f} |"
        )
    lines += ["", "qhybrid's engine choice per row:", ""]
    lines += [f"- {r['workload']} {r['outputs']}: {r['engine']}" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["hea", "sel"], choices=["hea", "sel"])
    parser.add_argument("--outputs", nargs="+", default=list(WIDE_STATE_OUTPUTS), choices=WIDE_STATE_OUTPUTS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wires", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="a markdown file to append the table to")
    parser.add_argument("--state", action="store_true", help="qml.state() beside default.qubit instead")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.state:
        text = state_report(state_rows(args.repeats, args.wires))
    else:
        text = report(run(args.kinds, args.outputs, args.repeats, args.wires))
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

"""HEA24x8 and SEL24x4 (WORKLOADS.md) on qhybrid beside lightning.qubit's adjoint, alternating in one process.

Each row: value + gradient of (a) every ``<Z_i>`` (loss: their sum), (b) a ZZ-chain Hamiltonian, (c) one
global ``<Z...Z>``; the first call (planning included) apart, then the median of ``--repeats`` alternating
steps, the ratio lightning / qhybrid, and the largest difference of the results (values and gradients).
qhybrid's engine choice is printed from ``dev.plan_cache_info().engines``.

    OMP_NUM_THREADS=1 python -m benchmarks.wide_state --repeats 3 --out benchmarks/results/engine.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from .workloads import WIDE_STATE_OUTPUTS, make_wide_state

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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    text = report(run(args.kinds, args.outputs, args.repeats, args.wires))
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

"""Deep QAOA at the contraction limit (issue 26): qhybrid beside quimb, value + gradient, alternating.

    python -m benchmarks.deep [Q100p3 Q100p4 Q200p3 L8p3 L8p4] [--steps N] [--threads T] [--out FILE]

qhybrid: a plain ``qhybrid.qnode`` with one ``qml.expval`` of the cost Hamiltonian (sum of Z_u Z_v over the
edges). quimb: ``Circuit.local_expectation`` per edge, ``simplify_sequence="ADCR"``, one cotengra
``ReusableHyperOptimizer`` across terms and steps, torch gradients (benchmarks/peers/quimb_peer.py's way).
Per workload: first step (planning included) and the median steady step of each, the ratio, the values'
difference, and the distance to the limit: the chosen contraction trees' total forward flops per step
(every closed plan the device holds) over the qhybrid step time (achieved GFLOP/s; cone classes run as
state vectors are not counted, so the figure is a lower bound there).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

import cotengra as ctg
import numpy as np
import pennylane as qml
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan

from .workloads import deep_qaoa, qaoa_function

QUIMB_REPEATS = 32
"""cotengra trials per distinct simplified quimb network (its reusable optimiser keeps them)."""


def _angles(p):
    return torch.linspace(0.15, 0.5, p, dtype=torch.float64), torch.linspace(-0.4, -0.1, p, dtype=torch.float64)


def qhybrid_step(n, edges, p, max_memory=None):
    dev = qhybrid.device("tensornet", wires=n, max_memory=max_memory)
    node = qhybrid.qnode(dev)(qaoa_function(edges, n))
    gamma, beta = _angles(p)

    def step():
        g, b = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
        value = node(g, b)
        value.backward()
        return float(value.detach()), (g.grad.numpy(), b.grad.numpy())

    step.device = dev
    return step


def quimb_step(n, edges, p):
    import quimb.tensor as qtn

    from .peers.quimb_peer import SIMPLIFY, _qaoa, _ZZ

    # QHYBRID_QUIMB_PATHS: a directory keeping quimb's trees across runs (its first step then reads them)
    opt = ctg.ReusableHyperOptimizer(
        methods=["greedy"], max_repeats=QUIMB_REPEATS, parallel=False, progbar=False,
        directory=os.environ.get("QHYBRID_QUIMB_PATHS") or None,
    )
    gamma, beta = _angles(p)
    assert qtn is not None

    def step():
        g, b = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
        circ = _qaoa(n, edges, g, b)
        value = sum(circ.local_expectation(_ZZ, e, optimize=opt, simplify_sequence=SIMPLIFY).real for e in edges)
        value.backward()
        return float(value.detach()), (g.grad.numpy(), b.grad.numpy())

    return step


def tree_flops(dev) -> float:
    """Forward flops of every contraction plan the device's programs hold (one step runs each once)."""
    seen, total = set(), 0.0

    def walk(obj, depth=0):
        nonlocal total
        if depth > 6 or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, ContractionPlan):
            total += obj.flops
            return
        if getattr(obj, "kept_flops", None) is not None:  # a schedule loaded from disk: its plans' flops
            total += obj.kept_flops
            return
        if isinstance(obj, dict):
            for v in obj.values():
                walk(v, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, depth + 1)
        elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("qhybrid"):
            for v in vars(obj).values():
                walk(v, depth + 1)

    walk(dev._cache._programs)
    return total


def gemm_peak(n: int = 384, repeats: int = 5) -> float:
    """This core's complex128 matrix-product rate in GFLOP/s, counted as the trees are (2 n^3 per n x n
    product): the roof the achieved figure is read against."""
    a = torch.randn(n, n, dtype=torch.complex128)
    torch.matmul(a, a)
    best = min(_timed(lambda: torch.matmul(a, a))[0] for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(step):
    t = time.perf_counter()
    out = step()
    return time.perf_counter() - t, out


def run(workload: str, steps: int, peers: bool = True) -> dict:
    n, edges, p = deep_qaoa(workload)
    row = {"workload": workload}
    systems = {"qhybrid": qhybrid_step(n, edges, p)}
    if peers:
        systems["quimb"] = quimb_step(n, edges, p)
    times = {k: [] for k in systems}
    values = {}
    for name, step in systems.items():  # first steps (planning included), one after the other
        try:
            row[f"{name}_first"], values[name] = _timed(step)
        except Exception as exc:  # noqa: BLE001 - a failing system is a result
            row[f"{name}_error"] = _failure(exc)
    live = {k: s for k, s in systems.items() if f"{k}_error" not in row}
    for _ in range(steps):  # steady steps, alternating
        for name, step in live.items():
            times[name].append(_timed(step)[0])
    for name in live:
        row[name] = statistics.median(times[name]) if times[name] else float("nan")
    if "qhybrid" in live:
        flops = tree_flops(systems["qhybrid"].device)
        row["flops"] = flops
        row["gflops"] = flops / row["qhybrid"] / 1e9
    if len(live) == 2:
        row["ratio"] = row["quimb"] / row["qhybrid"]
        row["diff"] = abs(values["qhybrid"][0] - values["quimb"][0])
        row["grad_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(values["qhybrid"][1], values["quimb"][1]))
    return row


def _failure(exc: Exception) -> str:
    """A failing system's error, an allocation refusal as the size asked for."""
    found = re.search(r"tried to allocate (\d+) bytes", str(exc))
    if found:
        return f"out of memory: asked for {int(found.group(1)) / 2**30:.1f} GiB in one tensor"
    return f"{type(exc).__name__}: {str(exc)[:120]}"


def _fmt(row) -> str:
    def f(key, spec="{:.3f}"):
        return spec.format(row[key]) if key in row else row.get(key.replace("_first", "") + "_error", "-")

    return (
        f"| {row['workload']} | {f('qhybrid')} | {f('qhybrid_first', '{:.1f}')} | {f('quimb')} | "
        f"{f('quimb_first', '{:.1f}')} | {f('ratio', '{:.2f}')} | {f('diff', '{:.1e}')} / {f('grad_diff', '{:.1e}')} | "
        f"2^{np.log2(max(row.get('flops', 1), 1)):.1f} | {f('gflops', '{:.4f}')} |"
    )


HEADER = (
    "| workload | qhybrid step (s) | qhybrid first (s) | quimb step (s) | quimb first (s) | quimb / qhybrid | "
    "value / grad diff | forward tree flops | achieved GFLOP/s |\n|---|---|---|---|---|---|---|---|---|"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=["Q100p3", "Q200p3", "L8p3", "Q100p4", "L8p4"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"threads {torch.get_num_threads()}, load {os.getloadavg()}, torch {torch.__version__}, "
          f"pennylane {qml.__version__}, cotengra {ctg.__version__}, complex GEMM peak {gemm_peak():.2f} GFLOP/s")  # fmt: skip
    print(HEADER)
    for w in a.workloads:
        print(_fmt(run(w, a.steps, not a.no_peers)), f"(load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()

"""Closed-network planning (issue 19 item 3): first step, steady step and a second process's first result.

    python -m benchmarks.closed_plans WORKLOAD [--steps N] [--plan-time S]

WORKLOAD: ``q100sep`` (Q100 p=1, 150 separate ``expval(Z_u Z_v)``), ``q100h`` (one expval of the 150-term
Hamiltonian), ``w3``, ``w3b``, ``hea50``. All through a plain ``qhybrid.qnode`` on ``tensornet`` (the
closed light-cone networks of wide circuits). Prints the first step (planning included) and the median
of the steady steps; run twice with the same ``QHYBRID_CACHE_DIR`` to see a second process.
"""
import argparse
import statistics
import time

import torch

import qhybrid

from .workloads import hea_function, ladder_function, qaoa_function, qaoa_graph

Q100_SEED = 1
"""WORKLOADS.md's Q100 graph: ``random_regular_graph(3, 100, seed=1)``."""


def q100(separate: bool, p: int = 1):
    edges = [(int(u), int(v)) for u, v in qaoa_graph(100, seed=Q100_SEED).edges()]
    args = (torch.tensor([0.3] * p, dtype=torch.float64), torch.tensor([0.7] * p, dtype=torch.float64))
    return 100, qaoa_function(edges, 100, separate=separate), args


def _theta(layers: int, n: int):
    return (torch.rand(layers, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),)


WORKLOADS = {
    "q100sep": lambda: q100(True),
    "q100h": lambda: q100(False),
    "q100h2": lambda: q100(False, 2),
    "q100h3": lambda: q100(False, 3),
    "q100sep2": lambda: q100(True, 2),
    "q100sep3": lambda: q100(True, 3),
    "w3": lambda: (64, ladder_function(64, False), _theta(2, 64)),
    "w3b": lambda: (64, ladder_function(64, True), _theta(2, 64)),
    "hea50": lambda: (50, hea_function(50, 3), _theta(3, 50)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--plan-time", type=float, default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    n, circuit, args = WORKLOADS[a.workload]()
    kw = {} if a.plan_time is None else {"plan_time": a.plan_time}
    dev = qhybrid.device("tensornet", wires=n, **kw)
    node = qhybrid.qnode(dev)(circuit)

    def step():
        ps = [x.clone().requires_grad_() for x in args]
        out = node(*ps)
        out = torch.stack(list(out)) if isinstance(out, (list, tuple)) else out
        out.sum().backward()
        return out.detach(), [p.grad for p in ps]

    t = time.perf_counter()
    value, grads = step()
    first = time.perf_counter() - t
    times = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    print(f"{a.workload}: value sum {float(value.sum()):.12f} grad[0] {grads[0].flatten()[:2].tolist()}")
    print(f"{a.workload}: first step {first:.3f} s, steady median {1e3 * statistics.median(times):.1f} ms "
          f"({', '.join(f'{1e3 * x:.0f}' for x in times)}) threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()

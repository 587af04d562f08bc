"""Closed-network planning (issue 19 item 3): first step, steady step and a second process's first result.

    python -m benchmarks.closed_plans WORKLOAD [--steps N] [--plan-time S]

WORKLOAD: ``q100sep`` (Q100 p=1, 150 separate ``expval(Z_u Z_v)``), ``q100h`` (one expval of the 150-term
Hamiltonian), ``w3``, ``w3b``, ``hea50``. All through a plain ``qhybrid.qnode`` on ``tensornet`` (the
closed light-cone networks of wide circuits). Prints the first step (planning included) and the median
of the steady steps; run twice with the same ``QHYBRID_CACHE_DIR`` to see a second process.
"""
import argparse, statistics, time

import networkx as nx
import pennylane as qml
import torch

import qhybrid


def q100(sep: bool, p: int = 1):
    g = nx.random_regular_graph(3, 100, seed=1)
    edges = list(g.edges())
    n = 100

    def circuit(gamma, beta):
        for w in range(n):
            qml.Hadamard(w)
        for k in range(p):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[k], wires=[u, v])
            for w in range(n):
                qml.RX(2 * beta[k], wires=w)
        if sep:
            return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges]
        H = qml.Hamiltonian([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])
        return qml.expval(H)

    args = (torch.tensor([0.3] * p, dtype=torch.float64), torch.tensor([0.7] * p, dtype=torch.float64))
    return n, circuit, args


def ladder(n: int, ham: bool, layers: int = 2, brick: bool = False):
    def circuit(theta):
        for l in range(layers):
            for i in range(n):
                qml.RY(theta[l, i], wires=i)
            if brick:
                for s in (0, 1):
                    for i in range(s, n - 1, 2):
                        qml.CNOT([i, i + 1])
            else:
                for i in range(n - 1):
                    qml.CNOT([i, i + 1])
        if ham:
            return qml.expval(qml.Hamiltonian([1.0] * n, [qml.Z(i) for i in range(n)]))
        if brick:
            return [qml.expval(qml.Z(i)) for i in range(n)]
        return qml.expval(qml.Z(n // 2))

    theta = torch.rand(layers, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return n, circuit, (theta,)


WORKLOADS = {
    "q100sep": lambda: q100(True),
    "q100h": lambda: q100(False),
    "q100h2": lambda: q100(False, 2),
    "q100h3": lambda: q100(False, 3),
    "q100sep2": lambda: q100(True, 2),
    "q100sep3": lambda: q100(True, 3),
    "w3": lambda: ladder(64, False),
    "w3b": lambda: ladder(64, True),
    "hea50": lambda: ladder(50, False, 3, brick=True),
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

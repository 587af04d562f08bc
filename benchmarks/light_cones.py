"""Wide circuits through a plain QNode, measured on light cones by the device (issue 19, item 2).

Q100 p=1..3: QAOA MaxCut on ``networkx.random_regular_graph(3, 100, seed=1)`` written as a user would
(``qhybrid.qnode`` on ``qhybrid.device("tensornet", wires=100)``, ``IsingZZ`` per edge, ``RX`` per node, ONE
``qml.expval`` of the 150-term cost Hamiltonian), value + gradient per step, against ``GraphQLayer`` on
the same graph (values and gradients compared), and HEA50: 50 qubits, 3 layers of [RY every qubit,
CNOT(i, i+1) even i, then odd i], 50 local expvals. One thread.

    python -m benchmarks.light_cones [--depths 1,2,3] [--repeats 7] [--reference-terms 4]

``--reference-terms k`` also checks k Hamiltonian terms against the independent light-cone reference
(tests/_lightcone_reference.py, default.qubit; slow at p=3).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import networkx as nx
import pennylane as qml
import torch

import qhybrid


def q100(p: int, n: int = 100):
    edges = list(nx.random_regular_graph(3, n, seed=1).edges())
    H = qml.Hamiltonian([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    @qhybrid.qnode(qhybrid.device("tensornet", wires=n))
    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for l in range(p):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[l], wires=[u, v])
            for i in range(n):
                qml.RX(2 * beta[l], wires=i)
        return qml.expval(H)

    return circuit, edges, H


def hea50(n: int = 50):
    @qhybrid.qnode(qhybrid.device("tensornet", wires=n))
    def circuit(theta):
        for layer in range(3):
            for i in range(n):
                qml.RY(theta[layer, i], wires=i)
            for i in range(0, n - 1, 2):
                qml.CNOT(wires=[i, i + 1])
            for i in range(1, n - 1, 2):
                qml.CNOT(wires=[i, i + 1])
        return [qml.expval(qml.Z(i)) for i in range(n)]

    return circuit


def _timed(step, repeats: int):
    t0 = time.perf_counter()
    first = step()
    first_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return first, first_s, statistics.median(times)


def run_q100(p: int, repeats: int, reference_terms: int) -> None:
    circuit, edges, H = q100(p)
    gamma = torch.linspace(0.1, 0.4, p, dtype=torch.float64).requires_grad_()
    beta = torch.linspace(-0.3, -0.1, p, dtype=torch.float64).requires_grad_()

    def step():
        v = circuit(gamma, beta)
        return v.detach(), torch.autograd.grad(v, [gamma, beta])

    (v, g), first, med = _timed(step, repeats)
    layer = qhybrid.GraphQLayer(edges, n_layers=p, output="cost").double()
    with torch.no_grad():
        layer.gamma.copy_(gamma)
        layer.beta.copy_(beta)

    def layer_step():
        r = layer()
        return r.detach(), torch.autograd.grad(r, [layer.gamma, layer.beta])

    (rv, rg), lfirst, lmed = _timed(layer_step, repeats)
    diff = max(float((v - rv).abs()), *(float((a - b).abs().max()) for a, b in zip(g, rg)))
    print(
        f"Q100 p={p}: qnode first step {first:.2f} s, then {med * 1e3:.1f} ms a step | GraphQLayer first "
        f"{lfirst:.2f} s, then {lmed * 1e3:.1f} ms | max |value, grad difference| {diff:.1e}"
    )
    if reference_terms:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from _lightcone_reference import qaoa_blocks, word_expval

        @qhybrid.qnode(qhybrid.device("tensornet", wires=100))
        def terms(gamma, beta):
            qaoa_blocks(edges, 100, gamma, beta)
            return [qml.expval(qml.Z(u) @ qml.Z(v)) for u, v in edges[:reference_terms]]

        got = torch.stack(list(terms(gamma, beta)))
        gg = torch.autograd.grad(got.sum(), [gamma, beta])
        g2, b2 = gamma.detach().clone().requires_grad_(), beta.detach().clone().requires_grad_()
        blocks = qaoa_blocks(edges, 100, g2, b2)
        want = torch.stack([word_expval(blocks, (qml.Z(u) @ qml.Z(v)).pauli_rep.popitem()[0]) for u, v in edges[:reference_terms]])
        wg = torch.autograd.grad(want.sum(), [g2, b2])
        rdiff = max(float((got - want).abs().max()), *(float((a - b).abs().max()) for a, b in zip(gg, wg)))
        print(f"Q100 p={p}: {reference_terms} terms against the default.qubit light-cone reference: {rdiff:.1e}")


def run_hea50(repeats: int) -> None:
    circuit = hea50()
    theta = torch.rand(3, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()

    def step():
        out = torch.stack(list(circuit(theta))).sum()
        return torch.autograd.grad(out, [theta])

    _, first, med = _timed(step, repeats)
    print(f"HEA50: first step {first:.2f} s, then {med * 1e3:.1f} ms a step")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depths", default="1,2,3")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--reference-terms", type=int, default=0)
    ap.add_argument("--no-hea", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for p in (int(x) for x in args.depths.split(",")):
        run_q100(p, args.repeats if p < 3 else min(args.repeats, 2), args.reference_terms)
    if not args.no_hea:
        run_hea50(args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

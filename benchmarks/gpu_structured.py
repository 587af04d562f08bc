"""GPU benchmark of the structured rows (WORKLOADS.md: G16, Q100p3, L8p3, Q100p4, L8p4): a plain ``qhybrid.qnode``
of the MaxCut QAOA (one expval of the cost Hamiltonian), value + gradient for gamma and beta, on CUDA tensors.

Rows per workload, alternating repeat by repeat in one process:
- ``qhybrid``: uncaptured; its first step (planning included), its median step, the aten ops one steady step
  dispatches (forward + backward) and its host reads;
- ``qhybrid[cuda-graph]``: the same step captured with ``qhybrid.cuda_graph`` and replayed; its capture time and
  its agreement with the uncaptured step;
- G16 only (a 2^16 state fits): PennyLane ``default.qubit`` on torch-CUDA (backprop; started from a CUDA |+...+>
  ``StatePrep``, since 0.45 builds its start state on the CPU) and a hand-written ``jax.jit`` state vector
  (benchmarks/peers/jax_hand.py) on jax's default device.
Times: CUDA events around a step after warm-up (wall clock for jax, which blocks until ready); medians.

    python -m benchmarks.gpu_structured                              # G16 Q100p3 L8p3 Q100p4
    python -m benchmarks.gpu_structured G16 L8p4 --repeats 3 --out $OUT/gpu_structured.json
    python -m benchmarks.gpu_structured L8p4 --backends auto,cutensornet   # cuTensorNet beside torch
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch

import qhybrid
from qhybrid.testing import OpCount, host_touches

from .gpu import NO_GPU_EXIT, _profile, _time, _versions
from .workloads import qaoa_function, qaoa_problem

DEVICE = "cuda"
"""Where the torch rows run (``--device cpu``: a smoke test of this script, wall clock, no capture)."""

def qaoa_angles(p: int, device):
    g = torch.linspace(0.15, 0.5, p, dtype=torch.float64, device=device).requires_grad_()
    b = torch.linspace(-0.4, -0.1, p, dtype=torch.float64, device=device).requires_grad_()
    return g, b


def _torch_step(fn, g, b):
    def step():
        value = fn(g, b).reshape(())
        return (value.detach(), *torch.autograd.grad(value, (g, b)))

    return step


def _qhybrid(n, edges, p, backend="torch"):
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n, backend=backend))(qaoa_function(edges, n))
    return lambda g, b: node(g, b).reshape(1)


def _pennylane(n, edges, p):
    import pennylane as qml

    plus = torch.full((2**n,), 2 ** (-n / 2), dtype=torch.complex128, device=DEVICE)
    cost = qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(gamma, beta):  # WORKLOADS.md's G16, its Hadamards as a StatePrep of |+...+> on the tensors' device
        qml.StatePrep(plus, wires=range(n))
        for layer in range(len(gamma)):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in range(n):
                qml.RX(2 * beta[layer], wires=i)
        return qml.expval(cost)

    return qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")


def _jax(n, edges, p):
    import jax
    import numpy as np

    from .peers.jax_hand import _qaoa_loss

    fn = jax.jit(jax.value_and_grad(_qaoa_loss(n, edges), argnums=(0, 1)))
    g, b = (jax.numpy.asarray(t.detach().cpu().numpy()) for t in qaoa_angles(p, "cpu"))

    def step():
        value, grads = jax.block_until_ready(fn(g, b))
        return tuple(torch.from_numpy(np.asarray(v)).reshape(-1) for v in (value, *grads))

    return step


def ops_and_host_reads(step) -> tuple[int, int]:
    """Aten ops of one steady step, and its host touches (``qhybrid.testing``: what stops capture)."""
    with OpCount() as count:
        step()
    return count.total, len(host_touches(step, warmup=0))


def _builds(name, n, edges, p, args):
    builds = {"qhybrid": lambda: _torch_step(_qhybrid(n, edges, p), *qaoa_angles(p, DEVICE))}
    for backend in args.backends:  # the contraction backends beside torch (uncaptured)
        builds[f"qhybrid[{backend}]"] = lambda b=backend: _torch_step(_qhybrid(n, edges, p, b), *qaoa_angles(p, DEVICE))
    if not args.no_capture and DEVICE != "cpu":

        def captured():
            g, b = qaoa_angles(p, DEVICE)
            t0 = time.perf_counter()
            step = _torch_step(qhybrid.cuda_graph(_qhybrid(n, edges, p), (g, b)), g, b)
            torch.cuda.synchronize()
            step.capture_s = time.perf_counter() - t0
            return step

        builds["qhybrid[cuda-graph]"] = captured
    if n <= 20 and not args.no_peers:
        builds[f"pennylane[default.qubit,torch-{DEVICE}]"] = lambda: _torch_step(_pennylane(n, edges, p), *qaoa_angles(p, DEVICE))
        builds["jax[jit]"] = lambda: _jax(n, edges, p)
    return builds


def run(name: str, args) -> dict:
    n, edges, p = qaoa_problem(name)
    record = {"workload": name, "wires": n, "edges": len(edges), "p": p, "systems": {}}
    steps, outs = {}, {}
    for system, build in _builds(name, n, edges, p, args).items():
        entry = record["systems"][system] = {}
        print(f"[gpu structured] {name} {system}", file=sys.stderr, flush=True)
        try:
            if DEVICE != "cpu":
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            step = build()
            first, out = _time(torch, step)
            entry["first_step_s"] = time.perf_counter() - t0
            if hasattr(step, "capture_s"):
                entry["capture_s"] = step.capture_s
            for _ in range(args.warmup):
                _time(torch, step)
            if system == "qhybrid":
                entry["ops_per_step"], entry["host_reads_per_step"] = ops_and_host_reads(step)
                if args.profile and DEVICE != "cpu":
                    entry["profile"] = _profile(torch, step, top=15)
            if DEVICE != "cpu":
                entry["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
            steps[system], outs[system], entry["times_s"] = step, out, []
        except Exception as exc:  # noqa: BLE001 - one failing system must not end the run
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=8)
    for _ in range(args.repeats):
        for system, step in steps.items():
            record["systems"][system]["times_s"].append(_time(torch, step)[0])
    ref = outs.get("qhybrid")
    for system, entry in record["systems"].items():
        if entry.get("times_s"):
            entry["median_s"] = statistics.median(entry["times_s"])
        if ref is not None and system in outs and system != "qhybrid":
            entry["max_abs_diff_vs_qhybrid"] = max(
                float((a.detach().cpu().reshape(-1) - b.detach().cpu().reshape(-1)).abs().max()) for a, b in zip(outs[system], ref)
            )
    base = record["systems"].get("qhybrid[cuda-graph]", {}).get("median_s")
    for system, entry in record["systems"].items():
        if base and entry.get("median_s") and system != "qhybrid[cuda-graph]":
            entry["captured_qhybrid_speedup"] = entry["median_s"] / base
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=["G16", "Q100p3", "L8p3", "Q100p4"])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-capture", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--backends", type=lambda s: [b for b in s.split(",") if b], default=[],
                    help="also these contraction backends, uncaptured (e.g. auto,cutensornet)")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu runs a smoke test of this script")
    ap.add_argument("--profile", action="store_true", help="also one uncaptured qhybrid step's kernels (torch.profiler)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_structured.json"))
    args = ap.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    if DEVICE != "cpu" and not torch.cuda.is_available():
        print("benchmarks.gpu_structured: no CUDA GPU is visible to torch; nothing was measured.", file=sys.stderr)
        return NO_GPU_EXIT
    env = _versions(torch) if DEVICE != "cpu" else {"device_name": "cpu (smoke test)"}
    report = {"environment": env, "protocol": vars(args), "workloads": []}
    for name in args.workloads:
        report["workloads"].append(run(name, args))
        if DEVICE != "cpu":
            torch.cuda.empty_cache()
        with open(args.out, "w") as f:  # written after each workload: a run cut short keeps what it measured
            json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

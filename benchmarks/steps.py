"""The fixed cost of a steady step (issue 39): aten ops, host reads, page faults and time, plain qnode against
``static_structure=True``, with torch default.qubit beside where it fits in memory (16 wires or fewer) and the
cost of recording the user's function with PennyLane alone (the plain qnode's floor).

One step is a value and every gradient (forward + backward) of the workload's circuit through ``qhybrid.qnode``
(adjoint, complex128). The systems alternate step by step in one process after three warm-up steps each, so the
machine's drift hits them alike; the table gives medians and ratios to default.qubit. Ops and host reads are
``gpu_structured.ops_and_host_reads``'s (``qhybrid.testing``), page faults ``getrusage``'s over the timed steps.

    python -m benchmarks.steps                                  # W1 G16 Q100p2 Q100p3 L8p3 Q1000p2, one thread
    python -m benchmarks.steps --workloads W1,G16 --repeats 25 --threads 2
    python -m benchmarks.steps --workloads W3,W3b              # the 64-wire CNOT ladder (no default.qubit)

A run replaces the rows of the workloads it measured in ``results/steps.json`` and keeps the others; ``measured``
says when each row was measured.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

import pennylane as qml
import torch

import qhybrid

from .gpu_structured import ops_and_host_reads, qaoa_angles
from .workloads import WORKLOADS, ladder_function, qaoa_function, qaoa_problem, sel_function

RESULTS = Path(__file__).parent / "results" / "steps.json"
DEFAULT = ("W1", "G16", "Q100p2", "Q100p3", "L8p3", "Q1000p2")
SYSTEMS = ("qhybrid", "qhybrid static", "default.qubit", "pennylane recording")
"""``pennylane recording``: the user's function run under PennyLane's queue and made into a tape, nothing executed:
what any plain qnode (PennyLane's or qhybrid's) pays each call before it runs, the floor of the plain column."""
DQ_MAX_WIRES = 16


def _node(system: str, circuit, n: int):
    if system == "pennylane recording":
        return lambda *args: qml.tape.make_qscript(circuit)(*args)
    if system == "default.qubit":
        return qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    dev = qhybrid.device("tensornet", wires=n)
    return qhybrid.qnode(dev, diff_method="adjoint", static_structure=system == "qhybrid static")(circuit)


def make(system: str, name: str):
    """(step, wires): W1 (8 wires, 4 SEL layers, batch 128) or a QAOA workload (``qaoa_problem``)."""
    if name == "W1":
        n = 8
        node = _node(system, sel_function(n), n)
        gen = torch.Generator().manual_seed(3)
        x = torch.rand(128, n, generator=gen, dtype=torch.float64, requires_grad=True)
        w = torch.rand(4, n, 3, generator=gen, dtype=torch.float64, requires_grad=True)
        if system == "pennylane recording":
            return (lambda: node(x, w)), n
        return (lambda: torch.stack(list(node(x, w))).sum().backward()), n
    if name in ("W3", "W3b"):  # 64 wires: the CNOT ladder, one Z word or the sum of every wire's Z
        n = WORKLOADS[name].n_qubits
        node = _node(system, ladder_function(n, WORKLOADS[name].hamiltonian), n)
        theta = torch.rand(2, n, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 3
        if system == "pennylane recording":
            return (lambda: node(theta.clone().requires_grad_())), n
        return (lambda: node(theta.clone().requires_grad_()).backward()), n
    n, edges, p = qaoa_problem(name)
    node = _node(system, qaoa_function(edges, n), n)
    g0, b0 = (t.detach() for t in qaoa_angles(p, "cpu"))
    if system == "pennylane recording":
        return (lambda: node(g0.clone().requires_grad_(), b0.clone().requires_grad_())), n
    return (lambda: node(g0.clone().requires_grad_(), b0.clone().requires_grad_()).backward()), n


def measure(name: str, repeats: int) -> dict:
    steps = {}
    for system in SYSTEMS:
        step, n = make(system, name)
        if system != "default.qubit" or n <= DQ_MAX_WIRES:
            steps[system] = step
    row: dict = {}
    for system, step in steps.items():
        for _ in range(3):
            step()
        row[system] = {}
        if system != "default.qubit":
            row[system]["ops"], row[system]["host_reads"] = ops_and_host_reads(step)
    times: dict = {s: [] for s in steps}
    faults: dict = {s: 0 for s in steps}
    for _ in range(repeats):
        for system, step in steps.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            step()
            times[system].append(time.perf_counter() - t0)
            faults[system] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    for system in steps:
        row[system].update(median_s=statistics.median(times[system]), min_s=min(times[system]),
                           page_faults=faults[system] / repeats)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(DEFAULT))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = {"threads": args.threads, "repeats": args.repeats, "torch": torch.__version__, "rows": {}}
    if RESULTS.exists():  # rows of workloads not run this time are kept (each row says when it was measured)
        kept = json.loads(RESULTS.read_text())
        out["rows"], out["measured"] = kept.get("rows", {}), kept.get("measured", {})
    print(f"{'workload':9} {'system':19} {'ops':>6} {'host':>5} {'faults':>7} {'median ms':>10} {'vs dq':>7}")
    for name in args.workloads.split(","):
        row = out["rows"][name] = measure(name, args.repeats)
        dq = row.get("default.qubit", {}).get("median_s")
        for system, r in row.items():
            ratio = f"{dq / r['median_s']:.1f}x" if dq and system.startswith("qhybrid") else ""
            print(f"{name:9} {system:19} {r.get('ops', ''):>6} {r.get('host_reads', ''):>5} {r['page_faults']:>7.0f} "
                  f"{1e3 * r['median_s']:>10.1f} {ratio:>7}", flush=True)
        stamp = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": args.threads}
        out.setdefault("measured", {})[name] = stamp
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

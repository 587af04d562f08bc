"""method="mps" beside PennyLane default.tensor (method="mps", values only) and quimb CircuitMPS (torch
arrays, autodiff gradient), alternating repeats on the same random draw (default.tensor in a worker process
of its own, see ``ISOLATED``). Writes benchmarks/results/mps.{json,md}.

    python -m benchmarks.mps                       # every workload, 1 thread
    python -m benchmarks.mps --workloads sel30 --threads 2 --repeats 3

Workloads (docs/MPS.md; the issue's targets):
  check20   20-wire SEL, 2 layers: qhybrid MPS (no cap) against default.qubit, values and gradients
  sel30     30-wire SEL, 3 layers, chi=64: all <Z_i> and <Z...Z> from one execution, value + gradient
  qaoa8x8   8x8 lattice QAOA p=3, chi=64: all 64 <Z_i>, value + gradient
  sel50b16  50-wire SEL, 4 layers, chi=128, batch 16 inputs: all <Z_i>, value + gradient
  brick100  100-wire RY/CNOT brickwork, depth 10, chi=64: all <Z_i>, value + gradient
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pennylane as qml
import torch

import qhybrid

RESULTS = Path(__file__).resolve().parent / "results"


# --- circuits ---------------------------------------------------------------------------------


def sel(n, layers, global_z=True):
    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        out = [qml.expval(qml.PauliZ(i)) for i in range(n)]
        if global_z:
            out.append(qml.expval(qml.prod(*[qml.PauliZ(i) for i in range(n)])))
        return out

    return circuit


def qaoa_grid(side, p):
    import networkx as nx

    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(side, side))
    n = graph.number_of_nodes()

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(p):
            for u, v in graph.edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            for i in range(n):
                qml.RX(2 * beta[layer], wires=i)
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    return circuit, n


def brickwork(n, depth):
    def circuit(theta):
        for d in range(depth):
            for i in range(n):
                qml.RY(theta[d, i], wires=i)
            for i in range(d % 2, n - 1, 2):
                qml.CNOT([i, i + 1])
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    return circuit


def workload(name):
    """(circuit, n, chi, make_args, trainable arg positions)."""
    g = torch.Generator().manual_seed(7)
    rnd = lambda *shape: torch.rand(*shape, generator=g, dtype=torch.float64)
    if name == "check20":
        return sel(20, 2), 20, None, lambda: (rnd(20), rnd(2, 20, 3).requires_grad_(True)), [1]
    if name == "sel30":
        return sel(30, 3), 30, 64, lambda: (rnd(30), rnd(3, 30, 3).requires_grad_(True)), [1]
    if name == "qaoa8x8":
        circuit, n = qaoa_grid(8, 3)
        return circuit, n, 64, lambda: (rnd(3).requires_grad_(True), rnd(3).requires_grad_(True)), [0, 1]
    if name == "sel50b16":
        return sel(50, 4, global_z=False), 50, 128, lambda: (rnd(16, 50), rnd(4, 50, 3).requires_grad_(True)), [1]
    if name == "brick100":
        return brickwork(100, 10), 100, 64, lambda: (rnd(10, 100).requires_grad_(True),), [0]
    raise ValueError(name)


# --- systems ----------------------------------------------------------------------------------


def run_qhybrid(circuit, n, chi, args, trainable):
    dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=chi)
    node = qhybrid.qnode(dev, diff_method="backprop")(circuit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = node(*args)
    values = torch.stack([o.reshape(-1) for o in out]).detach()
    grads = torch.autograd.grad(sum(o.sum() for o in out), [args[i] for i in trainable])
    return values, grads, dev.last_truncation


def run_default_tensor(circuit, n, chi, args, trainable):
    """Values only (default.tensor has no gradient of its own); the issue's measure: per-wire and global
    measurements as the two separate QNodes a user writes (each a full MPS simulation)."""
    dev = qml.device("default.tensor", wires=n, method="mps", max_bond_dim=chi)
    plain = [a.detach().numpy() for a in args]
    tape = qml.workflow.construct_tape(qml.QNode(circuit, dev))(*plain)
    local = [m for m in tape.measurements if len(m.wires) == 1]
    others = [m for m in tape.measurements if len(m.wires) != 1]
    tapes = [qml.tape.QuantumScript(tape.operations, group) for group in (local, others) if group]
    out = []
    for group, res in zip([g for g in (local, others) if g], qml.execute(tapes, dev, diff_method=None)):
        out.extend([res] if len(group) == 1 else res)
    return torch.tensor(np.array([np.asarray(o).reshape(-1) for o in out])), None, None


QUIMB_GATE_OPTS = {"cutoff": 1e-10}
"""Gate options of quimb's CircuitMPS: its default cutoff (with cutoff=0 the zero singular values of padded
bonds make torch's svd_backward raise its complex phase error even on small circuits)."""


def run_quimb(circuit, n, chi, args, trainable, gradient=True):
    """quimb CircuitMPS with torch arrays: gate matrices from PennyLane (torch), local expectations
    through quimb, the gradient by torch autodiff (``gradient=False``: values only, under no_grad)."""
    if gradient is False:
        with torch.no_grad():
            values, _, _ = run_quimb(circuit, n, chi, [a.detach() for a in args], [], gradient=None)
        return values, None, None
    import quimb.tensor as qtn

    tape = qml.workflow.construct_tape(qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch"))(*args)
    tape = qml.transforms.decompose(tape, gate_set={"RX", "RY", "RZ", "Rot", "CNOT", "IsingZZ", "Hadamard"})[0][0]
    if tape.batch_size:
        raise NotImplementedError("quimb's CircuitMPS has no batch axis")
    circ = qtn.CircuitMPS(
        n, max_bond=chi, cutoff=0.0, to_backend=torch.as_tensor, dtype="complex128", gate_opts=dict(QUIMB_GATE_OPTS)
    )
    for op in tape.operations:
        mat = qml.matrix(op)
        mat = mat if isinstance(mat, torch.Tensor) else torch.as_tensor(mat)
        circ.apply_gate_raw(mat.to(torch.complex128), [int(w) for w in op.wires])
    z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
    values = [circ.local_expectation(z, m.wires[0]) for m in tape.measurements if len(m.wires) == 1]
    values = torch.stack([torch.as_tensor(v).real for v in values])
    if gradient is None:
        return values.reshape(-1, 1), None, None
    grads = torch.autograd.grad(values.sum(), [args[i] for i in trainable])
    return values.detach().reshape(-1, 1), grads, None


def run_quimb_values(circuit, n, chi, args, trainable):
    """quimb's values alone: a lower bound on its value + gradient time (its torch gradient fails, see the
    results' notes)."""
    return run_quimb(circuit, n, chi, args, trainable, gradient=False)


SYSTEMS = {
    "qhybrid": run_qhybrid,
    "default.tensor": run_default_tensor,
    "quimb": run_quimb,
    "quimb.values": run_quimb_values,
}


def reference_check():
    circuit, n, _, make, trainable = workload("check20")
    args = make()
    values, grads, _ = run_qhybrid(circuit, n, None, args, trainable)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(*args)
    ref_values = torch.stack([r.reshape(-1) for r in ref])
    ref_grads = torch.autograd.grad(sum(r.sum() for r in ref), [args[i] for i in trainable])
    return {
        "max_value_dev": float((values - ref_values.detach()).abs().max()),
        "max_grad_dev": max(float((a - b).abs().max()) for a, b in zip(grads, ref_grads)),
    }


ISOLATED = {"default.tensor"}
"""Systems run in a worker process of their own: quimb's CircuitMPS with torch arrays fails (numpy calls on
torch tensors inside its splits) in a process where default.tensor, quimb with numpy arrays, ran before it."""


def timed_run(name, system, args, trainable):
    """One run of ``system`` on workload ``name``: (values, truncation, wall s, process CPU s). Module level,
    so that a worker process can run it (it builds the circuit again from the name)."""
    circuit, n, chi, _, _ = workload(name)
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    t0, c0 = time.perf_counter(), time.process_time()
    v, _, trunc = SYSTEMS[system](circuit, n, chi, args, trainable)
    return v, trunc, time.perf_counter() - t0, time.process_time() - c0


def _copies(drawn):
    """Every system gets the same draw (the values are compared), as leaves of its own."""
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in drawn)


def bench(name, systems, repeats):
    import multiprocessing

    _, _, _, make, trainable = workload(name)
    rows = {s: {"times": [], "cpu": []} for s in systems}
    values = {}
    isolated = [s for s in systems if s in ISOLATED]
    worker = multiprocessing.get_context("spawn").Pool(1) if isolated else None
    try:
        for r in range(repeats + 1):  # the first round warms up (plans nothing, but allocates)
            drawn = make()
            for s in systems:
                args = _copies(drawn)
                try:
                    if s in isolated:
                        detached = tuple(a.detach() for a in args)
                        v, trunc, dt, cpu = worker.apply(timed_run, (name, s, detached, trainable))
                    else:
                        v, trunc, dt, cpu = timed_run(name, s, args, trainable)
                except Exception as exc:  # a peer that cannot run a workload is recorded, not raised
                    rows[s]["status"] = f"fails: {type(exc).__name__}: {str(exc)[:160]}"
                    continue
                if r:
                    rows[s].setdefault("load", []).append(round(os.getloadavg()[0], 2))
                    rows[s]["times"].append(dt)
                    rows[s]["cpu"].append(cpu)
                values[s] = v
                if trunc is not None:
                    rows[s]["discarded_weight"] = trunc.discarded_weight
                    rows[s]["fidelity"] = trunc.fidelity
    finally:
        if worker is not None:
            worker.close()
            worker.join()
    for s in systems:
        t, cpu = rows[s].pop("times"), rows[s].pop("cpu")
        if t:
            rows[s]["median_s"] = statistics.median(t)
            rows[s]["median_cpu_s"] = statistics.median(cpu)  # process CPU time: what a shared machine's load hides
            rows[s]["status"] = "ok"
        if s != "qhybrid" and s in values and "qhybrid" in values:
            a, b = values["qhybrid"], values[s]
            k = min(a.shape[0], b.shape[0])
            rows[s]["max_dev_vs_qhybrid"] = float((a[:k].reshape(-1) - b[:k].reshape(-1).to(a.dtype)).abs().max())
    return rows


def markdown(report):
    lines = [
        f"# method=\"mps\" benchmarks ({report['date']})",
        "",
        f"Machine: {report['machine']}; torch threads {report['threads']}; load average before {report['load_before']}"
        f", after {report['load_after']}. Versions: {report['versions']}.",
        "Times: median over repeats after one warm-up, systems alternating on one random draw per round (default.tensor in a worker process of its own). qhybrid and quimb: value +",
        "gradient of every trainable weight; quimb.values and default.tensor: values only (default.tensor has no",
        "gradient of its own; per-wire and global measurements as separate executions, what a PennyLane user runs).",
        "",
        f"Reference check (check20, 20-wire SEL 2 layers, no bond cap, vs default.qubit): values {report['check']['max_value_dev']:.1e},"
        f" gradients {report['check']['max_grad_dev']:.1e}.",
        "",
        "| workload | system | median wall s | median CPU s | load (1 min) | discarded weight | max |value - qhybrid| | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for wl, rows in report["workloads"].items():
        for s, row in rows.items():
            lines.append(
                f"| {wl} | {s} | {row.get('median_s', float('nan')):.2f} | {row.get('median_cpu_s', float('nan')):.2f} | "
                f"{row.get('load', '')} | {row.get('discarded_weight', '')} | "
                f"{row.get('max_dev_vs_qhybrid', '')} | {row.get('status', '')} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="*", default=["sel30", "brick100", "qaoa8x8", "sel50b16"])
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--name", default="mps", help="results file stem: <name>.md, <name>_<threads>t.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "threads": torch.get_num_threads(),
        "load_before": os.getloadavg()[0],
        "versions": {"torch": torch.__version__, "pennylane": qml.__version__, "qhybrid": getattr(qhybrid, "__version__", "?")},
        "check": reference_check(),
        "workloads": {},
    }
    try:
        import quimb

        report["versions"]["quimb"] = quimb.__version__
    except ImportError:
        pass
    for wl in args.workloads:
        systems = [s for s in args.systems if not (wl == "sel50b16" and s.startswith("quimb"))]
        report["workloads"][wl] = bench(wl, systems, args.repeats)
        print(wl, json.dumps(report["workloads"][wl]), flush=True)
        md = _save(report, Path(args.out), args.threads, args.name)  # after each workload: a long run keeps what it measured
    print(md)
    return report, md


def _save(report, out: Path, threads: int, name: str = "mps") -> str:
    report["load_after"] = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}_{threads}t.json").write_text(json.dumps(report, indent=1))
    md = markdown(report)
    (out / f"{name}.md").write_text(md)
    return md


if __name__ == "__main__":
    main()

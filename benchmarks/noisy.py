"""Noisy workloads (WORKLOADS.md NW1, and a noisy StronglyEntanglingLayers) on qhybrid.tensornet's mixed-state
engine against PennyLane default.mixed (torch backprop), alternating in one process at one thread.

A step is one forward + backward (gradients for the weights and the inputs x). default.mixed steps run in a
child process with a wall-clock cap and an address-space cap (``--peer-memory-gb``, 8 GiB: the machine is
shared), so a step that does not finish is reported as "did not finish in X s" and one that runs out of memory
as "failed under a X GiB cap" instead of stalling the run (or the machine). Figures go to ``--out`` (a markdown file) with the load average beside them.

    python -m benchmarks.noisy            # NW1 at batch 8 and 128, noisy SEL 10 qubits x 2 layers, batch 4
    python -m benchmarks.noisy --quick    # one repeat each, default.mixed capped at 60 s
    python -m benchmarks.noisy --workloads NSEL12-b64 --repeats 3   # 12 qubits, 2 layers, batch 64 (issue 27)
    python -m benchmarks.noisy --trajectories --repeats 5   # 24 wires, T = 256: per trajectory vs per pure element
    python -m benchmarks.noisy --against /work/main --workloads NW1-b128 NQ100p1   # this tree vs another, A/B
    python -m benchmarks.noisy --tc-python .venv-peers/bin/python --workloads NW1-b8 NW1-b128  # vs TC-NG DMCircuit

``--against PATH`` times qhybrid only, in two worker processes (this tree's qhybrid and the one under PATH),
one step each in turn, and reports both medians and their ratio: on a shared machine the two see the same load.
``--tc-python PY`` times TensorCircuit-NG's ``DMCircuit`` (jax backend, ``jit(value_and_grad)`` of a ``vmap`` over
the batch, one XLA thread) in a worker run by that interpreter, one step each in turn with qhybrid; its first
(compiling) call is reported apart. NQ100p1 (WORKLOADS.md: the Q100 QAOA at p = 1 with ``DepolarizingChannel(0.01)`` on every wire after the H
layer, the cost layer and the mixer; one expval of the 150-term cost Hamiltonian) runs by light cones.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

try:
    import pennylane as qml
    import torch

    import qhybrid
except ImportError:  # the --tc-worker side runs in a venv with only jax and TensorCircuit-NG
    qml = torch = qhybrid = None

NOISE_P = 0.01
"""The depolarizing probability after the embedding and after every layer (NW1)."""


@dataclass(frozen=True)
class NoisyWorkload:
    id: str
    n_qubits: int
    batch: int
    layers: int
    kind: str = "sel"  # "sel" (NW1-like) | "qaoa" (NQ100p1: batch unused, layers = p)


WORKLOADS = {
    "NW1-b8": NoisyWorkload("NW1-b8", 8, 8, 4),
    "NW1-b128": NoisyWorkload("NW1-b128", 8, 128, 4),
    "NSEL10-b4": NoisyWorkload("NSEL10-b4", 10, 4, 2),
    "NSEL12-b64": NoisyWorkload("NSEL12-b64", 12, 64, 2),
    "NQ100p1": NoisyWorkload("NQ100p1", 100, 1, 1, kind="qaoa"),
}

QAOA_GRAPH_SEED = 1
"""NQ100p1's graph: ``networkx.random_regular_graph(3, 100, seed=1)`` (WORKLOADS.md Q100)."""


def qaoa_circuit(wl: NoisyWorkload):
    """NQ100p1: H on all, then per layer IsingZZ(2 gamma) per edge and RX(2 beta) per node, depolarizing on
    every wire after the H layer, after each cost layer and after each mixer; one expval of sum Z_u Z_v."""
    import networkx as nx

    edges = [(int(u), int(v)) for u, v in nx.random_regular_graph(3, wl.n_qubits, seed=QAOA_GRAPH_SEED).edges()]
    cost = qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def noise():
        for q in range(wl.n_qubits):
            qml.DepolarizingChannel(NOISE_P, wires=q)

    def fn(gamma, beta):
        for q in range(wl.n_qubits):
            qml.Hadamard(q)
        noise()
        for layer in range(wl.layers):
            for u, v in edges:
                qml.IsingZZ(2 * gamma[layer], wires=[u, v])
            noise()
            for q in range(wl.n_qubits):
                qml.RX(2 * beta[layer], wires=q)
            noise()
        return qml.expval(cost)

    return fn


def circuit(wl: NoisyWorkload):
    def fn(x, w):
        qml.AngleEmbedding(x, wires=range(wl.n_qubits), rotation="Y")
        for q in range(wl.n_qubits):
            qml.DepolarizingChannel(NOISE_P, wires=q)
        for layer in range(wl.layers):
            qml.StronglyEntanglingLayers(w[layer : layer + 1], wires=range(wl.n_qubits))
            for q in range(wl.n_qubits):
                qml.DepolarizingChannel(NOISE_P, wires=q)
        return [qml.expval(qml.Z(i)) for i in range(wl.n_qubits)]

    return fn


def inputs(wl: NoisyWorkload):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(wl.batch, wl.n_qubits, dtype=torch.float64, generator=g).requires_grad_(True)
    w = torch.rand(wl.layers, wl.n_qubits, 3, dtype=torch.float64, generator=g).requires_grad_(True)
    return x, w


def make_step(wl: NoisyWorkload, system: str):
    """A closure running one value + gradient step, returning the outputs (for the agreement check)."""
    if wl.kind == "qaoa":
        return _qaoa_step(wl, system)
    if system == "qhybrid":
        qnode = qhybrid.qnode(qhybrid.device("tensornet", wires=wl.n_qubits), diff_method="adjoint")(circuit(wl))
    else:
        qnode = qml.QNode(circuit(wl), qml.device("default.mixed", wires=wl.n_qubits), interface="torch")
    x, w = inputs(wl)

    def step():
        out = torch.stack(qnode(x, w), -1)
        out.sum().backward()
        x.grad = w.grad = None
        return out.detach()

    return step


def _qaoa_step(wl: NoisyWorkload, system: str):
    if system != "qhybrid":
        raise ValueError(f"{wl.id} runs on qhybrid only (100 wires: no density matrix of the whole circuit)")
    qnode = qhybrid.qnode(qhybrid.device("tensornet", wires=wl.n_qubits))(qaoa_circuit(wl))
    g = torch.Generator().manual_seed(7)
    gamma = torch.rand(wl.layers, dtype=torch.float64, generator=g).requires_grad_(True)
    beta = torch.rand(wl.layers, dtype=torch.float64, generator=g).requires_grad_(True)

    def step():
        out = qnode(gamma, beta)
        out.backward()
        grads = torch.cat([gamma.grad, beta.grad])
        gamma.grad = beta.grad = None
        return torch.cat([out.detach().reshape(1), grads])

    return step


def _worker(wid: str) -> None:
    """``--worker``: warm up, then one timed step per ``step`` line on stdin (its seconds and its outputs' sum)."""
    torch.set_num_threads(1)
    step = make_step(WORKLOADS[wid], "qhybrid")
    step()
    step()
    print("ready", qhybrid.__file__, flush=True)
    for line in sys.stdin:
        if line.strip() != "step":
            break
        t = time.perf_counter()
        out = step()
        print(f"{time.perf_counter() - t:.6f} {float(out.sum()):.15e}", flush=True)


def _tc_worker(wid: str, data: str) -> None:
    """``--tc-worker``: NW1-like ``wid`` on TensorCircuit-NG's DMCircuit for the inputs in ``data`` (.npz); prints
    its compile time, then one timed step per ``step`` line; ``dump`` writes the outputs back into ``data``."""
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    import jax
    import numpy as np
    import tensorcircuit as tc

    jax.config.update("jax_enable_x64", True)
    K = tc.set_backend("jax")
    tc.set_dtype("complex128")
    tc.set_contractor("cotengra")  # the default greedy path asked XLA for 65 GB at NW1 batch 8
    wl = WORKLOADS[wid]
    n = wl.n_qubits
    p = NOISE_P / 3

    def noise(c):
        for q in range(n):
            c.depolarizing(q, px=p, py=p, pz=p)

    def expvals(x, w):  # as circuit(): every layer one StronglyEntanglingLayers call (range 1), Rot = RZ RY RZ
        c = tc.DMCircuit(n)
        for q in range(n):
            c.ry(q, theta=x[q])
        noise(c)
        for layer in range(wl.layers):
            for q in range(n):
                c.rz(q, theta=w[layer, q, 0])
                c.ry(q, theta=w[layer, q, 1])
                c.rz(q, theta=w[layer, q, 2])
            for q in range(n):
                c.cnot(q, (q + 1) % n)
            noise(c)
        return K.stack([K.real(c.expectation_ps(z=[q])) for q in range(n)])

    def loss(x, w):
        out = K.vmap(expvals, vectorized_argnums=0)(x, w)
        return K.sum(out), out

    value_and_grad = K.jit(K.value_and_grad(loss, argnums=(0, 1), has_aux=True))
    arrays = np.load(data)
    x, w = K.convert_to_tensor(arrays["x"]), K.convert_to_tensor(arrays["w"])
    t = time.perf_counter()
    jax.block_until_ready(value_and_grad(x, w))
    print(f"ready {time.perf_counter() - t:.6f}", flush=True)
    out = None
    for line in sys.stdin:
        if line.strip() == "dump":
            np.savez(data, out=np.asarray(out))
            print("saved", flush=True)
            continue
        if line.strip() != "step":
            break
        t = time.perf_counter()
        (_, out), _ = jax.block_until_ready(value_and_grad(x, w))
        print(f"{time.perf_counter() - t:.6f}", flush=True)


def tc_against(wids, python: str, repeats: int) -> list[dict]:
    """qhybrid (this process) against TensorCircuit-NG DMCircuit (a worker under ``python``), alternating."""
    import tempfile

    import numpy as np

    torch.set_num_threads(1)
    rows = []
    for wid in wids:
        wl = WORKLOADS[wid]
        ours = make_step(wl, "qhybrid")
        ours()
        x, w = inputs(wl)
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "inputs.npz")
            np.savez(data, x=x.detach().numpy(), w=w.detach().numpy())
            worker = subprocess.Popen([python, os.path.abspath(__file__), "--tc-worker", wid, "--data", data],
                                      env=dict(os.environ, OMP_NUM_THREADS="1"), text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      preexec_fn=lambda: _cap_memory(PEER_MEMORY_CAP_GB))
            t0 = time.perf_counter()
            ready = worker.stdout.readline().split()
            if not ready or ready[0] != "ready":
                worker.wait()
                rows.append({"id": wid, "failed": f"exited with code {worker.returncode} after "
                             f"{time.perf_counter() - t0:.0f} s (compile; {PEER_MEMORY_CAP_GB:.0f} GiB cap)",
                             "load": os.getloadavg()[0]})
                continue
            compile_s = float(ready[1])
            q_times, t_times = [], []
            for _ in range(repeats):
                t = time.perf_counter()
                ref = ours()
                q_times.append(time.perf_counter() - t)
                worker.stdin.write("step\n")
                worker.stdin.flush()
                t_times.append(float(worker.stdout.readline()))
            worker.stdin.write("dump\n")
            worker.stdin.flush()
            worker.stdout.readline()
            theirs = torch.as_tensor(np.load(data)["out"])
            worker.stdin.close()
            worker.wait()
        q, t = statistics.median(q_times), statistics.median(t_times)
        rows.append({"id": wid, "qhybrid_s": q, "tc_s": t, "tc_compile_s": compile_s, "ratio": t / q,
                     "max_dev": float((theirs - ref).abs().max()), "load": os.getloadavg()[0]})
    return rows


def tc_markdown(rows) -> str:
    lines = ["qhybrid against TensorCircuit-NG DMCircuit (jax, jit(value_and_grad(vmap)), one thread), alternating, "
             "median s/step; the TC compile is its first call.", "",
             "| workload | qhybrid | TC-NG DMCircuit | TC / qhybrid | TC compile (s) | max |diff| | load avg |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['id']} | - | failed: {r['failed']} | - | - | - | {r['load']:.2f} |")
            continue
        lines.append(f"| {r['id']} | {r['qhybrid_s']:.3f} | {r['tc_s']:.3f} | {r['ratio']:.2f}x | {r['tc_compile_s']:.1f} | "
                     f"{r['max_dev']:.1e} | {r['load']:.2f} |")
    return "\n".join(lines)


def against(wids, other: str, repeats: int) -> list[dict]:
    """This tree's qhybrid against the one under ``other``, alternating one step each in two worker processes."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for wid in wids:
        workers = {}
        for name, root in (("this", here), ("other", other)):
            env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
            workers[name] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", wid], env=env, cwd=root, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )
            ready = workers[name].stdout.readline().split()
            if not ready or ready[0] != "ready" or not ready[1].startswith(os.path.abspath(root)):
                raise RuntimeError(f"the {name} worker ({root}) did not start on its own qhybrid: {ready}")
        times = {"this": [], "other": []}
        sums = {}
        for r in range(repeats):
            for name in (("this", "other") if r % 2 == 0 else ("other", "this")):
                workers[name].stdin.write("step\n")
                workers[name].stdin.flush()
                t, total = workers[name].stdout.readline().split()
                times[name].append(float(t))
                sums[name] = float(total)
        for w in workers.values():
            w.stdin.close()
            w.wait()
        this, base = statistics.median(times["this"]), statistics.median(times["other"])
        rows.append({"id": wid, "this_s": this, "other_s": base, "ratio": base / this,
                     "diff": abs(sums["this"] - sums["other"]), "load": os.getloadavg()[0]})
    return rows


def against_markdown(rows, other: str) -> str:
    lines = [f"qhybrid (this tree) against {other}, alternating one step each, median s/step, one thread; "
             "|diff|: the outputs' sums of the last steps.", "",
             "| workload | this tree | other | other / this | sum |diff| | load avg |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['this_s']:.3f} | {r['other_s']:.3f} | {r['ratio']:.2f}x | {r['diff']:.1e} | {r['load']:.2f} |")
    return "\n".join(lines)


PEER_MEMORY_CAP_GB = 8.0
"""Address-space cap of a peer's process (default.mixed child, TensorCircuit-NG worker): the machine is shared, and
NSEL12-b64's batch of density matrices alone is 16 GiB."""


def _cap_memory(gb: float) -> None:
    import resource

    limit = int(gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


TRAJECTORY_WIRES, TRAJECTORY_LAYERS, TRAJECTORY_COUNT = 24, 2, 256
"""Issue 27's trajectory target: 24 wires, T = 256 trajectories, against a pure batch of 256 elements."""


def trajectory_circuit(n: int, layers: int, noisy: bool):
    """RY data, then per layer RX, RY on every wire, a CZ brick and (``noisy``) DepolarizingChannel on every wire;
    one local ``<Z>`` (the pure engine's light cone: a few wires)."""
    def fn(x, w):
        for q in range(n):
            qml.RY(x[..., q], wires=q)
        for layer in range(layers):
            for q in range(n):
                qml.RX(w[layer, q, 0], wires=q)
                qml.RY(w[layer, q, 1], wires=q)
            for q in range(layer % 2, n - 1, 2):
                qml.CZ([q, q + 1])
            if noisy:
                for q in range(n):
                    qml.DepolarizingChannel(NOISE_P, wires=q)
        return qml.expval(qml.Z(n // 2))

    return fn


def trajectory_steps(n: int = TRAJECTORY_WIRES, layers: int = TRAJECTORY_LAYERS, count: int = TRAJECTORY_COUNT):
    """Two closures: ``count`` trajectories of the noisy circuit (one input), and the pure circuit on a batch of
    ``count`` inputs; each a value + gradient (weights) step."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(count, n, dtype=torch.float64, generator=g)
    w = torch.rand(layers, n, 2, dtype=torch.float64, generator=g).requires_grad_(True)
    noisy = qhybrid.qnode(qhybrid.device("tensornet", wires=n, noise="trajectories", trajectories=count, seed=1))(
        trajectory_circuit(n, layers, True))
    pure = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(trajectory_circuit(n, layers, False))

    def step(node, data):
        def run():
            out = node(data, w)
            out.sum().backward()
            w.grad = None
            return out.detach()

        return run

    return step(noisy, x[0]), step(pure, x)


def trajectories_against_pure(repeats: int) -> list[dict]:
    """Time per trajectory against time per pure batch element, alternating in this process, one thread."""
    torch.set_num_threads(1)
    noisy, pure = trajectory_steps()
    noisy(), pure()  # plans
    times = {"noisy": [], "pure": []}
    for _ in range(repeats):
        for name, fn in (("noisy", noisy), ("pure", pure)):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    t_noisy, t_pure = statistics.median(times["noisy"]), statistics.median(times["pure"])
    return [{"traj_s": t_noisy / TRAJECTORY_COUNT, "pure_s": t_pure / TRAJECTORY_COUNT, "ratio": t_noisy / t_pure,
             "load": os.getloadavg()[0]}]


def trajectories_markdown(rows) -> str:
    lines = [f"Trajectories ({TRAJECTORY_WIRES} wires, {TRAJECTORY_LAYERS} layers, T = {TRAJECTORY_COUNT}, one local "
             "<Z>, value + gradient) against the pure circuit on a batch of as many inputs, alternating, median, one "
             "thread.", "", "| per trajectory (ms) | per pure batch element (ms) | ratio | load avg |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {1e3 * r['traj_s']:.3f} | {1e3 * r['pure_s']:.3f} | {r['ratio']:.2f}x | {r['load']:.2f} |")
    return "\n".join(lines)


def _peer_child(wid: str, repeats: int, queue, memory_gb: float = PEER_MEMORY_CAP_GB) -> None:
    _cap_memory(memory_gb)
    torch.set_num_threads(1)
    step = make_step(WORKLOADS[wid], "default.mixed")
    queue.put(("ready", 0.0, None))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        try:
            out = step()
        except (MemoryError, RuntimeError) as err:  # torch reports a failed allocation as RuntimeError
            queue.put(("error", 0.0, f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"))
            return
        times.append(time.perf_counter() - t)
        queue.put(("time", times[-1], out))


PEER_ERRORS: dict = {}
"""The last default.mixed failure per workload (out of its memory cap, ...), for the table's note."""


def peer_times(wid: str, repeats: int, cap_s: float) -> tuple[list[float], torch.Tensor | None, bool]:
    """default.mixed step times from a child process capped at ``cap_s`` seconds in all; whether it finished."""
    ctx = mp.get_context("spawn")  # a forked child of a process with torch's thread pool may hang
    queue = ctx.Queue()
    child = ctx.Process(target=_peer_child, args=(wid, repeats, queue, PEER_MEMORY_CAP_GB))
    child.start()
    times, out = [], None
    queue.get(timeout=600)  # the child's imports and circuit set-up, not timed
    deadline = time.monotonic() + cap_s
    error = None
    while len(times) < repeats and time.monotonic() < deadline and error is None:
        try:
            kind, t, got = queue.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
        except Exception:  # queue.Empty: keep waiting until the cap
            if not child.is_alive():
                error = f"exited with code {child.exitcode}"
            continue
        if kind == "error":
            error = got
        else:
            times.append(t)
            out = got
    finished = len(times) == repeats
    PEER_ERRORS[wid] = error
    if child.is_alive():
        child.kill()
    child.join()
    return times, out, finished


def run(wids, repeats: int, cap_s: float) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    for wid in wids:
        wl = WORKLOADS[wid]
        ours = make_step(wl, "qhybrid")
        ref_out = ours()  # warm-up (plans)
        ours()
        q_times, p_times, p_out = [], [], None
        finished = wl.kind == "sel"  # no default.mixed of a 100-wire circuit
        for _ in range(repeats):  # alternate: one qhybrid step, then one default.mixed step in the child
            t = time.perf_counter()
            ref_out = ours()
            q_times.append(time.perf_counter() - t)
            if finished:
                got, out, finished = peer_times(wid, 1, cap_s)
                p_times += got
                p_out = out if out is not None else p_out
        if p_times and not finished:
            finished = True  # some steps finished: report them (the note says one did not)
            note = f"{len(p_times)} of {repeats} steps; one did not finish in {cap_s:.0f} s"
        elif wl.kind != "sel":
            note = f"- ({wl.n_qubits} wires)"
        elif PEER_ERRORS.get(wid):
            note = f"failed under a {PEER_MEMORY_CAP_GB:.0f} GiB cap: {PEER_ERRORS[wid]}"
        else:
            note = "" if finished else f"did not finish in {cap_s:.0f} s"
        dev = None if p_out is None else float((p_out - ref_out).abs().max())
        rows.append({
            "id": wid, "qhybrid_s": statistics.median(q_times),
            "peer_s": statistics.median(p_times) if p_times and finished else None,
            "peer_note": note,
            "max_dev": dev, "load": os.getloadavg()[0],
        })
    return rows


def markdown(rows) -> str:
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared), torch "
        f"{torch.__version__}, pennylane {qml.__version__}, one thread each; step = value + gradient (x and weights), "
        "float64; default.mixed = torch backprop.",
        "",
        "| workload | qhybrid (s/step) | default.mixed (s/step) | ratio | max |diff| | load avg |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        peer = f"{r['peer_s']:.3f}" if r["peer_s"] is not None else r["peer_note"]
        if r["peer_s"] is not None and r["peer_note"]:
            peer += f" ({r['peer_note']})"
        ratio = f"{r['peer_s'] / r['qhybrid_s']:.1f}x" if r["peer_s"] is not None else "-"
        dev = f"{r['max_dev']:.1e}" if r["max_dev"] is not None else "-"
        lines.append(f"| {r['id']} | {r['qhybrid_s']:.3f} | {peer} | {ratio} | {dev} | {r['load']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--cap", type=float, default=None, help="seconds default.mixed may take per step")
    ap.add_argument("--peer-memory-gb", type=float, default=None, help="address-space cap of the peers' processes")
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--against", default=None, help="another checkout's root: time its qhybrid against this one")
    ap.add_argument("--tc-python", default=None, help="a python with jax and tensorcircuit-ng: time DMCircuit against qhybrid")
    ap.add_argument("--trajectories", action="store_true", help="time per trajectory against a pure batch element")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tc-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker)
        return 0
    if args.tc_worker:
        _tc_worker(args.tc_worker, args.data)
        return 0
    global PEER_MEMORY_CAP_GB
    PEER_MEMORY_CAP_GB = args.peer_memory_gb or PEER_MEMORY_CAP_GB
    repeats = args.repeats or (1 if args.quick else 5)
    cap = args.cap or (60.0 if args.quick else 300.0)
    if args.trajectories:
        table = trajectories_markdown(trajectories_against_pure(repeats))
    elif args.against:
        table = against_markdown(against(args.workloads, args.against, repeats), args.against)
    elif args.tc_python:
        table = tc_markdown(tc_against(args.workloads, args.tc_python, repeats))
    else:
        table = markdown(run(args.workloads, repeats, cap))
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

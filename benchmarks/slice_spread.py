"""One process against two gloo ranks with ``spread_slices=True`` on a circuit whose closed network is sliced.

``python benchmarks/slice_spread.py [--wires 12 --layers 6 --max-memory 4096 --steps 3 --rounds 2]``: a
brickwork of RY + CNOT layers measured by a global Z word, every light cone a closed network (the wire
rules pinned to networks) sliced to ``max_memory`` bytes, value + gradient (adjoint) per step. Each round
runs one process with the option off, then two ranks with it on (processes launched by this script),
alternating so that a drifting machine load hits both alike; every run reports its steps after the first
(planning). Values must agree to 1e-10. A figure measured on a shared machine says little without its
load average: the script prints it beside every run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _circuit(args):
    import pennylane as qml
    import torch

    import qhybrid
    from qhybrid.devices.tensornet import _simulate
    from qhybrid.devices.tensornet.engines.lightcone import program

    _simulate.STATE_MODE_MAX_WIRES = 0  # light cones, each a closed network: the sliced path is what is timed
    program.CONE_STATE_MAX_WIRES = 0
    n, layers = args.wires, args.layers
    dev = qhybrid.device("tensornet", wires=n, max_memory=args.max_memory, path_cache=False,
                         spread_slices=args.spread)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def f(theta):
        for layer in range(layers):
            for i in range(n):
                qml.RY(theta[layer, i], wires=i)
            for i in range(layer % 2, n - 1, 2):
                qml.CNOT([i, i + 1])
        return qml.expval(qml.prod(*[qml.Z(i) for i in range(n)]))

    theta = torch.rand(layers, n, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return f, theta.requires_grad_()


def _steps(args) -> dict:
    """Seconds of each value + gradient step, the value and the gradient's norm."""
    import torch

    torch.set_num_threads(1)
    f, theta = _circuit(args)
    times = []
    for _ in range(args.steps):
        theta.grad = None
        start = time.perf_counter()
        value = f(theta)
        value.backward()
        times.append(time.perf_counter() - start)
    return {"times": times, "value": float(value.detach()), "grad": float(theta.grad.norm())}


def _rank_main(args) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=600))
    try:
        out = _steps(args)
    finally:
        dist.destroy_process_group()
    Path(args.out, f"rank{args.rank}.json").write_text(json.dumps(out))


def _launch(args, world: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        common = [sys.executable, __file__, "--wires", str(args.wires), "--layers", str(args.layers),
                  "--max-memory", str(args.max_memory), "--steps", str(args.steps)]
        if world == 1:
            procs = [subprocess.Popen(common + ["--rank", "0", "--world", "1", "--out", tmp], env=env)]
        else:
            procs = [
                subprocess.Popen(common + ["--spread", "--rank", str(r), "--world", str(world),
                                           "--store", str(Path(tmp, "store")), "--out", tmp], env=env)
                for r in range(world)
            ]
        for p in procs:
            if p.wait() != 0:
                raise SystemExit(f"a run failed (exit {p.returncode})")
        return [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(len(procs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wires", type=int, default=12)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--max-memory", type=float, default=4096.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--spread", action="store_true")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--store", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.rank is not None:  # one run, launched by the driver below
        if args.world == 1:
            Path(args.out, "rank0.json").write_text(json.dumps(_steps(args)))
        else:
            _rank_main(args)
        return
    print(f"{args.wires} wires, {args.layers} layers, max_memory {args.max_memory:.0f} B, value + gradient a step")
    values = set()
    for round_ in range(args.rounds):
        for world in (1, 2):
            load = os.getloadavg()[0]
            runs = _launch(args, world)
            steady = [min(r["times"][1:] or r["times"]) for r in runs]
            values |= {(round(r["value"], 10), round(r["grad"], 10)) for r in runs}
            label = "one process" if world == 1 else "2 gloo ranks, spread_slices"
            print(f"round {round_}: {label:28s} best step {max(steady):.2f} s "
                  f"(first {max(r['times'][0] for r in runs):.2f} s), load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print("values and gradient norms agree to 1e-10" if len(values) == 1 else f"VALUES DIFFER: {values}")


if __name__ == "__main__":
    main()

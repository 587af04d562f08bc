"""How wide a Kronecker block pays on a GPU: W1, W1B, W5 and G16 captured (``qhybrid.cuda_graph``) and uncaptured at each
``KRON_MAX_WIRES_CUDA`` (``engines/statevector/program.kron_max_wires``), in one process, widths alternating repeat by
repeat. Per width and workload: the captured and uncaptured medians (CUDA events), the kernels of one captured replay
and their GPU time (torch.profiler), and the largest difference from width 4's values and gradients.

    python -m benchmarks.gpu_kron --out $OUT/gpu_kron.json                # widths 4, 6, 8
    python -m benchmarks.gpu_kron --widths 4,6 --workloads W5 --device cpu   # a smoke test (wall clock, no capture)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import pennylane as qml
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.statevector import kron_blocks as sv_program

from .gpu_structured import qaoa_angles
from .workloads import qaoa_function, qaoa_problem

SEL = {"W1": (8, 4, 128), "W1B": (8, 4, 8192), "W5": (12, 6, 1024)}


def _sel_step(name, device):
    n, layers, batch = SEL[name]

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(f)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(batch, n, generator=g, dtype=torch.float64) * 3.1).to(device).requires_grad_()
    w = (torch.rand(layers, n, 3, generator=g, dtype=torch.float64) * 6.2).to(device).requires_grad_()
    return (lambda a, b: torch.stack(list(node(a, b)))), (x, w)


def _qaoa_step(name, device):
    n, edges, p = qaoa_problem(name)
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(qaoa_function(edges, n))
    return (lambda a, b: node(a, b).reshape(1)), qaoa_angles(p, device)


def _build(name, device, captured):
    fn, args = (_sel_step if name in SEL else _qaoa_step)(name, device)
    if captured:
        fn = qhybrid.cuda_graph(fn, args)

    def step():
        out = fn(*args)
        return (out.detach(), *torch.autograd.grad(out.sum(), args))

    return step


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _time(step, device) -> float:
    if torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    step()
    return time.perf_counter() - t


def _kernels(step) -> dict:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    ks = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.device_time_total > 0]
    return {"kernels": int(sum(e.count for e in ks)), "gpu_busy_ms": sum(e.device_time_total for e in ks) / 1e3}


def run(args) -> list:
    cuda = torch.device(args.device).type == "cuda"
    rows = []
    for name in args.workloads.split(","):
        built, reference = {}, None
        for width in args.widths:
            sv_program.KRON_MAX_WIRES_CUDA = sv_program.KRON_MAX_WIRES = width
            for captured in (False, True) if cuda else (False,):
                key = (width, captured)
                built[key] = _build(name, args.device, captured)
                for _ in range(2):
                    out = built[key]()
                diff = 0.0 if reference is None else max(float((a - b).abs().max()) for a, b in zip(out, reference))
                reference = reference or out
                rows.append({"workload": name, "width": width, "captured": captured, "times_s": [],
                             "max_abs_diff_vs_first_width": diff})
        index = {(r["width"], r["captured"]): r for r in rows if r["workload"] == name}
        for _ in range(args.repeats):
            for key, step in built.items():
                index[key]["times_s"].append(_time(step, args.device))
        for key, step in built.items():
            r = index[key]
            r["median_s"] = statistics.median(r["times_s"])
            if cuda:
                r.update(_kernels(step))
            print(name, key, f"{1e3 * r['median_s']:.3f} ms", {k: r[k] for k in r if k in ("kernels", "gpu_busy_ms", "max_abs_diff_vs_first_width")}, flush=True)
        sv_program.KRON_MAX_WIRES = 4
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--widths", default="4,6,8")
    p.add_argument("--workloads", default="W1,W1B,W5,G16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default="gpu_kron.json")
    args = p.parse_args(argv)
    args.widths = [int(w) for w in args.widths.split(",")]
    rows = run(args)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
    with open(args.out, "w") as fh:
        json.dump({"environment": env, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

"""GPU benchmark: qhybrid on CUDA (backend="torch" and backend="cutensornet") against PennyLane
default.qubit with torch-CUDA tensors (backprop), on the workloads of WORKLOADS.md.

One step = forward + backward giving gradients for the weights and the inputs x, float64/complex128.
Systems run alternately in one process; 2 warm-up steps, then the median of ``--repeats`` steps timed
with CUDA events. Results go to JSON (device name, torch / CUDA / cuquantum / cuTensorNet versions,
torch threads) and to stdout.

    python benchmarks/gpu.py                         # W1, W2, W5 and W22 (a 22-qubit variant)
    python benchmarks/gpu.py --workloads W1 --closed # also force closed networks through the backends
    python benchmarks/gpu.py --out $OUT/gpu.json

Circuits on at most 20 wires normally run as qhybrid's compiled state-vector program, which never
calls a contraction backend: there both qhybrid rows measure the same code. ``--closed`` adds rows
where every measurement is contracted as a closed network by the backend (what wide circuits do).
The JSON records, per qhybrid row, which program kinds ran.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import traceback
from dataclasses import dataclass

NO_GPU_EXIT = 2
"""Exit status when no CUDA GPU is present (nothing is measured)."""


@dataclass(frozen=True)
class Workload:
    name: str
    wires: int
    layers: int
    batch: int
    note: str = ""


WORKLOADS = {
    "W1": Workload("W1", 8, 4, 128),
    "W2": Workload("W2", 16, 4, 32),
    "W5": Workload("W5", 12, 6, 1024),
    "W1B": Workload("W1B", 8, 4, 8192, "W1 at batch 8192: the large-batch GPU case"),
    "W22": Workload("W22", 22, 2, 4, "more than 20 wires: qhybrid contracts closed light-cone networks"),
}


def _versions(torch) -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device_name": torch.cuda.get_device_name(0),
        "device_capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
        "device_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        import cuquantum

        info["cuquantum_python"] = getattr(cuquantum, "__version__", "unknown")
        from cuquantum.bindings import cutensornet as cutn

        v = cutn.get_version()
        info["cutensornet"] = f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        info["cuquantum_python"] = f"unavailable ({type(exc).__name__}: {exc})"
    for name in ("pennylane", "qhybrid", "opt_einsum", "cotengra"):
        try:
            info[name] = __import__(name).__version__
        except Exception as exc:  # noqa: BLE001
            info[name] = f"unavailable ({type(exc).__name__})"
    return info


def _circuit(qml, n: int, psi0=None):
    def circuit(x, w):
        if psi0 is not None:
            qml.StatePrep(psi0, wires=range(n))
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    return circuit


def _inputs(torch, wl: Workload, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(wl.batch, wl.wires, generator=g, dtype=torch.float64) * 3.1
    w = torch.rand(wl.layers, wl.wires, 3, generator=g, dtype=torch.float64) * 6.2
    return x.to(device).requires_grad_(), w.to(device).requires_grad_()


def _make_step(torch, fn, x, w):
    def step():
        out = fn(x, w)
        out = torch.stack(list(out)) if isinstance(out, (list, tuple)) else out
        loss = out.sum()
        gx, gw = torch.autograd.grad(loss, (x, w))
        return loss.detach(), gx, gw

    return step


def _systems(args, torch, qml, wl: Workload):
    """name -> (build() -> step, info()) for every system measured on this workload."""
    import qhybrid

    circuit = _circuit(qml, wl.wires)
    systems = {}
    for backend in ("torch", "cutensornet"):
        for closed in (False, True) if args.closed else (False,):
            name = f"qhybrid[{backend}{',closed' if closed else ''}]"

            def build(backend=backend, closed=closed):
                from qhybrid.devices.tensornet import _simulate

                dev = qhybrid.device("tensornet", wires=wl.wires, torch_device=args.device, backend=backend)
                qn = qhybrid.qnode(dev, diff_method="adjoint")(circuit)
                x, w = _inputs(torch, wl, args.device)
                inner = _make_step(torch, qn, x, w)

                def step():
                    _simulate.STATE_MODE_MAX_WIRES = 0 if closed else default_state_max
                    try:
                        return inner()
                    finally:
                        _simulate.STATE_MODE_MAX_WIRES = default_state_max

                return step, lambda: _programs(dev, args.device)

            systems[name] = build
    if args.cuda_graph and torch.device(args.device).type == "cuda":

        def build_graphed():
            # the whole forward + backward of the QNode captured once as CUDA graphs and replayed
            dev = qhybrid.device("tensornet", wires=wl.wires, torch_device=args.device)
            qn = qhybrid.qnode(dev, diff_method="adjoint")(circuit)
            x, w = _inputs(torch, wl, args.device)

            def fn(x, w):
                return torch.stack(list(qn(x, w)))

            graphed = qhybrid.cuda_graph(fn, (x, w))
            return _make_step(torch, graphed, x, w), lambda: {}

        systems["qhybrid[torch,cuda-graph]"] = build_graphed
    if not args.skip_pennylane:

        def build_pl():
            dev = qml.device("default.qubit", wires=wl.wires)
            # PennyLane 0.45 default.qubit builds |0...0> on the CPU and then fails on the first broadcast
            # rotation with CUDA parameters ("Expected all tensors to be on the same device"); starting the
            # circuit from the same |0...0> as a CUDA tensor (StatePrep) makes it run on the GPU.
            psi0 = None
            if torch.device(args.device).type == "cuda":
                psi0 = torch.zeros(2**wl.wires, dtype=torch.complex128, device=args.device)
                psi0[0] = 1
            qn = qml.QNode(_circuit(qml, wl.wires, psi0), dev, interface="torch", diff_method="backprop")
            x, w = _inputs(torch, wl, args.device)
            return _make_step(torch, qn, x, w), dict

        systems[f"pennylane[default.qubit,backprop,torch-{args.device}]"] = build_pl
    if args.jax:
        systems["jax[jit,vmap]"] = lambda: (_jax_step(torch, wl, args.device), dict)
    return systems


def _jax_step(torch, wl: Workload, device: str):
    """The hand-written jax.numpy state vector (benchmarks/peers/jax_hand.py) under jax.jit, on jax's default
    device (the GPU where jax has CUDA); the loss and gradients come back as torch tensors for the agreement."""
    import jax
    import numpy as np

    from benchmarks.peers.jax_hand import _sel_loss

    fn = jax.jit(jax.value_and_grad(_sel_loss(wl.wires, wl.layers), argnums=(0, 1)))
    x, w = (jax.numpy.asarray(t.detach().cpu().numpy()) for t in _inputs(torch, wl, "cpu"))

    def step():
        value, grads = jax.block_until_ready(fn(x, w))
        return value, *grads

    def converted():
        return tuple(torch.from_numpy(np.asarray(v)).to(device) for v in step())

    converted.raw = step
    return converted


def _programs(dev, device) -> dict:
    """Which compiled program kinds (state vector, state contraction, closed networks) ran, and why any
    network left cuTensorNet for torch: best effort."""
    info = {}
    try:
        progs = list(dev._cache._programs.values())
        info["programs"] = sorted({type(p).__name__ for p in progs})
    except Exception:  # noqa: BLE001 - introspection of another module's internals
        pass
    try:
        from qhybrid.devices.tensornet.backends import get_backend

        info["backend_fallbacks"] = list(getattr(get_backend(dev.backend, device), "fallbacks", []))
    except Exception:  # noqa: BLE001
        pass
    return info


def _time(torch, step) -> tuple[float, tuple]:
    if not torch.cuda.is_available():  # --device cpu smoke test only: wall clock
        import time

        t0 = time.perf_counter()
        out = step()
        return time.perf_counter() - t0, out
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3, out


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _traffic(wl: Workload) -> dict:
    """A lower bound on the memory traffic of one adjoint step of the state-vector program: every gate
    layer reads and writes the state once forward and the state and the cotangent once backward (with the
    gates of a layer fused, which qhybrid's kernels only partly are). Complex128 states."""
    state = wl.batch * 2**wl.wires * 16
    passes = 2 * (wl.layers + 1) + 4 * (wl.layers + 1)  # embedding layer + weight layers, fwd + bwd
    moved = state * passes
    return {"state_bytes": state, "model_passes": passes, "model_bytes_per_step": moved,
            "bandwidth_limit_ms_at_3TBps": moved / 3e12 * 1e3}


def run_workload(args, torch, qml, wl: Workload) -> dict:
    record = {"workload": wl.name, "wires": wl.wires, "layers": wl.layers, "batch": wl.batch, "note": wl.note,
              "systems": {}, "traffic": _traffic(wl) if wl.wires <= 20 else None}
    built, outs = {}, {}
    for name, build in _systems(args, torch, qml, wl).items():
        entry = record["systems"][name] = {}
        try:
            _sync(torch)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            step, info = build()
            first, out = _time(torch, step)  # first call: planning / network building / autotuning
            for _ in range(args.warmup - 1):
                _time(torch, step)
            peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
            entry.update(first_step_s=first, peak_memory_gib=peak, **info())
            built[name], outs[name], entry["times_s"] = getattr(step, "raw", step), out, []
        except Exception as exc:  # noqa: BLE001 - one failing system must not end the run
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc(limit=6)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    for _ in range(args.repeats):  # alternate the systems, repeat by repeat
        for name, step in built.items():
            try:
                t, _ = _time(torch, step)
                record["systems"][name]["times_s"].append(t)
            except Exception as exc:  # noqa: BLE001
                record["systems"][name]["error"] = f"{type(exc).__name__}: {exc}"
    for name, entry in record["systems"].items():
        if entry.get("times_s"):
            entry["median_s"] = statistics.median(entry["times_s"])
    if args.profile and torch.cuda.is_available():
        for name, step in built.items():
            record["systems"][name]["profile"] = _profile(torch, step)
    _agreement(torch, record, outs)
    return record


def _profile(torch, step, top: int = 8) -> dict:
    """One step under torch.profiler: CUDA kernels launched, host time, GPU busy time and the ``top`` kernels."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = [e for e in events if getattr(e, "device_time_total", 0) > 0 and e.device_type.name == "CUDA"]
    heaviest = sorted(kernels, key=lambda e: e.device_time_total, reverse=True)[:top]
    return {
        "cuda_kernels": int(sum(e.count for e in kernels)),
        "gpu_busy_ms": sum(e.device_time_total for e in kernels) / 1e3,
        "top_kernels": [{"name": e.key[:80], "count": e.count, "ms": e.device_time_total / 1e3} for e in heaviest],
        "cpu_ops": int(sum(e.count for e in events if e.device_type.name == "CPU")),
    }


def _agreement(torch, record, outs) -> None:
    """Loss and gradients of every system against PennyLane's (max abs difference)."""
    ref_name = next((n for n in outs if n.startswith("pennylane")), None)
    if ref_name is None:
        return
    ref = outs[ref_name]
    ref_t = record["systems"][ref_name].get("median_s")
    for name, out in outs.items():
        if name == ref_name:
            continue
        diff = max(float((a - b).abs().max()) for a, b in zip(out, ref))
        entry = record["systems"][name]
        entry["max_abs_diff_vs_pennylane"] = diff
        if ref_t and entry.get("median_s"):
            entry["speedup_vs_pennylane"] = ref_t / entry["median_s"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="W1,W2,W5,W1B,W22", help=f"comma-separated, from {sorted(WORKLOADS)}")
    p.add_argument("--wide-wires", type=int, default=22, help="wires of the wide variant W22 (20-24)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--closed", action="store_true", help="also run qhybrid with every circuit as closed networks")
    p.add_argument("--skip-pennylane", action="store_true")
    p.add_argument("--cuda-graph", action="store_true", help="also a row with the step captured as CUDA graphs")
    p.add_argument("--jax", action="store_true", help="also a jax.jit state vector (benchmarks/peers/jax_hand.py)")
    p.add_argument("--profile", action="store_true", help="also profile one step of each system (kernel counts)")
    p.add_argument("--device", default="cuda",
                   help="torch device (default cuda); 'cpu' is a smoke test of this script only")
    p.add_argument("--out", default=None,
                   help="JSON file (default: $OUT/gpu_benchmark.json, else ./gpu_benchmark.json)")
    args = p.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "benchmarks/gpu.py: no CUDA GPU is visible to torch (torch.cuda.is_available() is False); nothing "
            "was measured. Run it on a machine with an NVIDIA GPU and a CUDA build of torch (see docs/GPU.md).",
            file=sys.stderr,
        )
        return NO_GPU_EXIT
    import pennylane as qml

    global default_state_max
    from qhybrid.devices.tensornet import _simulate

    default_state_max = _simulate.STATE_MODE_MAX_WIRES
    if not 20 <= args.wide_wires <= 24:
        p.error("--wide-wires must be between 20 and 24")
    WORKLOADS["W22"] = Workload(f"W{args.wide_wires}", args.wide_wires, 2, 4, WORKLOADS["W22"].note)
    report = {
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "protocol": {"warmup": args.warmup, "repeats": args.repeats, "statistic": "median",
                     "timing": "CUDA events around forward+backward", "dtype": "complex128/float64",
                     "order": "systems alternate within each repeat"},
        "environment": _versions(torch) if torch.cuda.is_available() else {"device_name": "cpu (smoke test)"},
        "workloads": [],
    }
    for key in [k.strip() for k in args.workloads.split(",") if k.strip()]:
        if key not in WORKLOADS:
            p.error(f"unknown workload {key!r}; choose from {sorted(WORKLOADS)}")
        wl = WORKLOADS[key]
        print(f"[gpu benchmark] {wl.name}: {wl.wires} wires, {wl.layers} layers, batch {wl.batch}", file=sys.stderr)
        report["workloads"].append(run_workload(args, torch, qml, wl))
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    out = args.out or os.path.join(os.environ.get("OUT", "."), "gpu_benchmark.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    print(f"[gpu benchmark] written to {out}", file=sys.stderr)
    return 0


default_state_max = 20

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise SystemExit(main())

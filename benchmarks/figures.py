"""BENCHMARKS.md's plots, one per family, drawn from the result files in benchmarks/results/.

    python -m benchmarks.figures [--results benchmarks/results] [--out benchmarks/figures]

Each plot is a log-scale bar chart of seconds per value + gradient step: qhybrid beside the peers of that
family, a peer that failed or did not finish drawn as a hatched bar at the top of the axis with its reason in
the legend. Small PNGs (72 dpi, a few KB each). Families without a result file are left out (said on stdout).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLOURS = ["#1f5fa8", "#8fb4dd", "#d9822b", "#7a7a7a", "#5a9e4b", "#b0413e", "#9467bd"]


def _load(results: Path, name: str):
    path = results / name
    return json.loads(path.read_text()) if path.exists() else None


def small(results: Path):
    """W1 (compiled peers run, two threads) and W2, W4, W5 (benchmarks.run, two threads)."""
    peers, run = _load(results, "peers.json"), _load(results, "results.json")
    if peers is None or run is None:
        return None
    two = next(r for r in peers["runs"] if r["threads"] == 2)["workloads"]
    bars = {"W1": {"qhybrid": two["W1"]["qhybrid static"].get("median_s")}}
    bars["W1"].update({k: two["W1"][k].get("median_s") for k in ("dq torch", "lightning adjoint", "TC-NG", "dq jax.jit")})
    names = {"qhybrid": "qhybrid", "default.qubit backprop": "dq torch", "default.qubit parameter-shift": "dq torch",
             "lightning.qubit adjoint": "lightning adjoint", "lightning.qubit parameter-shift": "lightning adjoint"}  # fmt: skip
    for wl in ("W2", "W4", "W5"):
        rows = run["workloads"][wl]["complex128"]
        bars[wl] = {names[k]: v["median_s"] for k, v in rows.items() if k in names}
    return "Small batched circuits, two threads", bars, {}


def _rows(results: Path, name: str):
    data = _load(results, name)
    return None if data is None else data["rows"]


def deep(results: Path):
    rows = _rows(results, "deep.json")
    if rows is None:
        return None
    bars = {}
    for r in rows:
        bars[r["workload"]] = {"qhybrid, 1 thread": r["qhybrid_1t"], "qhybrid, 2 threads": r["qhybrid_2t"]}
        if r["quimb"].startswith("fails"):
            bars[r["workload"]]["quimb"] = None
    return "Deep QAOA, value + gradient a step", bars, {"quimb": "quimb: out of memory"}


def noisy(results: Path):
    rows = _rows(results, "noisy.json")
    if rows is None:
        return None
    bars = {r["workload"]: {"qhybrid": r["qhybrid"], "default.mixed": r.get("default.mixed"),
                            "TC-NG DMCircuit": r.get("TC-NG DMCircuit")} for r in rows if r["workload"] != "NQ100p1"}  # fmt: skip
    return "Noisy circuits (density matrices)", bars, {"default.mixed": "fails or > 30 s", "TC-NG DMCircuit": "fails"}


def mps(results: Path):
    data = _load(results, "mps.json")
    if data is None:
        return None
    bars = {}
    for wl, systems in data["workloads"].items():
        if wl == "check20":
            continue
        bars[wl] = {"qhybrid (value + grad)": systems["qhybrid"].get("median_s"),
                    "default.tensor (values)": systems["default.tensor"].get("median_s"),
                    "quimb (values)": systems["quimb.values"].get("median_s")}  # fmt: skip
    return "MPS at bond dimension 64, one thread", bars, {}


def gpu(results: Path):
    """benchmarks/gpu.py (W1, W1B, W5) and benchmarks/gpu_structured.py (G16, deep QAOA): qhybrid captured and
    uncaptured beside default.qubit on torch-CUDA and a jax.jit state vector, on one GPU."""
    rows = [row for name in ("gpu.json", "gpu_structured.json") for row in (_load(results, name) or {}).get("workloads", [])]
    if not rows:
        return None
    names = {"qhybrid[torch,cuda-graph]": "qhybrid captured", "qhybrid[cuda-graph]": "qhybrid captured",
             "qhybrid[torch]": "qhybrid", "qhybrid": "qhybrid", "jax[jit,vmap]": "jax.jit", "jax[jit]": "jax.jit"}
    bars = {}
    for row in rows:
        bar = bars[row["workload"]] = {"qhybrid captured": None, "qhybrid": None, "default.qubit (torch CUDA)": None,
                                       "jax.jit": None}  # fmt: skip
        for system, entry in row["systems"].items():
            label = "default.qubit (torch CUDA)" if system.startswith("pennylane") else names.get(system)
            if label is not None:
                bar[label] = entry.get("median_s")
    env = (_load(results, "gpu_structured.json") or _load(results, "gpu.json") or {}).get("environment", {})
    return f"{env.get('device_name', 'GPU')}, complex128", bars, {"default.qubit (torch CUDA)": "state vectors only"}


def chemistry(results: Path):
    """LiH, H2O, H2O-14 (benchmarks.chemistry, one thread): qhybrid beside lightning.qubit and default.qubit."""
    data = _load(results, "chemistry_1t.json")
    if data is None:
        return None
    bars = {}
    for molecule, row in data["results"].items():
        systems = row["systems"]
        bars[molecule] = {name: systems[name]["median_s"]["1"] if name in systems else None
                          for name in ("qhybrid", "lightning.qubit adjoint", "default.qubit backprop")}  # fmt: skip
    return "VQE value + gradient, one thread", bars, {"default.qubit backprop": "default.qubit: too slow, not run"}


FAMILIES = {"small": small, "deep": deep, "noisy": noisy, "mps": mps, "chemistry": chemistry, "gpu": gpu}


def draw(title: str, bars: dict, failed: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = list(dict.fromkeys(s for group in bars.values() for s in group))
    values = [v for group in bars.values() for v in group.values() if v]
    top = max(values) * 8
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(5.2, 2.4), dpi=72)
    for j, system in enumerate(systems):
        xs, hs, miss = [], [], []
        for i, group in enumerate(bars.values()):
            if system not in group:
                continue
            (xs if group[system] else miss).append(i + (j - (len(systems) - 1) / 2) * width)
            if group[system]:
                hs.append(group[system])
        label = failed.get(system, system) if not xs else system
        colour = COLOURS[j % len(COLOURS)]
        if xs:
            ax.bar(xs, hs, width, color=colour, label=label)
        if miss:
            ax.bar(miss, [top] * len(miss), width, color="none", edgecolor=colour, hatch="//",
                   label=failed.get(system, f"{system}: not run") if system in failed else None)  # fmt: skip
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 3, top)
    ax.set_xticks(range(len(bars)), list(bars), fontsize=8)
    ax.set_ylabel("seconds a step", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2, frameon=False, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=72)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=str(HERE / "results"))
    ap.add_argument("--out", default=str(HERE / "figures"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, family in FAMILIES.items():
        got = family(Path(a.results))
        if got is None:
            print(f"{name}: no result file, no plot")
            continue
        draw(*got, out / f"{name}.png")
        print(f"{name}: {out / f'{name}.png'}")


if __name__ == "__main__":
    main()

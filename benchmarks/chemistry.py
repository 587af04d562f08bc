"""VQE value + gradient on molecular Hamiltonians: qhybrid beside lightning.qubit (adjoint) and default.qubit.

    python -m benchmarks.chemistry [--molecules LiH,H2O] [--threads 1,2] [--repeats 15] [--slow-repeats 3] [--out f.json]

Rows (../shared/WORKLOADS.md, "Chemistry"): ``qml.expval(H)`` of ``qml.qchem.molecular_hamiltonian`` after
``qml.AllSinglesDoubles`` from the Hartree-Fock state, value and gradient for the excitation angles. LiH
(10 qubits, 276 terms), H2O (12 qubits, 1,079 terms) and H2O-14 (H2O with no active space, 14 qubits). The
Hamiltonians are computed once by PennyLane's qchem and kept in ``benchmarks/chemistry_data/`` (this script
writes them there; qchem takes 5-60 s a molecule).

Systems, in one process: the plain ``qhybrid.qnode`` (adjoint), ``lightning.qubit`` with ``diff_method="adjoint"``
and ``default.qubit`` with torch backprop (skipped above ``--dq-max-qubits``). Every system's steps alternate
round by round (the order rotates), at each thread count in turn (``torch.set_num_threads``; lightning.qubit
reads ``OMP_NUM_THREADS`` at import, so run once per thread count for its two-thread row:
``OMP_NUM_THREADS=2 python -m benchmarks.chemistry --threads 2``). "first" is a fresh device, qnode and
Hamiltonian object's first value + gradient in this process. Values and gradients are checked against the
reference (default.qubit where it runs, else lightning).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

DATA = Path(__file__).parent / "chemistry_data"

MOLECULES = {
    "LiH": (["Li", "H"], [0, 0, 0, 0, 0, 2.969280527], 2, 5),
    "H2O": (["H", "O", "H"], [-0.0399, -0.0038, 0, 1.5780, 0.8540, 0, 2.7909, -0.5159, 0], 8, 6),
    "H2O-14": (["H", "O", "H"], [-0.0399, -0.0038, 0, 1.5780, 0.8540, 0, 2.7909, -0.5159, 0], None, None),
}
"""name -> (symbols, coordinates in Bohr, active electrons, active orbitals; None: all)."""


def hamiltonian_data(name: str) -> dict:
    """The molecule's qubit Hamiltonian (Pauli strings, coefficients), electrons and qubits, from the cache
    file or computed by qml.qchem and written there."""
    path = DATA / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    import pennylane as qml

    symbols, coords, electrons, orbitals = MOLECULES[name]
    kw = {} if electrons is None else {"active_electrons": electrons, "active_orbitals": orbitals}
    H, n = qml.qchem.molecular_hamiltonian(symbols, np.array(coords, dtype=float), **kw)
    coeffs, ops = H.terms()
    wire_map = {i: i for i in range(n)}
    electrons = electrons if electrons is not None else qml.qchem.Molecule(symbols, np.array(coords)).n_electrons
    data = {
        "molecule": name, "symbols": symbols, "coordinates_bohr": coords, "active_electrons": electrons,
        "active_orbitals": orbitals, "qubits": int(n), "coefficients": [float(np.real(c)) for c in coeffs],
        "words": [qml.pauli.pauli_word_to_string(o, wire_map=wire_map) for o in ops],
    }
    DATA.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def build(data: dict):
    """(circuit, number of angles, Hamiltonian) for the molecule's data: a fresh Hamiltonian object."""
    import pennylane as qml

    n, electrons = data["qubits"], data["active_electrons"]
    wire_map = {i: i for i in range(n)}
    H = qml.dot(data["coefficients"], [qml.pauli.string_to_pauli_word(w, wire_map=wire_map) for w in data["words"]])
    hf = qml.qchem.hf_state(electrons, n)
    singles, doubles = qml.qchem.excitations(electrons, n)

    def circuit(p):
        qml.AllSinglesDoubles(p, wires=range(n), hf_state=hf, singles=singles, doubles=doubles)
        return qml.expval(H)

    return circuit, len(singles) + len(doubles)


def make(system: str, data: dict):
    """A value + gradient step of ``system`` on the molecule, returning (value, gradient)."""
    import pennylane as qml

    import qhybrid

    circuit, k = build(data)
    n = data["qubits"]
    if system == "qhybrid":
        f = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    elif system == "lightning.qubit adjoint":
        f = qml.QNode(circuit, qml.device("lightning.qubit", wires=n), interface="torch", diff_method="adjoint")
    else:
        f = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    p0 = 0.1 * torch.sin(torch.arange(1, k + 1, dtype=torch.float64))

    def step():
        p = p0.clone().requires_grad_()
        v = f(p)
        v.backward()
        return float(v.detach()), p.grad.detach().clone()

    return step


def _timed(step) -> tuple[float, tuple]:
    t0 = time.perf_counter()
    out = step()
    return time.perf_counter() - t0, out


SLOW_STEP_S = 2.0
"""A system whose second (warm) step takes longer than this is timed ``--slow-repeats`` times only."""


def run_molecule(name: str, systems: list[str], threads: list[int], repeats: int, slow_repeats: int = 3) -> dict:
    data = hamiltonian_data(name)
    rows: dict = {}
    steps = {}
    for s in systems:
        torch.set_num_threads(threads[0])
        first, out = _timed(make(s, data))
        steps[s] = make(s, data)
        warm, _ = _timed(steps[s])  # the second instance warmed as well
        rows[s] = {"first_s": first, "out": out, "times": {t: [] for t in threads},
                   "repeats": slow_repeats if warm > SLOW_STEP_S else repeats}
    order = list(systems)
    for r in range(repeats):
        for t in threads:
            torch.set_num_threads(t)
            for s in order:
                if r >= rows[s]["repeats"]:
                    continue
                dt, _ = _timed(steps[s])
                rows[s]["times"][t].append(dt)
        order = order[1:] + order[:1]
    ref = "default.qubit backprop" if "default.qubit backprop" in systems else systems[-1]
    v_ref, g_ref = rows[ref]["out"]
    result = {"qubits": data["qubits"], "terms": len(data["words"]), "reference": ref, "systems": {}}
    for s in systems:
        v, g = rows[s]["out"]
        result["systems"][s] = {
            "first_s": rows[s]["first_s"],
            "median_s": {t: statistics.median(rows[s]["times"][t]) for t in threads},
            "min_s": {t: min(rows[s]["times"][t]) for t in threads},
            "max_dev": max(abs(v - v_ref), float((g - g_ref).abs().max())),
        }
    return result


def machine() -> dict:
    import pennylane as qml
    from importlib.metadata import version

    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        rev = ""
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "pennylane": qml.__version__, "pennylane_lightning": version("pennylane_lightning"), "qhybrid": rev,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")}


def report(results: dict, threads: list[int]) -> str:
    lines = ["| molecule | qubits | terms | system | threads | median ms | min ms | first s | lightning / system | max dev |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        lq = res["systems"].get("lightning.qubit adjoint")
        for s, row in res["systems"].items():
            for t in threads:
                ratio = f"{lq['median_s'][t] / row['median_s'][t]:.2f}" if lq else ""
                lines.append(f"| {name} | {res['qubits']} | {res['terms']} | {s} | {t} | {1e3 * row['median_s'][t]:.1f} | "
                             f"{1e3 * row['min_s'][t]:.1f} | {row['first_s']:.2f} | {ratio} | {row['max_dev']:.1e} |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--molecules", default="LiH,H2O")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--slow-repeats", type=int, default=3)
    ap.add_argument("--dq-max-qubits", type=int, default=12, help="default.qubit backprop runs up to this many qubits")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    results = {}
    for name in args.molecules.split(","):
        data = hamiltonian_data(name)
        systems = ["qhybrid", "lightning.qubit adjoint"]
        if data["qubits"] <= args.dq_max_qubits:
            systems.append("default.qubit backprop")
        results[name] = run_molecule(name, systems, threads, args.repeats, args.slow_repeats)
    out = {"machine": machine(), "load": os.getloadavg(), "threads": threads, "repeats": args.repeats, "results": results}
    print(json.dumps(out["machine"]))
    print(f"load average {out['load']}")
    print(report(results, threads))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    return out


if __name__ == "__main__":
    main()

"""VQE with ``@qhybrid.qnode``: the ground-state energy of a transverse-field Ising chain.

    H = -J sum_i Z_i Z_{i+1} - h sum_i X_i        (6 qubits, open chain by default)

The Hamiltonian is built with ``qml.dot`` and measured with one ``qml.expval(H)``; the ansatz is the
Hamiltonian variational ansatz (``|+>^n``, then layers of ``IsingZZ`` on the bonds and ``RX`` on every site)
or a hardware-efficient RY + CZ circuit. Adam minimises the energy with adjoint gradients through the
tensor network; the result is compared with exact diagonalisation (``numpy.linalg.eigvalsh`` of
``qml.matrix(H)``).

    python examples/qnode_vqe.py                    # about 5 s on a laptop CPU
    python examples/qnode_vqe.py --h 0.5 --periodic --ansatz hardware-efficient --epochs 500

Saves ``qnode_vqe.png`` (energy per step against the exact value, and the error on a log scale) next to
this script or in ``--out`` and prints the final energy and its error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pennylane as qml
import torch

import qhybrid
from _training import figure, progress

INIT_SCALE = 0.1
"""Initial angles are normal with this standard deviation: the circuit starts near the |+>^n product state."""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", "--steps", dest="epochs", type=int, default=300, help="optimisation steps")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--n-qubits", type=int, default=6)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--J", type=float, default=1.0, help="ZZ coupling")
    p.add_argument("--h", type=float, default=1.0, help="transverse field")
    p.add_argument("--periodic", action="store_true", help="add the bond between the last and first site")
    p.add_argument("--ansatz", choices=["hva", "hardware-efficient"], default="hva")
    p.add_argument("--diff-method", default="adjoint", choices=["adjoint", "parameter-shift", "backprop"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def tfim_hamiltonian(n: int, J: float, h: float, periodic: bool = False) -> qml.operation.Operator:
    """``-J sum Z_i Z_{i+1} - h sum X_i`` on wires ``0..n-1``."""
    bonds = [(i, i + 1) for i in range(n - 1)] + ([(n - 1, 0)] if periodic and n > 2 else [])
    coeffs = [-J] * len(bonds) + [-h] * n
    ops = [qml.Z(a) @ qml.Z(b) for a, b in bonds] + [qml.X(i) for i in range(n)]
    return qml.dot(coeffs, ops)


def exact_ground_energy(H: qml.operation.Operator, n: int) -> float:
    return float(np.linalg.eigvalsh(qml.matrix(H, wire_order=range(n)))[0])


def make_energy(H, n: int, ansatz: str, diff_method: str):
    dev = qhybrid.device("tensornet", wires=n)
    bonds = [tuple(op.wires) for op in H.operands if len(op.wires) == 2]

    @qhybrid.qnode(dev, diff_method=diff_method)
    def energy(weights):
        if ansatz == "hva":
            for i in range(n):
                qml.Hadamard(wires=i)
            for layer in weights:
                for k, (a, b) in enumerate(bonds):
                    qml.IsingZZ(layer[0, k], wires=[a, b])
                for i in range(n):
                    qml.RX(layer[1, i], wires=i)
        else:
            for layer in weights:
                for i in range(n):
                    qml.RY(layer[i], wires=i)
                for i in range(n - 1):
                    qml.CZ(wires=[i, i + 1])
        return qml.expval(H)

    shape_per_layer = (2, max(n, len(bonds))) if ansatz == "hva" else (n,)
    return energy, shape_per_layer


def plot(energies, exact: float, path: Path, title: str) -> None:
    steps = np.arange(len(energies))
    with figure(path, title, ncols=2, figsize=(10, 4)) as (_, (ax_e, ax_err)):
        ax_e.plot(steps, energies, label="VQE")
        ax_e.axhline(exact, color="k", linestyle="--", label=f"exact {exact:.4f}")
        ax_e.set(xlabel="step", ylabel="energy", title="energy")
        ax_e.legend()
        ax_err.semilogy(steps, np.maximum(np.asarray(energies) - exact, 1e-16))
        ax_err.set(xlabel="step", ylabel="E - E_exact", title="error")
        for ax in (ax_e, ax_err):
            ax.grid(alpha=0.3)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    n = args.n_qubits
    H = tfim_hamiltonian(n, args.J, args.h, args.periodic)
    exact = exact_ground_energy(H, n)
    energy, per_layer = make_energy(H, n, args.ansatz, args.diff_method)
    weights = (INIT_SCALE * torch.randn(args.n_layers, *per_layer, dtype=torch.float64)).requires_grad_()
    opt = torch.optim.Adam([weights], lr=args.lr)

    start = time.perf_counter()
    energies = []
    bar = progress(args.epochs, "vqe", "step", args.quiet)
    for _ in bar:
        opt.zero_grad()
        e = energy(weights)
        e.backward()
        opt.step()
        energies.append(e.item())
        bar.set_postfix(energy=f"{energies[-1]:.5f}", error=f"{energies[-1] - exact:.1e}")
    with torch.no_grad():
        final = energy(weights).item()
    energies.append(final)
    elapsed = time.perf_counter() - start

    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "qnode_vqe.png"
    bc = "periodic" if args.periodic else "open"
    plot(energies, exact, png, f"{n}-qubit TFIM ({bc}, J={args.J}, h={args.h}), {args.ansatz} x {args.n_layers}")
    result = {
        "energy": final,
        "exact": exact,
        "error": final - exact,
        "relative_error": abs(final - exact) / abs(exact),
        "seconds": elapsed,
        "plot": png,
    }
    print(
        f"TFIM VQE: energy {final:.6f}, exact {exact:.6f}, error {result['error']:.2e} "
        f"(relative {result['relative_error']:.1e}) after {args.epochs} steps in {elapsed:.1f} s; plot: {png}"
    )
    return result


if __name__ == "__main__":
    main()

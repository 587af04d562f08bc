"""A pure variational quantum classifier with data re-uploading on scikit-learn's ``make_moons``.

No classical layers: the two features are scaled into angles and written into a 2-qubit circuit again
before every one of the strongly entangling layers (``ExpQLayer(..., reupload=True)``); the class
probability is read off one qubit, ``p(class 1) = (1 - <Z_0>) / 2``, and trained with binary cross-entropy.

    python examples/train_moons_vqc.py                # about 20 s on a laptop CPU
    python examples/train_moons_vqc.py --n-layers 8 --epochs 60 --out /tmp/moons

Saves ``train_moons_vqc.png`` (decision boundary over the test points, and the loss curve) next to this
script or in ``--out`` and prints the final test accuracy.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pennylane as qml
import torch

import qhybrid
from _training import batches, figure, progress

GRID_POINTS = 80
"""Resolution of the decision-boundary plot along each axis (one batched circuit execution)."""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--n-qubits", type=int, default=2)
    p.add_argument("--n-layers", type=int, default=6)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--noise", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


class MoonsVQC(torch.nn.Module):
    """Features -> angles (a fixed affine map fitted on the training data) -> re-uploading circuit -> p(1)."""

    def __init__(self, n_qubits: int, n_layers: int, low: torch.Tensor, high: torch.Tensor):
        super().__init__()
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self.circuit = qhybrid.ExpQLayer(
            n_qubits,
            n_layers,
            encoding="angle",
            rotation="Y",
            ansatz="strongly-entangling",
            observables=[qml.Z(0)],
            n_features=2,
            reupload=True,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        angles = math.pi * (x - self.low) / (self.high - self.low)  # training data spans [0, pi]
        return (1 - self.circuit(angles)[..., 0]) / 2


def load_data(samples: int, noise: float, seed: int):
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    X, y = make_moons(samples, noise=noise, random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    t = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return t(X_tr), t(y_tr), t(X_te), t(y_te)


def accuracy(model, X, y) -> float:
    with torch.no_grad():
        return ((model(X) > 0.5).float() == y).float().mean().item()


def plot(model, X_tr, y_tr, X_te, y_te, losses, path: Path, title: str) -> None:
    X_all = torch.cat([X_tr, X_te])
    lo, hi = X_all.min(0).values - 0.5, X_all.max(0).values + 0.5
    gx, gy = torch.meshgrid(
        torch.linspace(lo[0], hi[0], GRID_POINTS), torch.linspace(lo[1], hi[1], GRID_POINTS), indexing="xy"
    )
    with torch.no_grad():
        p = model(torch.stack([gx.reshape(-1), gy.reshape(-1)], -1)).reshape(gx.shape)

    with figure(path, title, ncols=2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [1.3, 1]}) as (fig, (ax_b, ax_l)):
        cs = ax_b.contourf(gx, gy, p, levels=20, cmap="RdBu_r", alpha=0.7, vmin=0, vmax=1)
        ax_b.contour(gx, gy, p, levels=[0.5], colors="k", linewidths=1.5)
        fig.colorbar(cs, ax=ax_b, label="p(class 1)")
        for X, y, marker, name in [(X_tr, y_tr, "o", "train"), (X_te, y_te, "^", "test")]:
            ax_b.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", marker=marker, edgecolors="k", s=25, label=name)
        ax_b.set(title="decision boundary", xlabel="x1", ylabel="x2")
        ax_b.legend(loc="lower left")
        ax_l.plot(np.arange(1, len(losses) + 1), losses)
        ax_l.set(title="training loss", xlabel="epoch", ylabel="binary cross-entropy")
        ax_l.grid(alpha=0.3)

def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    X_tr, y_tr, X_te, y_te = load_data(args.samples, args.noise, args.seed)
    model = MoonsVQC(args.n_qubits, args.n_layers, X_tr.min(0).values, X_tr.max(0).values)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = batches(X_tr, y_tr, args.batch_size, args.seed)

    losses = []
    bar = progress(args.epochs, "moons", "epoch", args.quiet)
    for _ in bar:
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy(model(xb).clamp(1e-6, 1 - 1e-6), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
        losses.append(total / len(y_tr))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    elapsed = time.perf_counter() - start

    result = {
        "test_accuracy": accuracy(model, X_te, y_te),
        "train_accuracy": accuracy(model, X_tr, y_tr),
        "final_loss": losses[-1] if losses else float("nan"),
        "seconds": elapsed,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "train_moons_vqc.png"
    title = (
        f"{args.n_qubits}-qubit re-uploading VQC, {args.n_layers} layers: "
        f"test accuracy {result['test_accuracy']:.3f}"
    )
    plot(model, X_tr, y_tr, X_te, y_te, losses, png, title)
    result["plot"] = png
    print(
        f"moons VQC: test accuracy {result['test_accuracy']:.4f} (train {result['train_accuracy']:.4f}) "
        f"in {elapsed:.1f} s; plot: {png}"
    )
    return result


if __name__ == "__main__":
    main()

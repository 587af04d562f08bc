"""Training a variational classifier under noise: the same model with and without depolarizing noise.

Iris versicolor vs virginica (scikit-learn, 4 features) is angle-encoded into 4 qubits and read from ``<Z_0>``
(``p(class 1) = (1 - <Z_0>) / 2``). The noisy model puts a ``DepolarizingChannel(p)`` on every wire after the
encoding and after every layer (``ExpQLayer(..., noise=p)``): its circuit runs on qhybrid.tensornet's
density-matrix engine with exact gradients. Both models start from the same weights and see the same batches.

    python examples/train_noisy_vqc.py                 # a few seconds
    python examples/train_noisy_vqc.py --noise 0.1 --epochs 30

Saves ``train_noisy_vqc.png`` (loss and test accuracy per epoch, noisy vs noiseless) in ``examples/out/`` or
``--out`` and prints both final accuracies.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import pennylane as qml
import torch
from tqdm import tqdm

import qhybrid
from _training import figure


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--noise", type=float, default=0.05, help="depolarizing probability per wire and layer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out", help="folder for the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


class IrisVQC(torch.nn.Module):
    """Standardised features -> angles -> 4-qubit circuit (optionally noisy) -> p(class 1)."""

    def __init__(self, n_layers: int, noise: float | None):
        super().__init__()
        self.circuit = qhybrid.ExpQLayer(4, n_layers, observables=[qml.Z(0)], noise=noise)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (1 - self.circuit(x)[..., 0]) / 2


def load_data(seed: int):
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    X, y = load_iris(return_X_y=True)
    keep = y > 0  # versicolor (1) vs virginica (2): the pair that is not linearly separable
    X, y = X[keep], (y[keep] == 2).astype(float)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    mean, std = X_tr.mean(0), X_tr.std(0)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return t((X_tr - mean) / std), t(y_tr), t((X_te - mean) / std), t(y_te)


def accuracy(model, X, y) -> float:
    with torch.no_grad():
        return ((model(X) > 0.5).double() == y).double().mean().item()


def train(model, data, args, label: str) -> tuple[list, list]:
    X_tr, y_tr, X_te, y_te = data
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    order = torch.Generator().manual_seed(args.seed)
    losses, accs = [], []
    for _ in tqdm(range(args.epochs), desc=label, unit="epoch", disable=args.quiet):
        perm, total = torch.randperm(len(y_tr), generator=order), 0.0
        for start in range(0, len(y_tr), args.batch_size):
            idx = perm[start : start + args.batch_size]
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy(model(X_tr[idx]).clamp(1e-9, 1 - 1e-9), y_tr[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        losses.append(total / len(y_tr))
        accs.append(accuracy(model, X_te, y_te))
    return losses, accs


def plot(curves: dict, path: Path, title: str) -> None:
    with figure(path, title, ncols=2, figsize=(10, 4)) as (_, (ax_l, ax_a)):
        for label, (losses, accs) in curves.items():
            epochs = np.arange(1, len(losses) + 1)
            ax_l.plot(epochs, losses, marker="o", label=label)
            ax_a.plot(epochs, accs, marker="o", label=label)
        ax_l.set(title="training loss", xlabel="epoch", ylabel="binary cross-entropy")
        ax_a.set(title="test accuracy", xlabel="epoch", ylabel="accuracy", ylim=(0, 1.05))
        for ax in (ax_l, ax_a):
            ax.grid(alpha=0.3)
            ax.legend()


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    data = load_data(args.seed)
    noiseless = IrisVQC(args.n_layers, None).double()
    noisy = IrisVQC(args.n_layers, args.noise).double()
    noisy.load_state_dict(copy.deepcopy(noiseless.state_dict()))  # the same starting weights
    curves = {
        "noiseless": train(noiseless, data, args, "noiseless"),
        f"depolarizing p={args.noise}": train(noisy, data, args, "noisy"),
    }
    elapsed = time.perf_counter() - start
    (loss_0, acc_0), (loss_1, acc_1) = curves.values()
    result = {
        "noiseless_accuracy": acc_0[-1] if acc_0 else float("nan"),
        "noisy_accuracy": acc_1[-1] if acc_1 else float("nan"),
        "noiseless_loss": loss_0[-1] if loss_0 else float("nan"),
        "noisy_loss": loss_1[-1] if loss_1 else float("nan"),
        "seconds": elapsed,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "train_noisy_vqc.png"
    plot(curves, png, f"4-qubit VQC on iris, {args.n_layers} layers: noiseless vs depolarizing p={args.noise}")
    result["plot"] = png
    print(
        f"noisy VQC: test accuracy {result['noisy_accuracy']:.3f} noisy, {result['noiseless_accuracy']:.3f} "
        f"noiseless, in {elapsed:.1f} s; plot: {png}"
    )
    return result


if __name__ == "__main__":
    main()

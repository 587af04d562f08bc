"""Hybrid classifier on scikit-learn's bundled digits: nn.Linear -> ExpQLayer -> nn.Linear.

Two digit classes (default 0 vs 1) are reduced to one feature per qubit by PCA and scaled into rotation
angles in [0, pi]; a 4-qubit, 2-layer ExpQLayer sits between two classical linear layers and the whole
model trains end to end with Adam (gradients of the circuit by the tensor-network adjoint method).

    python examples/train_digits.py                 # about 10 s on a laptop CPU
    python examples/train_digits.py --classes 3 8 --epochs 30 --out /tmp/digits

Saves ``train_digits.png`` (loss and accuracy per epoch) next to this script or in ``--out`` and prints
the final test accuracy.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

import qhybrid
from _training import batches, plot_history, train_classifier


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--n-qubits", type=int, default=4)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--classes", type=int, nargs=2, default=[0, 1], metavar=("A", "B"))
    p.add_argument("--test-size", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def load_data(classes, n_features: int, test_size: float, seed: int):
    """Digits of two classes as PCA features scaled into [0, pi]; labels 0/1. Fitted on train only."""
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, classes)
    X, y = X[keep], (y[keep] == classes[1]).astype(np.int64)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_size, stratify=y, random_state=seed)
    prep = make_pipeline(
        StandardScaler(), PCA(n_components=n_features, random_state=seed), MinMaxScaler((0.0, math.pi))
    )
    X_tr, X_te = prep.fit_transform(X_tr), prep.transform(X_te)
    as_t = lambda a, dt: torch.as_tensor(a, dtype=dt)  # noqa: E731
    return as_t(X_tr, torch.float32), as_t(y_tr, torch.long), as_t(X_te, torch.float32), as_t(y_te, torch.long)


def build_model(n_qubits: int, n_layers: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(n_qubits, n_qubits),
        qhybrid.ExpQLayer(n_qubits, n_layers, encoding="angle", rotation="Y"),
        nn.Linear(n_qubits, 2),
    )


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    X_tr, y_tr, X_te, y_te = load_data(args.classes, args.n_qubits, args.test_size, args.seed)
    model = build_model(args.n_qubits, args.n_layers)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = batches(X_tr, y_tr, args.batch_size, args.seed)
    history, _ = train_classifier(model, loader, opt, args.epochs, (X_te, y_te), desc="digits", quiet=args.quiet)
    elapsed = time.perf_counter() - start

    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "train_digits.png"
    a, b = args.classes
    plot_history(history, png, f"digits {a} vs {b}: {args.n_qubits}-qubit ExpQLayer between nn.Linear layers")
    result = {
        "test_accuracy": history["test_acc"][-1],
        "train_accuracy": history["train_acc"][-1],
        "test_loss": history["test_loss"][-1],
        "seconds": elapsed,
        "plot": png,
    }
    print(
        f"digits {a} vs {b}: test accuracy {result['test_accuracy']:.4f} "
        f"(train {result['train_accuracy']:.4f}, {len(y_tr)} train / {len(y_te)} test samples) "
        f"in {elapsed:.1f} s; plot: {png}"
    )
    return result


if __name__ == "__main__":
    main()

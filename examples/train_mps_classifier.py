"""A 40-wire data re-uploading classifier on scikit-learn's breast-cancer data, simulated as a matrix
product state (``method="mps"``): a width no state vector reaches, trained with torch gradients through
the truncated SVDs.

The 30 standardised features are mapped to 40 angles by a linear layer, written into the circuit before
every entangling layer (RY per wire, then trainable Rot gates and a CNOT brickwork); the class logit is a
linear read-out of four ``<Z_i>``. The bond dimension cap ``--chi`` keeps each step cheap; the truncation of
each step (discarded weight) is printed beside the loss.

    python examples/train_mps_classifier.py                 # about 1-2 minutes on a laptop CPU
    python examples/train_mps_classifier.py --chi 32 --epochs 6 --out /tmp/mps

Saves ``train_mps_classifier.png`` (loss and discarded weight per step) next to this script (examples/out/)
or in ``--out`` and prints the test accuracy.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pennylane as qml
import torch
from tqdm import tqdm

import qhybrid
from _training import figure
from qhybrid.devices.tensornet.engines.mps import TruncationWarning


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--n-qubits", type=int, default=40)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--chi", type=int, default=8, help="max_bond_dim of the MPS")
    p.add_argument("--limit", type=int, default=256, help="training samples used (of 398)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out", help="folder for the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


READOUT_WIRES = 4
"""<Z_i> of this many wires (spread over the chain) feed the linear read-out."""


def make_circuit(n: int, layers: int, dev):
    readout = [int(i) for i in np.linspace(0, n - 1, READOUT_WIRES)]

    @qhybrid.qnode(dev, diff_method="backprop")
    def circuit(angles, weights):
        for layer in range(layers):
            for i in range(n):
                qml.RY(angles[..., i], wires=i)
            for i in range(n):
                qml.Rot(*weights[layer, i], wires=i)
            for start in (0, 1):
                for i in range(start, n - 1, 2):
                    qml.CNOT([i, i + 1])
        return [qml.expval(qml.PauliZ(i)) for i in readout]

    return circuit


class MPSClassifier(torch.nn.Module):
    def __init__(self, n_features: int, n_qubits: int, n_layers: int, dev):
        super().__init__()
        self.encode = torch.nn.Linear(n_features, n_qubits, dtype=torch.float64)
        self.weights = torch.nn.Parameter(0.1 * torch.randn(n_layers, n_qubits, 3, dtype=torch.float64))
        self.read = torch.nn.Linear(READOUT_WIRES, 1, dtype=torch.float64)
        self.circuit = make_circuit(n_qubits, n_layers, dev)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        angles = torch.pi * torch.tanh(self.encode(x))
        z = torch.stack(self.circuit(angles, self.weights), -1)
        return self.read(z).squeeze(-1)


def load_data(seed: int, limit: int):
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    scaler = StandardScaler().fit(X_tr)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return t(scaler.transform(X_tr))[:limit], t(y_tr)[:limit], t(scaler.transform(X_te)), t(y_te)


def plot(losses, discarded, path: Path, title: str) -> None:
    with figure(path, figsize=(7, 4)) as (fig, ax):
        steps = np.arange(1, len(losses) + 1)
        ax.plot(steps, losses, label="loss")
        ax.set(xlabel="step", ylabel="binary cross-entropy", title=title)
        ax.grid(alpha=0.3)
        twin = ax.twinx()
        twin.plot(steps, discarded, color="tab:orange", alpha=0.6, label="discarded weight")
        twin.set_ylabel("discarded weight (MPS truncation)")
        fig.legend(loc="upper right")


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    X_tr, y_tr, X_te, y_te = load_data(args.seed, args.limit)
    dev = qhybrid.device("tensornet", wires=args.n_qubits, method="mps", max_bond_dim=args.chi)
    model = MPSClassifier(X_tr.shape[1], args.n_qubits, args.n_layers, dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X_tr, y_tr),
        batch_size=args.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed),
    )
    losses, discarded = [], []
    bar = tqdm(total=args.epochs * len(loader), desc="mps classifier", unit="step", disable=args.quiet)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)  # reported per step instead
        for _ in range(args.epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                discarded.append(dev.last_truncation.discarded_weight)
                bar.update()
                bar.set_postfix(loss=f"{losses[-1]:.3f}", discarded=f"{discarded[-1]:.1e}")
        bar.close()
        with torch.no_grad():
            test_accuracy = ((model(X_te) > 0).double() == y_te).double().mean().item()
    elapsed = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "train_mps_classifier.png"
    title = f"{args.n_qubits}-wire MPS classifier (chi={args.chi}): test accuracy {test_accuracy:.3f}"
    plot(losses, discarded, png, title)
    print(f"MPS classifier: test accuracy {test_accuracy:.4f} in {elapsed:.1f} s; plot: {png}")
    return {
        "test_accuracy": test_accuracy,
        "final_loss": losses[-1] if losses else float("nan"),
        "max_discarded": max(discarded) if discarded else 0.0,
        "seconds": elapsed,
        "plot": png,
    }


if __name__ == "__main__":
    main()

"""Train a small variational classifier on Qiskit Aer with shots, gradients by parameter-shift.

Two-moons data (scikit-learn), two qubits: the features are angle-embedded, two strongly entangling
layers follow, and <Z0> gives the class probability. Every minibatch is one broadcast circuit, so a
training step is two Aer jobs: the forward pass and all parameter-shift runs of the step.

    python examples/aer_shots_training.py --epochs 20 --shots 1000 --out moons.png
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pennylane as qml
import torch
from tqdm import tqdm

import qhybrid

N_QUBITS = 2
N_LAYERS = 2


def make_data(n_samples: int, seed: int):
    """Two moons, features scaled to [0, pi], split 75/25 into train and test."""
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=n_samples, noise=0.1, random_state=seed)
    x = (x - x.min(0)) / (x.max(0) - x.min(0)) * math.pi
    x, y = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    n_train = int(0.75 * n_samples)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def make_classifier(dev):
    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def circuit(x, weights):
        qml.AngleEmbedding(x, wires=range(N_QUBITS), rotation="Y")
        qml.StronglyEntanglingLayers(weights, wires=range(N_QUBITS))
        return qml.expval(qml.Z(0))

    def probability(x, weights):
        return (1 - circuit(x, weights)) / 2  # P(class 1) = P(qubit 0 reads 1)

    return probability


def accuracy(p: torch.Tensor, y: torch.Tensor) -> float:
    return ((p > 0.5).to(y.dtype) == y).double().mean().item()


def plot(history: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = range(1, len(history["loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(epochs, history["loss"], marker="o")
    ax1.set(xlabel="epoch", ylabel="training loss (BCE)", title="loss")
    ax2.plot(epochs, history["train_acc"], marker="o", label="train")
    ax2.plot(epochs, history["test_acc"], marker="s", label="test")
    ax2.set(xlabel="epoch", ylabel="accuracy", ylim=(0, 1.05), title="accuracy")
    ax2.legend()
    fig.suptitle("VQC on Aer with shots, parameter-shift gradients")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("aer_shots_training.png"), help="where the plot goes")
    parser.add_argument("--shots", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=120, help="data set size (train and test)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    """Train, save the loss/accuracy plot to ``--out``, and return the per-epoch history."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    (x_train, y_train), (x_test, y_test) = make_data(args.samples, args.seed)
    dev = qhybrid.device("aer", wires=N_QUBITS, shots=args.shots, seed=args.seed)
    classify = make_classifier(dev)
    shape = qml.StronglyEntanglingLayers.shape(n_layers=N_LAYERS, n_wires=N_QUBITS)
    weights = (0.1 * torch.randn(shape, dtype=torch.float64)).requires_grad_(True)
    opt = torch.optim.Adam([weights], lr=args.lr)
    loss_fn = torch.nn.BCELoss()
    history: dict[str, list[float]] = {"loss": [], "train_acc": [], "test_acc": []}
    bar = tqdm(range(args.epochs), desc="epochs")
    for _ in bar:
        order = torch.randperm(len(x_train))
        losses = []
        for start in range(0, len(order), args.batch_size):
            idx = order[start : start + args.batch_size]
            opt.zero_grad()
            p = classify(x_train[idx], weights).clamp(1e-6, 1 - 1e-6)  # shot noise can reach 0 or 1
            loss = loss_fn(p, y_train[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            history["loss"].append(float(np.mean(losses)))
            history["train_acc"].append(accuracy(classify(x_train, weights), y_train))
            history["test_acc"].append(accuracy(classify(x_test, weights), y_test))
        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", test_acc=f"{history['test_acc'][-1]:.2f}")
    plot(history, args.out)
    history["jobs"] = dev.job_count
    return history


if __name__ == "__main__":
    main()

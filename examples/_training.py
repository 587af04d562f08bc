"""The plumbing the examples share, so each example reads as its model: mini-batches, a training loop with
a progress bar, the history of loss and accuracy, and saving a figure.

    from _training import batches, figure, plot_history, progress, train_classifier

(Examples run as scripts, so this folder is on ``sys.path``; the tests add it too.)
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

DPI = 120
"""Resolution of the saved PNGs."""


def batches(X: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int) -> torch.utils.data.DataLoader:
    """Shuffled mini-batches of ``(X, y)``, in the same order for the same ``seed``."""
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )


def progress(n: int, desc: str, unit: str, quiet: bool) -> tqdm:
    """A progress bar over ``range(n)`` (silent with ``--quiet``)."""
    return tqdm(range(n), desc=desc, unit=unit, disable=quiet)


def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float, torch.Tensor]:
    """Cross-entropy, accuracy and predicted labels of a classifier on one split (one broadcast execution)."""
    with torch.no_grad():
        logits = model(X)
        pred = logits.argmax(-1)
        return nn.functional.cross_entropy(logits, y).item(), (pred == y).float().mean().item(), pred


def train_classifier(
    model: nn.Module,
    loader: torch.utils.data.DataLoader,
    opt: torch.optim.Optimizer,
    epochs: int,
    test: tuple[torch.Tensor, torch.Tensor],
    *,
    desc: str,
    quiet: bool,
    sched=None,
    loss_fn: Callable = nn.functional.cross_entropy,
) -> tuple[dict, torch.Tensor]:
    """Train a classifier for ``epochs`` (a bar over its batches) and return its history and the last test
    predictions. ``history`` holds ``train_loss``, ``train_acc``, ``test_loss``, ``test_acc`` per epoch,
    entry 0 the untrained model; an epoch's training figures are running means over its batches."""
    history: dict[str, list[float]] = {"train_loss": [], "test_loss": [], "train_acc": [], "test_acc": []}
    X_tr, y_tr = loader.dataset.tensors

    def record(train_loss: float, train_acc: float) -> torch.Tensor:
        model.eval()
        loss, acc, pred = evaluate(model, *test)
        for key, value in (("train_loss", train_loss), ("train_acc", train_acc), ("test_loss", loss), ("test_acc", acc)):
            history[key].append(value)
        return pred

    pred = record(*evaluate(model, X_tr, y_tr)[:2])
    bar = tqdm(total=epochs * len(loader), desc=desc, unit="batch", disable=quiet)
    for _ in range(epochs):
        model.train()
        seen = total_loss = correct = 0
        for xb, yb in loader:
            opt.zero_grad()
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            seen += len(yb)
            total_loss += loss.item() * len(yb)
            correct += (logits.argmax(-1) == yb).sum().item()
            bar.update()
            bar.set_postfix(loss=f"{loss.item():.3f}", test_acc=f"{history['test_acc'][-1]:.3f}")
        if sched is not None:
            sched.step()
        pred = record(total_loss / seen, correct / seen)
    bar.close()
    return history, pred


@contextlib.contextmanager
def figure(path: Path, title: str | None = None, ncols: int = 1, figsize=(6, 4), **subplots):
    """Axes to draw on (one, or ``ncols`` of them), saved to ``path`` as a PNG on leaving the block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=figsize, **subplots)
    try:
        yield fig, axes
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def plot_history(history: dict, path: Path, title: str, loss_label: str = "cross-entropy") -> None:
    """Loss and accuracy per epoch, train beside test (``history`` as :func:`train_classifier` returns it)."""
    epochs = np.arange(len(history["train_loss"]))  # 0 is before training
    with figure(path, title, ncols=2, figsize=(10, 4)) as (_, (ax_loss, ax_acc)):
        for split in ("train", "test"):
            ax_loss.plot(epochs, history[f"{split}_loss"], label=split)
            ax_acc.plot(epochs, history[f"{split}_acc"], label=split)
        ax_loss.set(xlabel="epoch", ylabel=loss_label, title="loss")
        ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(0, 1.02))
        for ax in (ax_loss, ax_acc):
            ax.legend()
            ax.grid(alpha=0.3)

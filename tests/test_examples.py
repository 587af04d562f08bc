"""Smoke tests of the example scripts: each runs for one or two epochs and writes its plot to tmp_path."""

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digits_learns(result):
    assert result["test_accuracy"] >= 0.9  # 0 vs 1 is nearly separable after one epoch


def digits10_confusion_counts_the_test_set(result):
    matrix = result["confusion"]
    assert matrix.shape == (10, 10) and matrix.sum() > 0
    assert matrix.trace() / matrix.sum() == pytest.approx(result["test_accuracy"])
    assert result["confusion_plot"].exists() and result["confusion_plot"].stat().st_size > 1000


def vqe_is_variational(result):
    assert result["exact"] == pytest.approx(-7.296229810558761, abs=1e-9)  # 6-site open chain, J = h = 1
    assert result["energy"] >= result["exact"] - 1e-9


def noise_costs_accuracy_or_loss(result):
    assert 0.0 <= result["noisy_accuracy"] <= 1.0
    assert result["noisy_loss"] != result["noiseless_loss"]  # the noisy model did run with its channels


@pytest.mark.parametrize(
    "name, argv, png, check",
    [
        ("train_digits", ["--epochs", "1"], "train_digits.png", digits_learns),
        (
            "train_digits10",
            ["--epochs", "1", "--limit", "300", "--n-qubits", "6", "--n-layers", "2"],
            "train_digits10_curves.png",
            digits10_confusion_counts_the_test_set,
        ),
        ("train_moons_vqc", ["--epochs", "1", "--samples", "60", "--n-layers", "2"], "train_moons_vqc.png", None),
        ("qnode_vqe", ["--epochs", "2", "--n-layers", "1"], "qnode_vqe.png", vqe_is_variational),
        (
            "train_mps_classifier",
            ["--epochs", "1", "--limit", "32", "--batch-size", "16", "--n-qubits", "8", "--n-layers", "1", "--chi", "4"],
            "train_mps_classifier.png",
            None,
        ),
        ("train_noisy_vqc", ["--epochs", "1", "--n-layers", "1"], "train_noisy_vqc.png", noise_costs_accuracy_or_loss),
    ],
)
def test_example_runs_and_saves_its_plot(name, argv, png, check, tmp_path, capsys):
    result = load_example(name).main([*argv, "--out", str(tmp_path), "--quiet"])
    path = tmp_path / png
    assert path.exists() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["plot"] == path
    assert all(math.isfinite(v) for v in result.values() if isinstance(v, float))
    assert str(path) in capsys.readouterr().out
    if check is not None:
        check(result)

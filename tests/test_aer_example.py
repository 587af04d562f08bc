"""Smoke test of examples/aer_shots_training.py: one short epoch into a temporary folder."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "aer_shots_training.py"


def test_one_epoch_writes_the_plot(tmp_path):
    spec = importlib.util.spec_from_file_location("aer_shots_training", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "curves.png"
    history = module.main(["--epochs", "1", "--out", str(out), "--samples", "40", "--shots", "200"])
    assert out.exists() and out.stat().st_size > 0
    assert len(history["loss"]) == len(history["test_acc"]) == 1
    assert 0.0 <= history["test_acc"][0] <= 1.0
    steps = 2  # 30 training samples in batches of 16
    assert history["jobs"] == 2 * steps + 2  # forward + shifted runs per step, then two evaluations

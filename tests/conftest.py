"""Shared fixtures: seeded randomness and the GPU marker's skip.

Tests mirror the package: devices/tensornet, devices/aer, plugin (the PennyLane device face), gradients,
interfaces, layers; whole-library checks (README, examples, demos, layering, errors) stay at the top. The
shared reference helpers (_circuits, _layer_reference, _graph_reference) live here, importable from every
folder."""

import sys
import warnings
from pathlib import Path

import pennylane as qml
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1] / "examples"))  # the examples' shared _training.py


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine (GPU tests run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture(autouse=True)
def _private_path_cache(tmp_path, monkeypatch):
    """Contraction paths kept on disk stay within one test (never read from, or written to, ~/.cache)."""
    monkeypatch.setenv("QHYBRID_CACHE_DIR", str(tmp_path / "qhybrid-cache"))


@pytest.fixture
def quiet_pennylane():
    """PennyLane's deprecation warnings silenced (tests that drive its old-style device API on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qml.exceptions.PennyLaneDeprecationWarning)
        yield

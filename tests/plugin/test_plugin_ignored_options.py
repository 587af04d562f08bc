"""PennyLane options qhybrid.tensornet serves another way are said, once per process each (issue 20, item 8):
under ``diff_method="adjoint"`` derivatives are always device VJPs in the backward pass, so
``grad_on_execution=True`` and ``device_vjp=False`` are not used."""

from __future__ import annotations

import warnings

import pennylane as qml
import pytest
import torch

from qhybrid.devices.tensornet.plugin import config as _pl_config
from qhybrid.errors import QhybridWarning

NAME = "qhybrid.tensornet"


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch):
    monkeypatch.setattr(_pl_config, "_WARNED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qml.exceptions.PennyLaneDeprecationWarning)
        yield


def _run(**kwargs):
    @qml.qnode(qml.device(NAME, wires=1), interface="torch", **kwargs)
    def f(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x).backward()
    assert abs(x.grad.item() + 0.29552020666133955) < 1e-12  # the derivatives are the same
    return [str(w.message) for w in caught if issubclass(w.category, QhybridWarning)]


@pytest.mark.parametrize(
    "kwargs,option",
    [
        ({"diff_method": "adjoint", "grad_on_execution": True, "device_vjp": True}, "grad_on_execution=True"),
        ({"diff_method": "adjoint", "device_vjp": False}, "device_vjp=False"),
        ({"diff_method": "adjoint"}, "device_vjp=False"),  # PennyLane's default cannot be told apart
    ],
)
def test_each_ignored_option_warns_once_per_process(kwargs, option):
    (first,) = _run(**kwargs)
    assert option in first and "device VJPs" in first
    assert _run(**kwargs) == []  # once per process
    assert _run(**kwargs) == []


def test_both_options_warn_once_each():
    notes = _run(diff_method="adjoint", grad_on_execution=True, device_vjp=False)
    assert len(notes) == 2 and {"grad_on_execution=True", "device_vjp=False"} <= {
        o for o in ("grad_on_execution=True", "device_vjp=False") for n in notes if o in n
    }
    assert _run(diff_method="adjoint", grad_on_execution=True, device_vjp=False) == []


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"diff_method": "best"}, {"diff_method": "adjoint", "device_vjp": True}, {"diff_method": "backprop"},
     {"diff_method": "parameter-shift"}],
)
def test_options_that_are_honoured_say_nothing(kwargs):
    assert _run(**kwargs) == []


def test_readme_gradient_table_says_so():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("## Choosing `diff_method`")
    table = readme[start : readme.index("\n## ", start + 1)]
    assert "grad_on_execution=True" in table and "device_vjp=False" in table

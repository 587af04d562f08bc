"""qhybrid.testing: each kind of host touch is seen, named and placed; device work passes."""

import doctest

import numpy as np
import pytest
import torch

import qhybrid.testing
from qhybrid.testing import assert_no_host_touches, host_touches

X = torch.linspace(0.1, 0.9, 6, dtype=torch.float64)
CONSTANT = torch.tensor([1.0, -1.0], dtype=torch.float64)  # made before the step: a cached constant


@pytest.mark.parametrize(
    "step, kind, op",
    [
        (lambda: X.sum().item(), "host read", "_local_scalar_dense"),
        (lambda: bool(torch.any(X > 0.5)), "host read", "_local_scalar_dense"),
        (lambda: float(X[0]), "host read", "_local_scalar_dense"),
        (lambda: X.tolist(), "host read", "tolist"),
        (lambda: X.numpy(), "host read", "numpy"),
        (lambda: torch.equal(X, X), "host read", "equal"),
        (lambda: torch.allclose(X, X), "host read", "allclose"),
        (lambda: X * torch.tensor([-1j, 1j]).repeat(3), "host data", "lift_fresh"),
        (lambda: torch.as_tensor(np.ones(6)) + X, "host data", "lift_fresh"),
        (lambda: X.new_tensor([2.0]) * X, "host data", "lift_fresh"),
        (lambda: X[[0, 2]], "host data", "lift_fresh"),
        (lambda: torch.nonzero(X > 0.5), "data-dependent shape", "nonzero"),
        (lambda: torch.unique(X), "data-dependent shape", "_unique2"),
        (lambda: torch.unique(X.view(3, 2), dim=0), "data-dependent shape", "unique_dim"),
        (lambda: torch.masked_select(X, X > 0.5), "data-dependent shape", "masked_select"),
        (lambda: X[X > 0.5], "data-dependent shape", "index (boolean mask)"),
        (lambda: X.repeat_interleave((X > 0.5).long()), "data-dependent shape", "repeat_interleave"),
        (lambda: CONSTANT.to(X.device) * X[:2], "device move", "Tensor.to(device)"),
        (lambda: torch.as_tensor(CONSTANT, device=X.device), "device move", "torch.as_tensor(device=)"),
    ],
)
def test_each_kind_of_host_touch_is_named_with_its_line(step, kind, op):
    touches = host_touches(step, warmup=0)
    assert (kind, op) in {(t.kind, t.op) for t in touches}
    assert all(t.where.startswith("tests/test_testing.py:") for t in touches), touches
    with pytest.raises(AssertionError, match=kind):
        assert_no_host_touches(step, warmup=0)


@pytest.mark.parametrize(
    "step",
    [
        lambda: (X * 2.0).sin().sum(),
        lambda: torch.where(X > 0.5, X, 0.0),  # a Python scalar operand is a fill, not host data
        lambda: torch.full((3,), 1j) * torch.zeros(3, dtype=torch.complex128),
        lambda: torch.nonzero_static(X > 0.5, size=6),
        lambda: X.to(torch.complex128),  # a dtype change is device work
        lambda: (X * 3).to(X.device),  # a tensor made in the step is already on its device
        lambda: X.repeat_interleave(2),
        lambda: X[torch.arange(3)],
        lambda: torch.rand(4, dtype=torch.float64).multinomial(2),  # random draws on the device are fine
    ],
)
def test_device_work_passes(step):
    assert_no_host_touches(step, warmup=0)


def test_inputs_and_parameters_may_move_to_the_device_and_warmup_is_not_counted():
    x = torch.ones(3)
    w = torch.ones(3, requires_grad=True)
    assert_no_host_touches(lambda: x.to(w.device) * w.to(x.device), inputs=(x,))
    calls = []

    def step():
        calls.append(1)
        if len(calls) <= 2:  # the first calls plan (and may read the host)
            x.sum().item()
        return x * 2

    assert_no_host_touches(step, warmup=2)


def test_the_module_examples_run():
    result = doctest.testmod(qhybrid.testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0

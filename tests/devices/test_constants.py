"""Per-device constants (``_constants``): made once, kept while their table lives, exact values."""

import doctest
import gc
import weakref

import torch

from qhybrid.devices import _constants
from qhybrid.devices._constants import literal, on_device


def test_a_table_is_copied_once_per_device_and_dtype_and_dropped_with_it():
    table = torch.tensor([1.0, -1.0], dtype=torch.float64)
    cpu = torch.device("cpu")
    assert on_device(table, cpu) is table  # nothing to change: the table itself
    a = on_device(table, cpu, torch.complex128)
    assert a is on_device(table, "cpu", torch.complex128) and a.dtype == torch.complex128
    assert torch.equal(a.real, table)
    assert len(_constants._COPIES) >= 1
    n = len(_constants._COPIES)
    alive = weakref.ref(table)
    del table, a
    gc.collect()  # other tests' dead tables may go with it: the count drops by at least one
    assert alive() is None and len(_constants._COPIES) <= n - 1


def test_literals_are_made_once_and_keep_signed_zeros_apart():
    a = literal((-1j, 1j), "cpu", torch.complex128)
    assert a is literal((-1j, 1j), torch.device("cpu"), torch.complex128)
    assert a.tolist() == [-1j, 1j]
    assert torch.signbit(literal((-0.0,), "cpu", torch.float64)).item()
    assert not torch.signbit(literal((0.0,), "cpu", torch.float64)).item()


def test_the_module_examples_run():
    result = doctest.testmod(_constants)
    assert result.attempted >= 3 and result.failed == 0

"""Slices of sliced contractions spread over torch.distributed ranks (engines/network/slice_spread.py): two
gloo processes return, on both ranks, the values and gradients of one process and of default.qubit, each
rank contracting only its share of the slices (uneven shares and ranks with none included)."""

import warnings
from pathlib import Path

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone import spread
from qhybrid.devices.tensornet.engines.network.slice_spread import slice_share
from qhybrid.errors import QhybridWarning, UnsupportedOperationError

import _slice_spread_worker as worker
from _gloo_ranks import run_ranks

ATOL = 1e-10
WORLD = 2


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of two gloo ranks saved (each ran every case of the worker with spread_slices=True)."""
    return run_ranks(Path(worker.__file__).resolve(), WORLD, tmp_path_factory.mktemp("slice_spread"))


@pytest.fixture(scope="module")
def single():
    """The same cases and plans in this one process, spread off."""
    return {"cases": worker.run_cases(spread=False), "plans": worker.run_plans(spread=False)}


def _close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def _same_on_both_ranks_as_one_process(ranks, single, kind, name):
    one = single[kind][name]
    for saved in ranks:
        got = saved[kind][name]
        _close(got["values"], one["values"])
        assert len(got["grads"]) == len(one["grads"])
        for g, h in zip(got["grads"], one["grads"]):
            _close(g, h)  # summed once over the ranks: world_size x would fail here
    # every rank holds the same full result, bit for bit
    a, b = (saved[kind][name] for saved in ranks)
    assert torch.equal(a["values"], b["values"])
    for g, h in zip(a["grads"], b["grads"]):
        assert torch.equal(g, h)


@pytest.mark.parametrize("case", list(worker.CASES))
def test_both_ranks_return_the_single_process_values_and_gradients(ranks, single, case):
    _same_on_both_ranks_as_one_process(ranks, single, "cases", case)


@pytest.mark.parametrize("case", list(worker.CASES))
def test_each_rank_contracts_only_its_share_of_the_slices(ranks, case):
    (run_0, of_0), (run_1, of_1) = (saved["cases"][case]["slices"] for saved in ranks)
    assert of_0 == of_1 >= WORLD, "the case's networks did not slice: lower MAX_MEMORY in the worker"
    assert 0 < run_0 < of_0 and 0 < run_1 < of_1 and run_0 + run_1 == of_0


@pytest.mark.parametrize("case", list(worker.CASES))
def test_spread_matches_default_qubit(ranks, case):
    expected = worker.run_case(qml.device("default.qubit", wires=worker.N_WIRES), case, "backprop")
    for saved in ranks:
        got = saved["cases"][case]
        _close(got["values"], expected["values"])
        for g, h in zip(got["grads"], expected["grads"]):
            _close(g, h)


@pytest.mark.parametrize("plan", ["three_slices", "one_slice"])
def test_uneven_shares_and_a_rank_without_slices(ranks, single, plan):
    _same_on_both_ranks_as_one_process(ranks, single, "plans", plan)
    counts = [saved["plans"][plan]["slices"] for saved in ranks]
    assert counts == {"three_slices": [[2, 3], [1, 3]], "one_slice": [[1, 1], [0, 1]]}[plan]


def test_ranks_with_other_parameters_are_refused_on_every_rank(ranks):
    for saved in ranks:
        kind, message = saved["refusals"]["mismatch"]
        assert kind == "UnsupportedOperationError" and "same parameters" in message and "spread_slices" in message


def test_a_second_derivative_is_refused_on_every_rank(ranks):
    for saved in ranks:
        kind, message = saved["refusals"]["hessian"]
        assert kind == "GradientError" and "second derivative" in message and "spread_slices" in message


def test_without_torch_distributed_it_runs_here_and_warns_once(monkeypatch):
    monkeypatch.setattr(spread, "_WARNED", [])
    theta = worker.inputs()["theta"]
    with worker.forced_slicing():
        dev = qhybrid.device("tensornet", wires=worker.N_WIRES, max_memory=worker.MAX_MEMORY, path_cache=False,
                             spread_slices=True)
        f = worker.circuit(dev, "backprop")
        with pytest.warns(QhybridWarning, match="spread_slices is set but torch.distributed is not initialised"):
            first = f(theta)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            second = f(theta)
        plain = qhybrid.device("tensornet", wires=worker.N_WIRES, max_memory=worker.MAX_MEMORY, path_cache=False)
        expected = worker.circuit(plain, "backprop")(theta)
    for a, b, c in zip(first, second, expected):
        assert torch.equal(a, b)
        _close(a, c)  # (another device may plan, and slice, the network otherwise)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="spread_slices must be True"):
        qhybrid.device("tensornet", wires=2, spread_slices="slices")
    with pytest.raises(ValueError, match="cannot both be on"):
        qhybrid.device("tensornet", wires=2, spread_classes=True, spread_slices=True)


def test_shares_are_contiguous_and_balanced():
    for slices in range(0, 9):
        for world in (1, 2, 3, 5):
            shares = [slice_share(slices, world, r) for r in range(world)]
            assert [s for share in shares for s in share] == list(range(slices))
            assert max(map(len, shares)) - min(map(len, shares)) <= 1


class _FakeDist:
    """torch.distributed as spread_group sees it: initialised, two ranks, a chosen backend."""

    class group:
        WORLD = "world"

    def __init__(self, backend):
        self.backend = backend

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_world_size(self, group):
        return 2

    def get_backend(self, group):
        return self.backend


def test_a_backend_other_than_gloo_or_nccl_is_refused(monkeypatch):
    monkeypatch.setattr(spread, "_dist", lambda: _FakeDist("mpi"))
    with pytest.raises(UnsupportedOperationError, match="spread_slices runs over a gloo or nccl"):
        spread.spread_group(True, "spread_slices")

"""Cone classes spread over torch.distributed ranks (engines/lightcone/spread.py): two gloo processes on the
CPU return, on both ranks, the values and gradients of one process and of the default.qubit light-cone
reference, each rank running only its share of the classes."""

import warnings
from pathlib import Path

import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.lightcone import spread
from qhybrid.errors import QhybridWarning

import _spread_worker as worker
from _gloo_ranks import run_ranks
from _lightcone_reference import expval

ATOL = 1e-10
WORLD = 2


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of two gloo ranks saved (each ran every case of the worker with spread_classes=True)."""
    return run_ranks(Path(worker.__file__).resolve(), WORLD, tmp_path_factory.mktemp("spread"))


@pytest.fixture(scope="module")
def single():
    """The same cases in this one process, spread off."""
    return worker.run_cases(spread=False)


def _close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("case", worker.CASES)
def test_both_ranks_return_the_single_process_values_and_gradients(ranks, single, case):
    one = single[case]
    for r, saved in enumerate(ranks):
        got = saved["cases"][case]
        _close(got["values"], one["values"])
        assert len(got["grads"]) == len(one["grads"])
        for g, h in zip(got["grads"], one["grads"]):
            _close(g, h)  # summed once over the ranks: world_size x would fail here
    # every rank holds the same full result, bit for bit
    assert torch.equal(ranks[0]["cases"][case]["values"], ranks[1]["cases"][case]["values"])
    for g, h in zip(ranks[0]["cases"][case]["grads"], ranks[1]["cases"][case]["grads"]):
        assert torch.equal(g, h)


@pytest.mark.parametrize("case", worker.CASES)
def test_each_rank_runs_only_part_of_the_classes(ranks, single, case):
    counts = [saved["cases"][case]["executions"] for saved in ranks]
    assert all(0 < c < single[case]["executions"] for c in counts), (counts, single[case]["executions"])
    assert sum(counts) == single[case]["executions"]


def _reference(case):
    """Outputs and gradients of the weighted loss on default.qubit, cone by cone (no qhybrid code)."""
    args = {k: v.requires_grad_() for k, v in worker.inputs().items()}
    if case.startswith("qaoa"):
        outs = [expval(worker.qaoa_blocks(args["gamma"], args["beta"]), worker.hamiltonian())]
        names = ("gamma", "beta")
    else:
        x = args["x"] if case == "hea_batched" else None
        blocks = worker.hea_blocks(args["theta"], x)
        outs = [expval(blocks, o) for o in worker.HEA_OBSERVABLES]
        names = ("theta", "x") if x is not None else ("theta",)
    loss, flat = worker._loss(outs)
    return flat.detach(), torch.autograd.grad(loss, [args[k] for k in names])


@pytest.mark.parametrize("case", ["qaoa_adjoint", "hea_batched"])
def test_spread_matches_the_light_cone_reference(ranks, case):
    values, grads = _reference(case)
    for saved in ranks:
        got = saved["cases"][case]
        _close(got["values"], values)
        for g, h in zip(got["grads"], grads):
            _close(g, h)


def test_ranks_with_other_parameters_are_refused_on_every_rank(ranks):
    for saved in ranks:
        kind, message = saved["refusals"]["mismatch"]
        assert kind == "UnsupportedOperationError" and "same parameters" in message


def test_a_second_derivative_is_refused_on_every_rank(ranks):
    for saved in ranks:
        kind, message = saved["refusals"]["hessian"]
        assert kind == "GradientError" and "second derivative" in message


def test_without_torch_distributed_it_runs_here_and_warns_once(monkeypatch):
    monkeypatch.setattr(spread, "_WARNED", [False])
    dev = qhybrid.device("tensornet", wires=worker.N_WIRES, spread_classes=True)
    circuit, _ = worker._circuits(dev, qhybrid.qnode)["hea_backprop"]
    theta = worker.inputs()["theta"]
    with pytest.warns(QhybridWarning, match="not initialised"):
        first = circuit(theta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = circuit(theta)
    plain = qhybrid.device("tensornet", wires=worker.N_WIRES)
    expected = worker._circuits(plain, qhybrid.qnode)["hea_backprop"][0](theta)
    for a, b, c in zip(first, second, expected):
        assert torch.equal(a, c) and torch.equal(b, c)


def test_a_bad_option_is_refused():
    with pytest.raises(ValueError, match="spread_classes must be True"):
        qhybrid.device("tensornet", wires=2, spread_classes="classes")


def test_assignment_is_balanced_and_deterministic():
    costs = [40, 10, 30, 20, 20, 5]
    owner = spread.assign(costs, 2)
    assert owner == spread.assign(list(costs), 2)
    loads = [sum(c for c, r in zip(costs, owner) if r == k) for k in range(2)]
    assert sorted(loads) == [60, 65]
    assert spread.assign([1], 3) == [0]


class _FakeDist:
    """torch.distributed as spread_group sees it: initialised, with a chosen world size and backend."""

    class group:
        WORLD = "world"

    def __init__(self, world, backend):
        self.world, self.backend = world, backend

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_world_size(self, group):
        return self.world

    def get_backend(self, group):
        return self.backend


def test_a_backend_other_than_gloo_or_nccl_is_refused(monkeypatch):
    monkeypatch.setattr(spread, "_dist", lambda: _FakeDist(2, "mpi"))
    with pytest.raises(qhybrid.errors.UnsupportedOperationError, match="gloo or nccl"):
        spread.spread_group(True)
    monkeypatch.setattr(spread, "_dist", lambda: _FakeDist(2, "cpu:gloo,cuda:nccl"))
    assert spread.spread_group(True) == "world"
    monkeypatch.setattr(spread, "_dist", lambda: _FakeDist(1, "gloo"))
    assert spread.spread_group(True) is None  # one rank: nothing to spread
    assert spread.spread_group(False) is None

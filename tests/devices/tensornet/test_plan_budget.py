"""Path search within the device's plan_time: greedy at once, a randomised search only where it pays, the
search optimiser built with a time limit within the budget (its own trial count reported), no timing of
the machine. Results agree with default.qubit whatever the budget."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.network import pathfind as _pathfind

TOL = 1e-10


@pytest.fixture(autouse=True)
def _fresh_planner():
    _pathfind.clear_memo()
    _pathfind.reset_stats()
    yield
    _pathfind.clear_memo()


@pytest.fixture
def searches_pay(monkeypatch):
    """Make every network's search worth its time (as on a slow machine or a costly network)."""
    monkeypatch.setattr(_pathfind, "FLOP_RATE", 1.0)


@pytest.fixture
def optimisers(monkeypatch):
    """Every search optimiser built, with the time limit it was given."""
    built = []
    original = _pathfind._search_optimizer

    def spy(optimizer, seconds, **kw):
        opt = original(optimizer, seconds, **kw)
        built.append((seconds, opt))
        return opt

    monkeypatch.setattr(_pathfind, "_search_optimizer", spy)
    return built


def _closed_circuit(monkeypatch, wires=6, layers=2):
    """StronglyEntanglingLayers measured by closed light-cone networks (one per wire)."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(wires), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(wires))
        return [qml.expval(qml.Z(i)) for i in range(wires)]

    g = torch.Generator().manual_seed(3)
    w = torch.rand(layers, wires, 3, generator=g, dtype=torch.float64) * 6
    return f, w


def _reference(f, x, w, wires):
    dev = qml.device("default.qubit", wires=wires)
    return torch.stack(list(qml.QNode(f, dev, interface="torch")(x, w)))


@pytest.mark.parametrize("optimizer", ["auto", "cotengra"])
def test_search_optimisers_get_time_limits_within_the_budget(monkeypatch, searches_pay, optimisers, optimizer):
    budget = 0.3
    f, w = _closed_circuit(monkeypatch)
    x = torch.rand(4, 6, dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=6, plan_time=budget, optimizer=optimizer)
    got = torch.stack(list(qhybrid.qnode(dev, diff_method=None)(f)(x, w)))
    torch.testing.assert_close(got, _reference(f, x, w, 6), atol=TOL, rtol=0)
    assert optimisers, "a search that pays was not run"
    limits = [seconds for seconds, _ in optimisers]
    assert all(0 < s <= budget for s in limits) and sum(limits) <= budget
    for seconds, opt in optimisers:
        assert opt.max_time == seconds  # the optimiser itself stops at its limit
        assert opt.max_repeats <= _pathfind.MAX_TRIALS
    assert 1 <= _pathfind.STATS.trials <= len(optimisers) * _pathfind.MAX_TRIALS  # trials the optimisers reported


def test_zero_plan_time_means_greedy_paths_only(monkeypatch, searches_pay, optimisers):
    f, w = _closed_circuit(monkeypatch)
    x = torch.rand(3, 6, dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=6, plan_time=0)
    got = torch.stack(list(qhybrid.qnode(dev, diff_method=None)(f)(x, w)))
    torch.testing.assert_close(got, _reference(f, x, w, 6), atol=TOL, rtol=0)
    assert optimisers == [] and _pathfind.STATS.searches == 0 and _pathfind.STATS.quick == 6


def test_cheap_networks_are_not_searched(monkeypatch, optimisers):
    """Small circuits: a search could save microseconds per call, so none runs (default budget)."""
    f, w = _closed_circuit(monkeypatch, wires=4, layers=1)
    x = torch.rand(2, 4, dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=4)
    got = torch.stack(list(qhybrid.qnode(dev, diff_method=None)(f)(x, w)))
    torch.testing.assert_close(got, _reference(f, x, w, 4), atol=TOL, rtol=0)
    assert optimisers == [] and _pathfind.STATS.quick == 4


def test_find_paths_shares_the_budget_across_networks(searches_pay, optimisers):
    """Pure planner: several networks, one budget; each search's limit is a share of what is left."""
    probs = []
    for k in range(5):
        n = 14 + k  # a ring of matrices: every greedy path is costly once FLOP_RATE is tiny
        inputs = [(i, (i + 1) % n) for i in range(n)]
        probs.append(_pathfind.Problem.of(inputs, (), {i: 4 for i in range(n)}))
    found = _pathfind.find_paths(probs, "auto", plan_time=0.2)
    assert len(found) == 5 and all(len(f.path) == p.n - 1 for f, p in zip(found, probs))
    assert 0 < sum(s for s, _ in optimisers) <= 0.2


@pytest.mark.parametrize(
    "options,message",
    [
        ({"plan_time": -1}, "plan_time must be a number of seconds >= 0"),
        ({"plan_time": "1"}, "plan_time must be a number of seconds >= 0"),  # (a TypeError from a comparison)
        ({"optimizer": "bogus"}, "optimizer='bogus' is not known"),  # (accepted, never read)
        ({"plan_cache_size": -1}, "plan_cache_size=-1: give how many"),  # (accepted silently)
        ({"plan_cache_size": 1.5}, "plan_cache_size=1.5: give how many"),
        ({"max_memory": "1000"}, "max_memory='1000': give a finite positive number"),
        ({"max_memory": float("inf")}, "max_memory=inf: give a finite positive number"),
        ({"torch_device": "meta"}, "torch_device='meta' holds no values"),  # (failed at the first run)
    ],
)
def test_device_options_are_checked_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        qhybrid.device("tensornet", wires=2, **options)


def test_aer_cache_size_is_checked_by_name():
    pytest.importorskip("qiskit_aer")
    with pytest.raises(ValueError, match="cache_size=-1: give how many"):
        qhybrid.device("aer", wires=2, cache_size=-1)


def test_an_exhaustive_search_of_a_large_network_is_refused_by_name():
    """``optimizer="optimal"`` ran opt_einsum's exhaustive search whatever the network's size (a 30-wire circuit's
    <X...X> network still planning after 10 minutes); networks above ``EXHAUSTIVE_MAX_TENSORS`` are refused."""
    n = 30

    def circuit(x):
        for i in range(n):
            qml.RY(x[i], wires=i)
        for i in range(n - 1):
            qml.CNOT([i, i + 1])
        for i in range(n):
            qml.RX(x[i], wires=i)
        return qml.expval(qml.prod(*[qml.X(i) for i in range(0, n, 3)]))

    dev = qhybrid.device("tensornet", wires=n, optimizer="optimal", path_cache=False)
    with pytest.raises(ValueError, match="optimizer='optimal' tries every contraction order"):
        qhybrid.qnode(dev)(circuit)(torch.linspace(0.1, 1.0, n))
    small = _pathfind.Problem.of([(0, 1), (1, 2), (2, 3)], (), {i: 2 for i in range(4)})
    assert len(_pathfind._quick(small, "optimal").path) == 2  # (small networks still planned exhaustively)


def test_plan_time_is_checked():
    with pytest.raises(ValueError, match="plan_time must be a number of seconds >= 0"):
        qhybrid.device("tensornet", wires=2, plan_time=-1)
    assert qhybrid.device("tensornet", wires=2).plan_time == _pathfind.DEFAULT_PLAN_TIME
    assert qml.device("qhybrid.tensornet", wires=2, plan_time=2.0).plan_time == 2.0

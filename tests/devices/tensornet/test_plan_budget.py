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


def test_plan_time_is_checked():
    with pytest.raises(ValueError, match="plan_time must be a number of seconds >= 0"):
        qhybrid.device("tensornet", wires=2, plan_time=-1)
    assert qhybrid.device("tensornet", wires=2).plan_time == _pathfind.DEFAULT_PLAN_TIME
    assert qml.device("qhybrid.tensornet", wires=2, plan_time=2.0).plan_time == 2.0

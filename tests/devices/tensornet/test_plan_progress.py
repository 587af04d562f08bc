"""Planning that shows itself and uses the machine (``network/hyper_tier.py``): the hyper tier's networks spread
over worker processes give the same trees as planned one by one; a progress bar on stderr says what is planned and
the best cost so far, after a delay (zero here), and not at all with ``progress=False`` or off a terminal. No timing."""

from __future__ import annotations

import math

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.network import hyper, hyper_tier, pathfind
from qhybrid.devices.tensornet.engines.network.problem import Problem

pytestmark = pytest.mark.usefixtures("fresh_planner")  # tests/devices/tensornet/conftest.py


def _network(seed: int, n: int = 20) -> Problem:
    g = nx.random_regular_graph(3, n, seed=seed)
    index = {tuple(sorted(e)): k for k, e in enumerate(g.edges())}
    inputs = [tuple(index[tuple(sorted((v, u)))] for u in g.neighbors(v)) for v in g.nodes()]
    return Problem.of(inputs, (), {k: 2 for k in range(len(index))})


@pytest.fixture
def costly(monkeypatch):
    """Every network above the exhaustive size is costly enough for the hyper tier (the test networks are cheap)."""
    monkeypatch.setattr(hyper, "HYPER_MIN_FLOPS", 0)


@pytest.fixture
def shown(monkeypatch):
    """The bar appears at once and redraws on every finished network."""
    monkeypatch.setattr(hyper_tier, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(hyper_tier, "PROGRESS_INTERVAL_S", 0.0)


def _plan(problems, progress=None):
    pathfind.clear_memo()
    return pathfind.find_paths(problems, pathfind.PathSettings("auto", progress=progress), plan_time=0.01)


def test_workers_give_the_trees_planned_one_by_one(costly, monkeypatch):
    problems = [_network(seed) for seed in range(4)]
    monkeypatch.setenv(hyper_tier.WORKERS_ENV, "1")
    alone = _plan(problems)
    monkeypatch.delenv(hyper_tier.WORKERS_ENV)
    monkeypatch.setattr(hyper_tier, "POOL_MIN_TENSORS", 0)  # (the test networks are far below the real threshold)
    monkeypatch.setattr(hyper_tier, "plan_workers", lambda: 2)
    pooled = []
    original = hyper_tier._in_workers
    monkeypatch.setattr(hyper_tier, "_in_workers", lambda *a: pooled.append(a[4]) or original(*a))
    spread = _plan(problems)
    assert pooled == [2]  # the networks went to two worker processes
    assert [f.path for f in spread] == [f.path for f in alone] and all(f.searched for f in spread)


def test_workers_follow_the_cores_and_the_environment(monkeypatch):
    monkeypatch.delenv(hyper_tier.WORKERS_ENV, raising=False)
    assert hyper_tier.plan_workers() >= 1
    monkeypatch.setenv(hyper_tier.WORKERS_ENV, "1")
    assert hyper_tier.plan_workers() == 1
    monkeypatch.setenv(hyper_tier.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="QHYBRID_PLAN_WORKERS must be a whole number"):
        hyper_tier.plan_workers()


def test_progress_bar_says_what_is_planned_and_the_best_cost(costly, shown, capsys):
    problems = [_network(seed) for seed in range(3)]
    found = _plan(problems, progress=True)
    err = capsys.readouterr().err
    assert "planning 3 contraction trees (60 tensors)" in err
    best = math.log2(sum(f.flops for f in found))
    assert f"best 2^{best:.1f} flops" in err  # the total once every tree is in
    assert "quick paths 2^" in err and "3/3" in err


def test_progress_bar_off_by_option_off_a_terminal_and_for_quick_planning(costly, shown, capsys, monkeypatch):
    problems = [_network(seed) for seed in range(2)]
    _plan(problems, progress=False)
    _plan(problems, progress=None)  # pytest's captured stderr is not a terminal
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(hyper_tier, "PROGRESS_DELAY_S", 60.0)  # planning quicker than the delay prints nothing
    _plan(problems, progress=True)
    assert capsys.readouterr().err == ""


def test_device_option_reaches_the_planner_and_is_checked():
    dev = qhybrid.device("tensornet", wires=2, progress=False)
    assert dev._options([torch.zeros(1)]).optimizer.progress is False
    assert qhybrid.device("tensornet", wires=2)._options([]).optimizer.progress is None
    with pytest.raises(ValueError, match="progress must be None"):
        qhybrid.device("tensornet", wires=2, progress="yes")



def test_a_light_cone_programs_closed_classes_are_planned_in_one_call(costly, monkeypatch):
    """``lightcone/preplan.py``: the closed classes' networks go to the hyper tier in one call (so its workers
    can share them); each class's own planning afterwards takes its tree from the memo without searching."""
    from types import SimpleNamespace

    from qhybrid.devices.tensornet.engines.lightcone.preplan import plan_closed_classes
    from qhybrid.devices.tensornet.engines.network.plan import plan_networks

    calls = []
    original = hyper_tier.hyper_tier
    monkeypatch.setattr(pathfind, "hyper_tier", lambda problems, found, picked, *a: (picked and calls.append(len(picked)))
                        or original(problems, found, picked, *a))  # fmt: skip
    classes = [SimpleNamespace(name=k) for k in range(4)]
    nets = {id(c): {("pauli", k): _network(10 + k)} for k, c in enumerate(classes)}
    program = SimpleNamespace(
        opts=SimpleNamespace(spread_classes=False, optimizer=pathfind.PathSettings("auto")), classes=classes,
        _networks=nets, _closed_class={id(c): k != 3 for k, c in enumerate(classes)}, _programs={},
        _plan_time={id(c): 0.01 for c in classes},
    )  # fmt: skip
    plan_closed_classes(program)
    assert calls == [3]  # the three closed classes together (the fourth runs as a state vector)
    together = {k: plan_networks([nets[id(classes[k])][("pauli", k)]], "auto", 0.01, vary=1)[0] for k in range(3)}
    assert calls == [3] and pathfind.STATS.memo_hits == 3  # each class's own planning: no new search
    pathfind.clear_memo()
    for k in range(3):  # the trees are those each class finds alone
        alone = plan_networks([nets[id(classes[k])][("pauli", k)]], "auto", 0.01, vary=1)[0]
        assert alone.path == together[k].path
    program.opts = SimpleNamespace(spread_classes=True, optimizer=pathfind.PathSettings("auto"))
    calls.clear()
    plan_closed_classes(program)  # a rank plans only the classes it runs
    assert calls == []


def test_a_dead_worker_leaves_its_networks_to_this_process(costly, monkeypatch):
    from concurrent.futures.process import BrokenProcessPool

    problems = [_network(seed) for seed in range(3)]
    alone = _plan(problems)
    monkeypatch.setattr(hyper_tier, "POOL_MIN_TENSORS", 0)
    monkeypatch.setattr(hyper_tier, "plan_workers", lambda: 2)

    def one_then_dead(problems, found, jobs, max_elements, workers, done):
        k, share = jobs[0]
        done(k, hyper.improve(problems[k], share, found[k], max_elements))
        raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(hyper_tier, "_in_workers", one_then_dead)
    assert [f.path for f in _plan(problems)] == [f.path for f in alone] and pathfind.STATS.hyper == 3 * 2


def test_step_four_searches_are_tasks_of_their_own_with_the_trees_planned_one_by_one(costly, monkeypatch):
    """Each network still costly after steps 1-3 sends its seeded step-4 searches to the workers as separate tasks
    (``hyper.partition_search``); merged in seed order they give the tree ``hyper.improve`` gives alone."""
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.setattr(hyper, "PARTITION_MIN_FLOPS", 0.0)
    monkeypatch.setattr(hyper, "MAX_PARTITION_TRIALS", 3)
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", math.inf)
    monkeypatch.setattr(hyper, "MAX_ROUNDS", 1)
    problems = [_network(seed, n=24) for seed in range(3)]
    monkeypatch.setenv(hyper_tier.WORKERS_ENV, "1")
    alone = _plan(problems)
    monkeypatch.delenv(hyper_tier.WORKERS_ENV)
    monkeypatch.setattr(hyper_tier, "POOL_MIN_TENSORS", 0)
    monkeypatch.setattr(hyper_tier, "plan_workers", lambda: 2)
    submitted = []

    class Recording(ProcessPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            submitted.append(fn.__name__)
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(hyper_tier, "ProcessPoolExecutor", Recording)
    spread = _plan(problems)
    assert sorted(submitted) == sorted(["head"] * 3 + ["partition_search"] * 3 * len(hyper.PARTITION_SEEDS))
    assert [(f.path, f.flops, f.write) for f in spread] == [(f.path, f.flops, f.write) for f in alone]
    assert all(f.searched for f in spread)

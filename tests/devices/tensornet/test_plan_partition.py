"""Step 4's kahypar partitions (``network/partition.py``): cotengra's profiles with fewer initial partitioning
runs, written once under the cache directory, registered as a cotengra method that the hyper tier's partitioned
searches use; seeded searches through it give the same tree twice. No timing."""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pytest

from qhybrid.devices.tensornet.engines.network import hyper, partition
from qhybrid.devices.tensornet.engines.network.path_cache import valid_path
from qhybrid.devices.tensornet.engines.network.problem import Problem

pytestmark = pytest.mark.usefixtures("fresh_planner")  # tests/devices/tensornet/conftest.py
kahypar = pytest.importorskip("kahypar")


def _lattice(n: int = 5) -> Problem:
    """An n x n grid of rank-4 tensors (bond 2): partitioned trees beat greedy ones on grids."""
    g = nx.grid_2d_graph(n, n)
    index = {tuple(sorted(e)): k for k, e in enumerate(g.edges())}
    inputs = [tuple(index[tuple(sorted((v, u)))] for u in g.neighbors(v)) for v in g.nodes()]
    return Problem.of(inputs, (), {k: 2 for k in index.values()})


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("QHYBRID_CACHE_DIR", str(tmp_path))
    partition.profile_directory.cache_clear()
    yield tmp_path
    partition.profile_directory.cache_clear()


def test_profiles_are_cotengras_with_fewer_initial_runs(cache_dir):
    from cotengra.pathfinders.path_kahypar import get_kahypar_profile_dir

    directory = Path(partition.profile_directory(3))
    assert directory.parent == cache_dir / "kahypar"
    for name in ("cut_kKaHyPar_sea20.ini", "km1_rKaHyPar_sea20.ini"):
        ours = (directory / name).read_text().splitlines()
        theirs = Path(get_kahypar_profile_dir(), name).read_text().splitlines()
        assert len(ours) == len(theirs) and "i-runs=20" in theirs and "i-runs=3" in ours
        assert [a for a, b in zip(ours, theirs) if a != b] == ["i-runs=3"]  # nothing else changed
    partition.profile_directory.cache_clear()
    assert Path(partition.profile_directory(3)) == directory  # the same content: the same directory
    assert Path(partition.profile_directory(5)) != directory


def test_unwritable_cache_directory_falls_back_to_a_temporary_one(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("QHYBRID_CACHE_DIR", str(blocker))  # a file: no directory can be made under it
    partition.profile_directory.cache_clear()
    try:
        directory = Path(partition.profile_directory(2))
        assert not str(directory).startswith(str(blocker)) and "i-runs=2" in (directory / "cut_kKaHyPar_sea20.ini").read_text()
    finally:
        partition.profile_directory.cache_clear()


def test_step_four_partitions_through_the_fewer_runs_profiles(cache_dir, monkeypatch):
    """The partitioner is the registered method; every kahypar call of a step-4 search reads this module's
    profile for its mode and objective; seeded, the search gives the same tree twice; never worse than steps 1-3."""
    from cotengra.pathfinders import path_kahypar

    assert hyper.partitioner() == partition.METHOD
    profiles = []
    original = path_kahypar.kahypar_subgraph_find_membership

    def spy(*args, **kwargs):
        profiles.append((kwargs["profile"], kwargs["mode"], kwargs["objective"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(path_kahypar, "kahypar_subgraph_find_membership", spy)
    problem = _lattice()
    monkeypatch.setattr(hyper, "MAX_ROUNDS", 0)
    before = hyper.improve(problem, 0.0)
    monkeypatch.setattr(hyper, "PARTITION_MIN_FLOPS", 0.0)
    monkeypatch.setattr(hyper, "MAX_PARTITION_TRIALS", 4)
    monkeypatch.setattr(hyper, "PAYBACK_CALLS", math.inf)
    after = hyper.improve(problem, 0.0)
    assert profiles
    for profile, mode, objective in profiles:
        assert Path(profile).parent == Path(partition.profile_directory(partition.KAHYPAR_INITIAL_RUNS))
        assert Path(profile).name == f"{objective}_{'k' if mode == 'direct' else 'r'}KaHyPar_sea20.ini"
        assert f"i-runs={partition.KAHYPAR_INITIAL_RUNS}" in Path(profile).read_text()
    assert after.cost <= before.cost and valid_path([list(s) for s in after.path], problem.n)
    again = hyper.improve(problem, 0.0)
    assert (again.flops, again.write) == (after.flops, after.write)

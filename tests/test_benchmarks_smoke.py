"""The peers runner's own path on qhybrid-only rows: runs, checks numbers, reports missing peers (no timing
is asserted; the JAX peers are not run here, CI does not install them)."""

import pytest

pytest.importorskip("networkx")
peers_run = pytest.importorskip("benchmarks.peers_run")
from benchmarks.peers_report import availability, markdown  # noqa: E402


def test_w1_rows_agree_and_missing_peers_are_reported():
    rows = peers_run.run_workload("W1", ["qhybrid", "dq torch"], repeats=1, slow_repeats=1, skip={})
    assert rows["qhybrid"]["status"] == "ok" and rows["qhybrid"]["max_dev"] == 0.0
    assert rows["dq torch"]["status"] == "ok" and rows["dq torch"]["ref"] == "qhybrid"
    assert rows["dq torch"]["max_dev"] < peers_run.TOLERANCE
    for system, why in availability().items():
        assert why == "installed" or why.startswith("not installed ("), (system, why)
    report = {"machine": "test", "versions": {"torch": "x"}, "quick": True, "tolerance": peers_run.TOLERANCE,
              "availability": {"TC-NG": "not installed (No module named 'tensorcircuit')"}, "wall_s": 1.0,
              "runs": [{"threads": 1, "cpus": [0], "torch_threads": 1, "xla_flags": "", "workloads": {"W1": rows}}]}
    md = markdown(report)
    assert "| W1 | dq torch |" in md and "TC-NG: not installed" in md


def test_failing_system_is_recorded_not_raised(monkeypatch):
    from benchmarks import peers

    def broken(system, wl, data):
        raise RuntimeError("boom")

    monkeypatch.setattr(peers, "build", broken)
    rows = peers_run.run_workload("W1", ["qhybrid"], repeats=1, slow_repeats=1, skip={("W1", "x"): "skip"})
    assert rows["qhybrid"]["status"] == "fails: RuntimeError: boom"

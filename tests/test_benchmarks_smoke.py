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


def test_gpu_structured_runs_its_rows_on_the_cpu(tmp_path):
    """benchmarks/gpu_structured.py's own path (``--device cpu``: no capture, wall clock) on G16: the qhybrid row
    counts its ops and host reads, default.qubit agrees with it."""
    import json

    from benchmarks import gpu_structured

    out = tmp_path / "g.json"
    assert gpu_structured.main(["G16", "--device", "cpu", "--repeats", "1", "--warmup", "0", "--out", str(out)]) == 0
    (g16,) = json.loads(out.read_text())["workloads"]
    rows = g16["systems"]
    assert rows["qhybrid"]["host_reads_per_step"] == 0 and rows["qhybrid"]["ops_per_step"] > 0
    assert rows["pennylane[default.qubit,torch-cpu]"]["max_abs_diff_vs_qhybrid"] < 1e-10
    assert "jax[jit]" in rows  # a row, measured or with its ImportError recorded


def test_steps_measures_both_qnodes_and_default_qubit():
    """benchmarks/steps.py on W1: the plain and static qnodes' ops (no host read) and every system's time."""
    from benchmarks import steps

    row = steps.measure("W1", 1)
    assert set(row) == set(steps.SYSTEMS)
    for system in ("qhybrid", "qhybrid static"):
        assert row[system]["ops"] > 0 and row[system]["host_reads"] == 0
    assert all(r["median_s"] > 0 for r in row.values())


def test_compiled_step_core_is_the_qnodes_step():
    """benchmarks/compiled_step.py's core (compiled there, eager here): W1's values and gate cotangents."""
    import pennylane as qml
    import torch

    from benchmarks import compiled_step
    from benchmarks.workloads import sel_function

    core, tensors, _, _ = compiled_step.step_core(4, n=4, layers=2)
    values, grads = core(*tensors)
    gen = torch.Generator().manual_seed(3)  # step_core's arguments
    x = torch.rand(4, 4, generator=gen, dtype=torch.float64)
    w = torch.rand(2, 4, 3, generator=gen, dtype=torch.float64)
    want = torch.stack(qml.QNode(sel_function(4), qml.device("default.qubit"), interface="torch")(x, w))
    assert torch.allclose(values, want, atol=1e-12)
    assert grads and all(torch.isfinite(g).all() for g in grads)

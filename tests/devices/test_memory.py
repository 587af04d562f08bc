"""What a process can still allocate (devices/_memory.py): the least of free RAM, the address-space limit's
room and the cgroup limit's room; and the device's default ``max_memory`` follows it (a state that the
machine's free RAM would admit is refused under ``ulimit -v`` before anything state-sized is allocated)."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap

import psutil
import pytest

from qhybrid.devices import _memory


def test_cgroup_v2_limit_less_usage(tmp_path, monkeypatch):
    (tmp_path / "memory.max").write_text("4294967296\n")
    (tmp_path / "memory.current").write_text("1073741824\n")
    monkeypatch.setattr(_memory, "CGROUP_ROOT", tmp_path)
    assert _memory._cgroup_room() == 3 * 2**30
    assert _memory.available_memory() <= 3 * 2**30


@pytest.mark.parametrize("limit", ["max", str(1 << 62)])
def test_cgroup_without_a_limit_counts_nothing(tmp_path, monkeypatch, limit):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(limit if limit != "max" else str(1 << 63))
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("1000")
    monkeypatch.setattr(_memory, "CGROUP_ROOT", tmp_path)
    assert _memory._cgroup_room() is None
    (tmp_path / "memory.max").write_text(limit)
    (tmp_path / "memory.current").write_text("1000")
    if limit == "max":
        assert _memory._cgroup_room() is None


def test_cgroup_v1_limit(tmp_path, monkeypatch):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("2147483648")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("147483648")
    monkeypatch.setattr(_memory, "CGROUP_ROOT", tmp_path)
    assert _memory._cgroup_room() == 2_000_000_000


def test_address_space_limit_leaves_its_room(monkeypatch, tmp_path):
    monkeypatch.setattr(_memory, "CGROUP_ROOT", tmp_path)  # no cgroup files
    vms = psutil.Process().memory_info().vms
    monkeypatch.setattr(resource, "getrlimit", lambda what: (vms + (300 << 20), resource.RLIM_INFINITY))
    room = _memory.available_memory()
    assert 250 << 20 < room <= 300 << 20
    monkeypatch.setattr(resource, "getrlimit", lambda what: (vms - 1, resource.RLIM_INFINITY))
    assert _memory.available_memory() == 0.0


_CAPPED = textwrap.dedent(
    """
    import resource
    import pennylane as qml, qhybrid
    from qhybrid.errors import ContractionTooLargeError

    n = 24  # a 256 MiB state: the machine's free RAM would admit it, 512 MiB of address space does not
    ops = [qml.RY(0.1 * i, wires=i) for i in range(n)] + [qml.CNOT([i, i + 1]) for i in range(n - 1)]
    tape = qml.tape.QuantumScript(ops, [qml.state()])
    used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20), resource.RLIM_INFINITY))
    try:
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=n))
        print("RAN")
    except ContractionTooLargeError as e:
        print("REFUSED:", e)
    except (MemoryError, RuntimeError) as e:
        print("ALLOCATED:", type(e).__name__, e)
    """
)


def test_default_max_memory_follows_the_address_space_limit():
    if psutil.virtual_memory().available < 3 * 2**30:
        pytest.skip("needs 3 GiB of free RAM, so that the RAM alone would admit the state")
    done = subprocess.run([sys.executable, "-c", _CAPPED], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("REFUSED:"), done.stdout


def test_default_bounds_plan_intermediates_below_the_state_share(monkeypatch):
    # a contraction step holds several tensors of its largest size at once: without max_memory, plans are
    # sliced to an eighth of the room while state vectors may still take half of it
    import torch

    import qhybrid
    from qhybrid.devices.tensornet import device as device_module

    room = float(3 << 30)
    monkeypatch.setattr(device_module, "recent_available_memory", lambda: room)
    dev = qhybrid.device("tensornet", wires=2)
    opts = dev._options([torch.zeros(1, dtype=torch.float64)])
    assert opts.max_memory == room * device_module.DEFAULT_MEMORY_FRACTION
    assert opts.optimizer.max_elements == room * device_module.DEFAULT_INTERMEDIATE_FRACTION / dev.dtype.itemsize
    assert device_module.DEFAULT_INTERMEDIATE_FRACTION <= device_module.DEFAULT_MEMORY_FRACTION / 4
    explicit = qhybrid.device("tensornet", wires=2, max_memory=1 << 20)._options([torch.zeros(1, dtype=torch.float64)])
    assert (explicit.max_memory, explicit.optimizer.max_elements) == (1 << 20, (1 << 20) / dev.dtype.itemsize)

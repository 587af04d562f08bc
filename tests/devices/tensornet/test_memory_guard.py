"""Memory is checked before it is spent: a state vector above ``max_memory`` is refused with its size before
anything state-sized is allocated (shown in a subprocess whose address space is capped a little above what it
already uses: an allocation of the state, or of a ``2**n`` index table, would fail there instead), and a
``qml.state()`` run peaks at no more than 2.5 states (anonymous resident memory of a subprocess, sampled every
0.5 ms: the ru_maxrss of a loaded full-suite run also counted library pages evicted and faulted back in; at 23 wires: states of 128 MiB and more are mapped one by one; at 22 wires, inside the heap, a loaded xdist run peaked above 2.5)."""

from __future__ import annotations

import subprocess
import sys
import textwrap



_REFUSAL = textwrap.dedent(
    """
    import resource, sys
    import pennylane as qml, qhybrid
    from qhybrid.errors import ContractionTooLargeError

    cases = [(int(n), float(m)) for n, m in (a.split(":") for a in sys.argv[1:])]
    tapes = []
    for n, _ in cases:
        ops = [qml.RY(0.1 * i, wires=i) for i in range(n)] + [qml.CNOT([i, i + 1]) for i in range(n - 1)]
        tapes.append(qml.tape.QuantumScript(ops, [qml.state()]))
    # from here on, at most 512 MiB more address space: a 2**26 state or index table does not fit
    used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20), resource.RLIM_INFINITY))
    for (n, max_memory), tape in zip(cases, tapes):
        try:
            qhybrid.execute([tape], qhybrid.device("tensornet", wires=n, max_memory=max_memory or None))
        except ContractionTooLargeError as e:
            print("REFUSED:", e)
        except (MemoryError, RuntimeError) as e:
            print("ALLOCATED:", type(e).__name__, e)
    """
)


def _run(script: str, *args) -> str:
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_states_above_max_memory_are_refused_before_allocation():
    """30 wires under the default max_memory (half the free RAM; before: 8 GiB of int64 tables, then killed),
    and 26 wires under max_memory=1e8 (before: refused after 167 s of work)."""
    lines = _run(_REFUSAL, "30:0", "26:1e8").strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("REFUSED:") for line in lines), lines
    # the state itself above max_memory: refused by its own size (result_size); else by the program's peak
    assert ("(2**30 amplitudes) is 16.0 GiB (1073741824 elements x 16 bytes)" in lines[0]
            or ("needs about 40.0 GiB at its peak" in lines[0] and "16.0 GiB: 1073741824 elements" in lines[0]))
    assert "(2**26 amplitudes) is 1.0 GiB (67108864 elements x 16 bytes), above max_memory=95.4 MiB" in lines[1]


_PEAK = textwrap.dedent(
    """
    import threading, time
    import pennylane as qml, qhybrid, torch

    def anon():  # anonymous resident memory: library pages evicted and faulted back in do not count
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024

    n = 23
    ops = [qml.RY(0.1 * i, wires=i) for i in range(n)] + [qml.CNOT([i, i + 1]) for i in range(n - 1)]
    ops += [qml.RY(0.2, wires=i) for i in range(n)]
    dev = qhybrid.device("tensornet", wires=n)
    small = qml.tape.QuantumScript(ops[:3], [qml.state()])
    qhybrid.execute([small], qhybrid.device("tensornet", wires=3))  # imports and first-call set-up
    before = anon()
    peak, done = [before], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], anon())
            time.sleep(0.0005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    with torch.no_grad():
        state = qhybrid.execute([qml.tape.QuantumScript(ops, [qml.state()])], dev)[0]
    done.set()
    sampler.join()
    print((max(peak[0], anon()) - before) / state.numel() / state.element_size())
    """
)


def test_state_of_23_wires_peaks_within_two_and_a_half_states():
    states = float(_run(_PEAK).strip().splitlines()[-1])
    assert states <= 2.5, f"qml.state() peaked at {states:.2f} states above its start"


def test_a_small_circuit_under_a_small_max_memory_is_not_refused_for_states_it_cannot_keep():
    """The adjoint walk's kept states were counted up to their 64 MiB budget, whatever the circuit's length: a
    4-wire circuit's Hessian (a gradient recorded, so the walk's check) under max_memory=1 MiB was refused as
    needing 64 MiB (found by a fuzzing helper, 2026-11-29). They are now counted at most one per gate."""
    import pennylane as qml
    import torch

    import qhybrid

    def circuit(x):
        for i in range(4):
            qml.RY(x[i], wires=i)
        for i in range(3):
            qml.CNOT([i, i + 1])
        return qml.expval(qml.Z(3))

    x = torch.tensor([0.3, -0.7, 1.1, 0.4], dtype=torch.float64)
    ours = torch.autograd.functional.hessian(
        qhybrid.qnode(qhybrid.device("tensornet", wires=4, max_memory=2**20), diff_method="adjoint")(circuit), x
    )
    ref = torch.autograd.functional.hessian(
        qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch", diff_method="backprop"), x
    )
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)


def test_probabilities_of_every_wire_of_a_wide_circuit_are_refused_without_a_path_search():
    """``qml.probs()`` of 40 wires: its output alone (2^40 elements) exceeds any memory, so no path can fit; the
    path search and its rescue ran first (55 s at 40 wires, more than 10 minutes at 1000) before the refusal."""
    import pennylane as qml
    import pytest
    import torch

    import qhybrid
    from qhybrid.devices.tensornet.engines.network import pathfind
    from qhybrid.errors import ContractionTooLargeError

    n = 40

    def circuit(x):
        for layer in range(2):
            for i in range(n):
                qml.RY(x[layer, i], wires=i)
            for i in range(n - 1):
                qml.CNOT([i, i + 1])
        return qml.probs()

    pathfind.reset_stats()
    dev = qhybrid.device("tensornet", wires=n, path_cache=False, plan_time=5.0)
    with pytest.raises(ContractionTooLargeError, match="probs"):
        qhybrid.qnode(dev)(circuit)(torch.rand(2, n))
    assert (pathfind.STATS.searches, pathfind.STATS.rescues, pathfind.STATS.hyper) == (0, 0, 0)

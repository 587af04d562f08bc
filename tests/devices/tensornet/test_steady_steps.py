"""A steady value + gradient step of every engine touches the host nowhere (``qhybrid.testing``): no value read
back, no tensor from Python data, no data-dependent shape, no constant moved to the device. Such a step can be
captured as a CUDA graph, and on a GPU it never waits for the device. Run on the CPU: after two warm-up calls
(they plan and fill the caches) the third call is watched. Each case checks it runs the engine it names."""

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound, _simulate
from qhybrid.devices.tensornet.engines.lightcone import closed_classes, shared, stacked_node, whole
from qhybrid.devices.tensornet.engines.mixed import heisenberg, program as mixed_program
from qhybrid.devices.tensornet.engines.mps import settings as mps_settings
from qhybrid.devices.tensornet.engines.network import programs, together
from qhybrid.devices.tensornet.engines.statevector import kernels
from qhybrid.testing import describe, host_touches


def _sel(n, layers, batch, real_layer=False, **device):
    """W1's circuit (``AngleEmbedding`` + ``StronglyEntanglingLayers``, ``<Z_i>``), summed, and its inputs
    (``real_layer``: then ``RY`` layers, whose real blocks may multiply a large state's real view)."""
    dev = qhybrid.device("tensornet", wires=n, **device.pop("dev", {}))

    @qhybrid.qnode(dev, **device)
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        if real_layer:
            qml.BasicEntanglerLayers(w[:, :, 0], wires=range(n), rotation=qml.RY)
        return [qml.expval(qml.Z(i)) for i in range(n)]

    x = torch.rand(batch, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(layers, n, 3, dtype=torch.float64, requires_grad=True)
    return lambda: torch.stack(f(x, w)).sum().backward(), dev


def _qaoa(edges, n, layers=2, *, static=False, per_edge=False, cost=None, **device):
    """MaxCut QAOA as users write it (``IsingZZ(2 * gamma[l])``), or (``static``) a ``static_structure`` qnode
    that indexes its inputs (``gamma[l]``, or ``per_edge``: an angle of its own for every edge)."""
    dev = qhybrid.device("tensornet", wires=n, **device)
    cost = cost or qml.dot([1.0] * len(edges), [qml.Z(u) @ qml.Z(v) for u, v in edges])

    def circuit(g, b):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(layers):
            for k, (u, v) in enumerate(edges):
                angle = (g[layer, k] if per_edge else g[layer]) if static else 2 * g[layer]
                qml.IsingZZ(angle, wires=[u, v])
            for i in range(n):
                qml.RX(b[layer] if static else 2 * b[layer], wires=i)
        return qml.expval(cost)

    node = qhybrid.qnode(dev, static_structure=static)(circuit)
    shape = (layers, len(edges)) if per_edge else (layers,)
    g0 = torch.linspace(0.15, 0.5, layers * (len(edges) if per_edge else 1), dtype=torch.float64).reshape(shape)
    b0 = torch.linspace(-0.4, -0.1, layers, dtype=torch.float64)

    def step():
        g, b = g0.clone().requires_grad_(), b0.clone().requires_grad_()
        node(g, b).backward()

    return step, dev


def _regular(n, seed=1):
    return [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=seed).edges()]


def _engines(dev) -> set:
    return {e.engine for e in dev.plan_cache_info().engines}


def _calls(monkeypatch, module, name):
    """Count the calls of ``module.name`` (to check that a case runs the engine it names)."""
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


# --- the cases: (step, check that it ran the named engine) -----------------------------------------


def statevector(monkeypatch):
    step, _ = _sel(4, 2, 8, diff_method="adjoint")
    return step, lambda: True


def statevector_xy_words(monkeypatch):
    """Words with X and Y read from the state (``readout.measure``): ``test_cuda_graph``'s circuit."""
    dev = qhybrid.device("tensornet", wires=4)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(4), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(4))
        return [qml.expval(qml.Z(i)) for i in range(4)] + [qml.expval(qml.X(0) @ qml.Y(2))]

    x = torch.rand(16, 4, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, 4, 3, dtype=torch.float64, requires_grad=True)
    return (lambda: torch.stack(list(f(x, w))).sum().backward()), lambda: True


def statevector_large_batch(monkeypatch):
    """A state of 2**16 amplitudes: real gate blocks multiply its real view (W1 at batch 8192, W5, G16)."""
    real = []
    original = kernels._real_part
    monkeypatch.setattr(kernels, "_real_part", lambda *a: real.append(original(*a) is not None) or original(*a))
    step, _ = _sel(8, 1, 256, real_layer=True, diff_method="adjoint")
    return step, lambda: any(real)


def statevector_general_path(monkeypatch):
    """The same without the one-node path (``_bound``): gate matrices built by recorded torch ops."""
    monkeypatch.setattr(_bound, "ENABLED", False)
    return statevector_large_batch(monkeypatch)


def diagonal_runs(monkeypatch):
    """G16: a QAOA cost layer as one phase multiply, on a 2**16 state."""
    step, dev = _qaoa(_regular(16, seed=7), 16)
    return step, lambda: _engines(dev) == {"state vector"}


def cone_classes_shared_rows(monkeypatch):
    """Light cones whose classes' members read the same inputs (run once each, known from the plan)."""
    runs = _calls(monkeypatch, shared._Shared, "forward")  # distinct rows run once (``shared.run_distinct``)
    stacks = _calls(monkeypatch, stacked_node.StackedNode, "forward")  # or as the rows of a stack of classes
    step, dev = _qaoa(_regular(30), 30, static=True)
    return step, lambda: "light cones" in _engines(dev) and (runs or stacks)


def cone_classes_plain_qnode(monkeypatch):
    """A plain qnode's cone classes (``2 * gamma[l]`` per gate): recorded lazily (workflow/_lazy.py), the gates of a
    layer read one element, so their rows are shared by structure (a tensor per gate was found equal by values)."""
    step, dev = _qaoa(_regular(30), 30)
    return step, lambda: "light cones" in _engines(dev)


def cone_classes_distinct_rows(monkeypatch):
    step, dev = _qaoa(_regular(30), 30, static=True, per_edge=True)
    return step, lambda: "light cones" in _engines(dev)


def closed_cone_classes(monkeypatch, per_edge=False):
    """Cone classes as closed networks contracted together (L8p3's), members sharing rows or not."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)
    runs = _calls(monkeypatch, closed_classes, "classes_together")
    step, dev = _qaoa(_regular(12), 12, static=True, per_edge=per_edge)
    return step, lambda: "closed network" in _engines(dev) and runs


def closed_cone_classes_distinct_rows(monkeypatch):
    return closed_cone_classes(monkeypatch, per_edge=True)


def network_words_together(monkeypatch):
    """A Hamiltonian's words as closed networks of the whole circuit contracted in one pass (Q100p3's)."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    monkeypatch.setattr(programs, "PAULI_SUM_MIN_WORDS", 10**9)
    runs = _calls(monkeypatch, together.Together, "contract")
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]
    cost = qml.Hamiltonian([0.5, -1.0, 0.25, 1.5, 0.75, -0.5, 1.0], [qml.Z(u) @ qml.Z(v) for u, v in edges])
    step, dev = _qaoa(edges, 6, cost=cost)
    return step, lambda: runs


def mps(monkeypatch):
    """cutoff=0 with a bond cap: every bond decided by the structure, the truncation report read when asked."""
    step, dev = _sel(6, 2, 4, dev={"method": "mps", "max_bond_dim": 8, "cutoff": 0})
    return step, lambda: "matrix product state" in _engines(dev)


def mps_truncated(monkeypatch):
    """The same where the cap cuts (bond 3 of 8): the discarded weight stays on the device until it is read."""
    monkeypatch.setattr(mps_settings, "DISCARDED_WEIGHT_WARNING", float("inf"))  # its first call would warn
    step, dev = _sel(6, 2, 4, dev={"method": "mps", "max_bond_dim": 3, "cutoff": 0})
    return step, lambda: "matrix product state" in _engines(dev) and dev.last_truncation.max_bond == 3


def mps_value_cutoff(monkeypatch):
    step, dev = _sel(6, 2, 1, dev={"method": "mps", "max_bond_dim": 8})
    return step, lambda: "matrix product state" in _engines(dev)


def mixed_state(monkeypatch):
    """NW1's kind: depolarising noise after the embedding and each layer, a density matrix walked forward."""
    return _noisy(monkeypatch, batch=1, walked_back=False)


def pauli_walk(monkeypatch):
    """The same at a batch where the observables walk back in the Pauli basis (``mixed.heisenberg``)."""
    return _noisy(monkeypatch, batch=16, walked_back=True)


def noisy_sel(n):
    """NW1's kind: ``AngleEmbedding``, depolarising noise, ``StronglyEntanglingLayers``, noise again, ``<Z_i>``."""

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        for i in range(n):
            qml.DepolarizingChannel(0.01, wires=i)
        qml.StronglyEntanglingLayers(w, wires=range(n))
        for i in range(n):
            qml.DepolarizingChannel(0.02, wires=i)
        return [qml.expval(qml.Z(i)) for i in range(n)]

    return f


def _noisy(monkeypatch, batch, walked_back, **device):
    walks = _calls(monkeypatch, mixed_program, "heisenberg_expvals")
    n = 3
    dev = qhybrid.device("tensornet", wires=n, **device)

    f = qhybrid.qnode(dev)(noisy_sel(n))

    x = torch.rand(batch, n, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)
    return (lambda: torch.stack(f(x, w)).sum().backward()), lambda: bool(walks) == walked_back


def trajectories(monkeypatch):
    """Noise sampled as trajectories (random draws on the device are fine; host reads are not)."""
    step, _ = _noisy(monkeypatch, batch=1, walked_back=False, noise="trajectories", trajectories=8)
    return step, lambda: True


def parameter_shift(monkeypatch):
    step, _ = _sel(3, 1, 1, diff_method="parameter-shift")
    return step, lambda: True


def parameter_shift_rules(monkeypatch):
    """Batched inputs, four-term rules (``CRX``, ``CRot``), words with X and Y and probabilities: the rules' tables
    (shifted rows, multipliers, shifts, the combining coefficients) and the stacked rows made once per device."""
    from qhybrid.gradients import parameter_shift as ps

    dev = qhybrid.device("tensornet", wires=3)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(3))
        qml.CRX(w[0], wires=[0, 1])
        qml.IsingZZ(w[1], wires=[1, 2])
        qml.Rot(w[2], w[3], w[4], wires=2)
        qml.PhaseShift(w[5], wires=0)
        qml.CRot(w[6], w[7], w[8], wires=[2, 0])
        return qml.expval(qml.X(0) @ qml.Y(1)), qml.probs(wires=[1, 2])

    x = torch.rand(5, 3, dtype=torch.float64)
    w = torch.rand(9, dtype=torch.float64, requires_grad=True)
    calls = _calls(monkeypatch, ps, "_shifted_values")

    def step():
        a, b = f(x, w)
        (a.sum() + b.sum()).backward()

    return step, lambda: bool(calls)


def exp_qlayer(monkeypatch):
    layer = qhybrid.ExpQLayer(4, 2).double()
    x = torch.rand(8, 4, dtype=torch.float64)
    return (lambda: layer(x).sum().backward()), lambda: True


CASES = {f.__name__: f for f in (
    statevector, statevector_xy_words, statevector_large_batch, statevector_general_path, diagonal_runs, cone_classes_shared_rows,
    cone_classes_plain_qnode, cone_classes_distinct_rows, closed_cone_classes, closed_cone_classes_distinct_rows, network_words_together,
    mps, mps_truncated, mps_value_cutoff, mixed_state, pauli_walk, trajectories, parameter_shift,
    parameter_shift_rules, exp_qlayer,
)}  # fmt: skip

NOT_YET = {  # engines whose steady steps still touch the host (issue 39): strict, so a fix shows here
    "mps_value_cutoff": "a value cutoff (the default's too) sizes each bond from the singular values of its split "
                        "(mps/svd.py kept_rank): data-dependent by design; cutoff=0 with a max_bond_dim is the "
                        "capture-safe configuration (the mps cases)",
    "exp_qlayer": "layers check their inputs are finite (a read per call; skipped on captured replays)",
}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.xfail(reason=NOT_YET[c], strict=True)) if c in NOT_YET else c for c in CASES]
)
def test_a_steady_step_touches_the_host_nowhere(case, monkeypatch):
    step, ran = CASES[case](monkeypatch)
    touches = host_touches(step, warmup=2)
    assert ran(), f"{case}: the step did not run the engine the case names"
    assert not touches, f"{case}: {len(touches)} host touches in a steady step:\n{describe(touches)}"

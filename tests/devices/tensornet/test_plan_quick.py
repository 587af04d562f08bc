"""The instant paths of the path search (``network/pathfind.py``): cotengra's greedy path, in Rust where
``cotengrust`` is installed and in Python otherwise, remembered per structure within a process (a network
priced, judged and planned by separate calls gets one greedy pass); the rescue search skipped for networks
planned only to be judged. Values and gradients through the paths equal default.qubit. No timing."""

from __future__ import annotations

import math
import random

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.engines.network import hyper, pathfind
from qhybrid.devices.tensornet.engines.network.path_cache import valid_path
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
from qhybrid.devices.tensornet.engines.network.problem import Problem, _evaluate

TOL = 1e-10
pytestmark = pytest.mark.usefixtures("fresh_planner")  # tests/devices/tensornet/conftest.py


def _network(seed: int, n: int = 30) -> Problem:
    """A random network of 2-4-index tensors (bond 2), some indices shared by three tensors (hyperedges)."""
    rng = random.Random(seed)
    inputs = [tuple(rng.sample(range(n), rng.randint(2, 4))) for _ in range(n)]
    used = sorted({i for ix in inputs for i in ix})
    return Problem.of(inputs, (used[0],), {i: 2 for i in used})


@pytest.fixture(params=["rust", "python"])
def greedy_backend(request, monkeypatch):
    """Both greedy backends: cotengrust's (skipped where it is not installed) and cotengra's Python one."""
    if request.param == "rust" and not hyper.rust_available():
        pytest.skip("cotengrust is not installed (pip install qhybrid[paths])")
    if request.param == "python":
        monkeypatch.setattr(hyper, "rust_available", lambda: False)
    return request.param


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_greedy_paths_are_valid_and_contract_to_the_plain_einsum(greedy_backend, seed):
    problem = _network(seed)
    (found,) = pathfind.find_paths([problem], "greedy")
    assert valid_path([list(s) for s in found.path], problem.n)
    assert _evaluate(problem, found.path).flops == found.flops
    gen = torch.Generator().manual_seed(seed)
    ops = [torch.randn(*(2,) * len(ix), dtype=torch.complex128, generator=gen) for ix in problem.inputs]
    plan = ContractionPlan(problem.inputs, problem.output, problem.sizes, found=found)
    letters = {i: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26) for k, i in enumerate(problem.sizes)}
    equation = ",".join("".join(letters[i] for i in ix) for ix in problem.inputs) + "->" + letters[problem.output[0]]
    torch.testing.assert_close(plan.contract(ops), torch.einsum(equation, *ops), atol=TOL, rtol=TOL)


def test_a_structure_gets_one_greedy_pass_per_process(fresh_planner):
    problem = _network(4)
    (first,) = pathfind.find_paths([problem], "greedy")
    assert fresh_planner.quick == 1 and fresh_planner.quick_hits == 0
    # the same network numbered differently: found by its structure, the same path
    shifted = Problem.of([tuple(i + 50 for i in ix) for ix in problem.inputs], tuple(i + 50 for i in problem.output),
                         {i + 50: s for i, s in problem.sizes.items()})  # fmt: skip
    (again,) = pathfind.find_paths([shifted], "auto", plan_time=0.0)
    assert fresh_planner.quick_hits == 1 and (again.path, again.flops) == (first.path, first.flops)
    pathfind.clear_memo()
    pathfind.find_paths([problem], "greedy")
    assert fresh_planner.quick_hits == 1  # cleared with the memo


def test_judged_networks_get_no_rescue_search(fresh_planner, monkeypatch):
    monkeypatch.setattr(pathfind, "RESCUE_TIME_S", 0.05)
    problem = _network(5)
    tight = pathfind.find_paths([problem], "greedy")[0].largest // 4  # the greedy path does not fit
    judged = pathfind.PathSettings("auto", tight, None, hyper=False, rescue=False)
    (found,) = pathfind.find_paths([problem], judged, plan_time=0.01)
    assert fresh_planner.rescues == 0 and not found.fits(tight)  # refused by the memory guard, not rescued
    pathfind.find_paths([problem], pathfind.PathSettings("auto", tight, None, hyper=False), plan_time=0.01)
    assert fresh_planner.rescues == 1


def _diagonal_circuit(n, pairs, p, seed):
    """Random diagonal gates (IsingZZ, CRZ, MultiRZ, PhaseShift) between RX mixers, one expval of a weighted
    ZZ Hamiltonian on ``pairs``."""
    rng = random.Random(seed)
    cost = qml.dot([0.3 + 0.1 * k for k in range(len(pairs))], [qml.Z(u) @ qml.Z(v) for u, v in pairs])
    kinds = [rng.choice(("zz", "crz", "multi", "phase")) for _ in pairs]

    def circuit(gamma, beta):
        for i in range(n):
            qml.Hadamard(i)
        for layer in range(p):
            for (u, v), kind in zip(pairs, kinds):
                if kind == "zz":
                    qml.IsingZZ(2 * gamma[layer], wires=[u, v])
                elif kind == "crz":
                    qml.CRZ(gamma[layer], wires=[v, u])
                elif kind == "multi":
                    qml.MultiRZ(gamma[layer], wires=[u, v, (v + 1) % n])
                else:
                    qml.PhaseShift(0.7 * gamma[layer], wires=u)
            for i in range(n):
                qml.RX(2 * beta[layer], wires=i)
        return qml.expval(cost)

    return circuit


def _value_and_grads(node, *angles):
    """The node's value at ``angles`` and its gradient for each."""
    leaves = [a.clone().requires_grad_() for a in angles]
    value = node(*leaves)
    value.backward()
    return (value.detach(), *(x.grad for x in leaves))


@pytest.mark.parametrize("seed", [0, 1])
def test_whole_circuit_words_judged_without_rescue_equal_default_qubit(greedy_backend, monkeypatch, seed):
    """A Hamiltonian measured by closed networks: its words judged as one whole-circuit program (no hyper
    tier, no rescue), kept or sent to the cone classes; values and gradients as default.qubit's."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    rng = random.Random(seed)
    n, p = 8, 2
    edges = [(i, (i + 1) % n) for i in range(n)] + [tuple(rng.sample(range(n), 2)) for _ in range(3)]
    f = _diagonal_circuit(n, edges, p, seed)
    gen = torch.Generator().manual_seed(seed)
    gamma, beta = torch.rand(p, generator=gen, dtype=torch.float64), torch.rand(p, generator=gen, dtype=torch.float64)

    got = _value_and_grads(qhybrid.qnode(qhybrid.device("tensornet", wires=n, path_cache=False))(f), gamma, beta)
    reference = qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    ref = _value_and_grads(reference, gamma, beta)
    assert pathfind.STATS.rescues == 0
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert math.isfinite(float(got[0]))

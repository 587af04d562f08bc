"""plan_cache_info().engines says what ran for noisy circuits too (issue 41, finding 9: it was empty): the density
matrix forward, the Heisenberg walk, noisy light cones, trajectories."""

import pennylane as qml
import torch

import qhybrid


def _engines(dev):
    return [(c.what, c.engine) for c in dev.plan_cache_info().engines]


def _small(x):
    qml.RX(x, 0)
    qml.DepolarizingChannel(0.1, 0)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


def test_the_density_matrix_forward_is_reported():
    dev = qhybrid.device("tensornet", wires=2)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, 0)
        qml.AmplitudeDamping(0.2, 0)
        qml.CNOT([0, 1])
        return qml.probs(wires=[0, 1])

    circuit(0.3)
    ((what, engine),) = _engines(dev)
    assert (what, engine) == ("noisy circuit, 2 wires", "density matrix")
    assert "noise='exact'" in dev.plan_cache_info().engines[0].reason


def test_the_heisenberg_walk_is_reported():
    dev = qhybrid.device("tensornet", wires=2)
    qml.QNode(_small, dev)(torch.rand(6, dtype=torch.float64))
    assert _engines(dev) == [("noisy circuit, 2 wires", "Heisenberg walk (Pauli basis)")]


def test_noisy_light_cones_are_reported_with_their_classes():
    n = 14
    dev = qhybrid.device("tensornet", wires=n)

    @qml.qnode(dev)
    def wide(x):
        for w in range(n):
            qml.RX(x, w)
            qml.BitFlip(0.1, w)
        for w in range(0, n - 1, 2):
            qml.CNOT([w, w + 1])
        return [qml.expval(qml.Z(w)) for w in range(n)]

    wide(0.2)
    engines = _engines(dev)
    assert engines[0] == (f"noisy circuit, {n} wires", "light cones")
    assert all(engine == "density matrix" and what.startswith("cone class") for what, engine in engines[1:])
    assert len(engines) > 1


def test_trajectories_are_reported_beside_the_pure_engine():
    dev = qhybrid.device("tensornet", wires=2, noise="trajectories", trajectories=8, seed=1)
    qml.QNode(_small, dev)(0.3)
    engines = _engines(dev)
    assert engines[0] == ("noisy circuit, 2 wires", "trajectories")
    assert engines[1][1] == "state vector"

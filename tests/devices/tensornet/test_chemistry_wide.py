"""Many-term molecular-style Hamiltonians (X/Y words) after excitation gates on light cones (the engine wide
circuits use), constant and trainable coefficients, against default.qubit."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate


def _sentence(rng, n: int, terms: int):
    words = []
    for _ in range(terms):
        start = int(rng.integers(n - 3))
        letters = rng.choice(list("IXYZ"), size=4)
        ops = [getattr(qml, L)(start + j) for j, L in enumerate(letters) if L != "I"] or [qml.Z(start)]
        words.append(qml.prod(*ops) if len(ops) > 1 else ops[0])
    return rng.normal(size=terms), words


@pytest.mark.parametrize("trainable", [False, True])
def test_excitation_ansatz_with_a_many_term_hamiltonian_on_light_cones(trainable, monkeypatch):
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # light cones, whatever the width
    built = []
    real = _simulate.build_program
    monkeypatch.setattr(_simulate, "build_program", lambda *a: built.append(type(p := real(*a)).__name__) or p)
    rng = np.random.default_rng(3)
    n = 8
    c0, words = _sentence(rng, n, 40)

    def circuit(x, c):
        qml.BasisState(np.array([1, 1, 0, 0, 1, 1, 0, 0]), wires=range(n))
        qml.DoubleExcitation(x[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(x[1], wires=[1, 2])
        qml.DoubleExcitation(x[2], wires=[4, 5, 6, 7])
        qml.OrbitalRotation(x[3], wires=[2, 3, 4, 5])
        qml.FermionicSWAP(x[4], wires=[3, 4])
        return qml.expval(qml.Hamiltonian(c, words))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x0 = torch.tensor(rng.normal(size=5), dtype=torch.float64)
    out = []
    for f in (ours, ref):
        x = x0.clone().requires_grad_()
        c = torch.tensor(c0, dtype=torch.float64, requires_grad=trainable)
        v = f(x, c if trainable else c.detach().numpy())
        v.backward()
        out.append((v.detach(), x.grad, c.grad))
    assert abs(float(out[0][0] - out[1][0])) < 1e-10
    assert torch.allclose(out[0][1], out[1][1], atol=1e-10, rtol=0)
    if trainable:
        assert torch.allclose(out[0][2], out[1][2], atol=1e-10, rtol=0)
    assert built and "VectorProgram" not in built

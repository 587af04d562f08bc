"""Circuits at full bond dimension equal default.qubit to 1e-10: values and gradients, every gate kind
(distant and three-wire gates included), batched and float32."""

import numpy as np
import pennylane as qml
import pytest
import torch

from _reference import random_ops, run_both

N = 6


def _measure(n):
    return [qml.expval(qml.PauliZ(i)) for i in range(n)] + [
        qml.expval(qml.PauliX(0) @ qml.PauliY(n // 2) @ qml.PauliZ(n - 1)),
        qml.probs(wires=[n - 1, 1]),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_circuits_every_gate_kind(seed):
    rng = np.random.default_rng(seed)
    params = torch.tensor(rng.uniform(-np.pi, np.pi, 200), dtype=torch.float64, requires_grad=True)

    def circuit(p):
        it = iter(p)
        for op in random_ops(N, 40, np.random.default_rng(seed), lambda: next(it)):
            qml.apply(op)
        qml.GlobalPhase(p[-1])
        return _measure(N)

    ours, ref, dev = run_both(circuit, N, params)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-10)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), params)[0]
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), params)[0]
    assert torch.allclose(g1, g2, atol=1e-10)
    assert dev.last_truncation.discarded_weight == 0.0


@pytest.mark.parametrize("dtype, atol", [(torch.complex128, 1e-10), (torch.complex64, 1e-4)])
def test_batched_inputs_values_and_gradients(dtype, atol):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = torch.rand(4, N, dtype=real, requires_grad=True)
    w = torch.rand(2, N, 3, dtype=real, requires_grad=True)

    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(N), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(N))
        qml.Toffoli([0, 3, 5])
        qml.CSWAP([4, 1, 2])
        return _measure(N)

    ours, ref, _ = run_both(circuit, N, x, w, dtype=dtype)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == real
        assert torch.allclose(a, b.to(real), atol=atol)
    g1 = torch.autograd.grad(sum(o.sum() for o in ours), [x, w])
    g2 = torch.autograd.grad(sum(o.sum() for o in ref), [x, w])
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b.to(real), atol=atol * 10)


def test_basis_state_start_and_unused_wires():
    def circuit(t):
        qml.BasisState(np.array([1, 0, 1]), wires=[0, 2, 4])
        qml.RX(t, wires=2)
        qml.CNOT([4, 1])
        return [qml.expval(qml.PauliZ(i)) for i in range(N)]

    t = torch.tensor(0.4, dtype=torch.float64)
    ours, ref, _ = run_both(circuit, N, t)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-12)


def test_state_preparation_is_refused_clearly():
    import qhybrid

    dev = qhybrid.device("tensornet", wires=2, method="mps")

    @qhybrid.qnode(dev)
    def circuit():
        qml.StatePrep(np.array([0.6, 0.8, 0, 0]), wires=[0, 1])
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(qml.exceptions.DeviceError, match="basis state"):
        circuit()

"""The bound program's planned run (``engines/statevector/planned``): every state in one workspace, one op a block.

Random circuits whose bound programs are a product state, Kronecker blocks on the first, middle and last wires
and monomial steps with and without phases (CNOT, CY, Y, SWAP), batched and not, against default.qubit to 1e-10:
values and gradients. A spy checks that the cases took the planned path in every block layout (some fold
into a product state alone: SWAPs and Ys between single-wire layers).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.statevector import planned

TOL = 1e-10


def _circuit(n: int, layers: int, rng):
    monomials = [rng.choice(["CNOT", "CY", "PauliY", "SWAP"]) for _ in range(layers)]
    odd = int(rng.integers(0, n))

    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        for layer in range(layers):
            for i in range(n):
                if layer == 1 and i == odd:
                    qml.RX(w[layer, i, 0], wires=i)  # a chain of another kind inside a block
                else:
                    qml.Rot(*w[layer, i], wires=i)
            name = monomials[layer]
            for i in range(n - 1):
                if name in ("CNOT", "CY", "SWAP"):
                    getattr(qml, name)(wires=[i, i + 1])
                else:
                    getattr(qml, name)(wires=i)
        return [qml.expval(qml.Z(i)) for i in range(n)] + [qml.expval(qml.Z(0) @ qml.Z(n - 1))]

    return f


@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("seed", range(4))
def test_planned_run_matches_default_qubit(seed, batch):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    layers = int(rng.integers(2, 4))
    shape = (n,) if batch is None else (batch, n)
    x = torch.tensor(rng.uniform(-np.pi, np.pi, shape))
    w = torch.tensor(rng.uniform(-np.pi, np.pi, (layers, n, 3)))
    f = _circuit(n, layers, rng)
    ref = qml.QNode(f, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(f)

    def loss_and_grads(qn, x, w):
        out = torch.stack(list(qn(x, w)))
        weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype).reshape(-1, *[1] * (out.ndim - 1))
        return out.detach(), torch.autograd.grad((out * weights).sum(), (x, w))

    want, want_grads = loss_and_grads(ref, x.clone().requires_grad_(True), w.clone().requires_grad_(True))
    xs, ws = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    for _ in range(3):  # the first calls plan; later ones run the bound node with its steady caches
        got, got_grads = loss_and_grads(ours, xs, ws)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for g, r in zip(got_grads, want_grads):
            torch.testing.assert_close(g, r, atol=TOL, rtol=0)


def test_every_block_layout_is_exercised():
    """Across the cases above, blocks on the first, middle and last wires and monomials all take the planned
    path (so that each branch of ``planned.run`` and ``planned.adjoint`` is compared with default.qubit)."""
    seen = set()
    original = planned._shape
    try:
        planned._shape = lambda a, N, B: (lambda how: (seen.add(how[0]), how)[1])(original(a, N, B))
        for seed in range(4):
            for batch in (None, 3):
                rng = np.random.default_rng(seed)
                n = int(rng.integers(3, 8))
                layers = int(rng.integers(2, 4))
                shape = (n,) if batch is None else (batch, n)
                x = torch.tensor(rng.uniform(-np.pi, np.pi, shape), requires_grad=True)
                w = torch.tensor(rng.uniform(-np.pi, np.pi, (layers, n, 3)), requires_grad=True)
                ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(_circuit(n, layers, rng))
                for _ in range(2):
                    torch.stack(list(ours(x, w))).sum().backward()
    finally:
        planned._shape = original
    assert {"first", "middle", "last", "gather"} <= seen, seen

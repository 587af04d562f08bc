"""Second derivatives through ``qhybrid.qnode`` (``create_graph=True``) with the default ``max_diff``, every
diff_method, against default.qubit (the README's Hessian claim; issue 20, item 2)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _circuit(x, w):
    """x: data (broadcast when batched); w: three weights, each entering more than one gate."""
    qml.RY(x, 0)
    qml.RX(w[0], 1)
    qml.CNOT([0, 1])
    qml.Rot(w[1], w[0], 0.3, wires=2)
    qml.CRZ(w[2], [2, 0])
    qml.IsingXX(w[1], [1, 2])
    qml.RY(w[2], 2)
    return qml.expval(qml.Z(0) @ qml.X(2)), qml.var(qml.Y(1))


def _loss(f):
    def loss(x, w):
        a, b = f(x, w)
        return (a + 2.0 * b).sum()

    return loss


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("diff_method", ["best", "adjoint", "parameter-shift", "backprop"])
def test_hessian_in_data_and_weights_matches_default_qubit(diff_method, batched):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(_circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(_circuit)
    x = torch.tensor([0.2, -0.9, 1.4] if batched else 0.6, dtype=torch.float64)
    w = torch.tensor([0.4, -1.1, 0.8], dtype=torch.float64)
    h = torch.autograd.functional.hessian(_loss(ours), (x, w))
    h_ref = torch.autograd.functional.hessian(_loss(ref), (x, w))
    for row, row_ref in zip(h, h_ref):
        for a, b in zip(row, row_ref):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert h[1][1].abs().sum() > 0.1

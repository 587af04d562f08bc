"""expval / var / probs of mid-circuit measurement values through ``qhybrid.qnode`` (and the plugin), against
default.qubit: values and gradients, for every gradient method, with a batched input."""

import pennylane as qml
import pytest
import torch

import qhybrid


def _circuit(x, w):
    qml.RX(x, 0)
    qml.RY(w[0], 1)
    qml.CNOT([0, 1])
    m = qml.measure(1)
    qml.cond(m, qml.RY)(w[1], 0)
    qml.CRZ(w[2], [0, 2])
    m2 = qml.measure(0)
    qml.RX(w[3], 2)
    return (
        qml.expval(m),
        qml.probs(op=m),
        qml.var(m + 2 * m2),
        qml.probs(op=[m, m2]),
        qml.expval(m * m2),
        qml.expval(qml.Z(2)),
    )


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("seed", [0, 1])
def test_measurement_value_statistics_match_default_qubit(diff_method, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(3, generator=gen, dtype=torch.float64) * 3  # a batch of three
    w = (torch.rand(4, generator=gen, dtype=torch.float64) * 3).requires_grad_()
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=5), interface="torch", diff_method="backprop")
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=5), diff_method=diff_method)(_circuit)
    expected, got = ref(x, w), ours(x, w)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)
    (g_ref,) = torch.autograd.grad(sum(r.sum() for r in expected), w)
    (g,) = torch.autograd.grad(sum(r.sum() for r in got), w)
    torch.testing.assert_close(g, g_ref, atol=1e-10, rtol=0)


def test_the_plugin_path_answers_the_same():
    x, w = torch.tensor(0.4, dtype=torch.float64), torch.tensor([0.1, 0.9, -0.3, 1.2], dtype=torch.float64)
    ref = qml.QNode(_circuit, qml.device("default.qubit", wires=5), interface="torch")(x, w)
    got = qml.QNode(_circuit, qml.device("qhybrid.tensornet", wires=5), interface="torch")(x, w)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)

"""QLayer: bitstring probabilities against default.qubit, shapes, dtypes and the state_dict contract."""

import math

import pennylane as qml
import pytest
import torch

import qhybrid

from _layer_reference import jacobians, reference_qnode

N_QUBITS = 3


def probs(wires):
    return qml.probs(wires=wires)


@pytest.mark.parametrize(
    "encoding, ansatz, reupload",
    [
        ("angle", "strongly-entangling", False),
        ("angle", "hardware-efficient", True),
        ("iqp", "basic-entangler", True),
        ("amplitude", "strongly-entangling", False),
    ],
)
def test_matches_default_qubit_float64(encoding, ansatz, reupload):
    layer = qhybrid.QLayer(N_QUBITS, 2, encoding=encoding, ansatz=ansatz, reupload=reupload).double()
    n = 2**N_QUBITS if encoding == "amplitude" else N_QUBITS
    x = (torch.rand(3, n, dtype=torch.float64) * math.pi).requires_grad_()
    out = layer(x)
    assert out.shape == (3, 2**N_QUBITS)
    torch.testing.assert_close(out.sum(-1), torch.ones(3, dtype=torch.float64), atol=1e-12, rtol=0)

    ref = reference_qnode(probs, wires=range(N_QUBITS), encoding=encoding, ansatz=ansatz, reupload=reupload)
    x_ref = x.detach().clone().requires_grad_()
    w_ref = layer.weight.detach().clone().requires_grad_()
    expected = ref(x_ref, w_ref)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    for got, want in zip(jacobians(out, [x, layer.weight]), jacobians(expected, [x_ref, w_ref])):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def test_float32_probabilities():
    layer = qhybrid.QLayer(N_QUBITS, 1)
    x = torch.rand(5, N_QUBITS)
    p = layer(x)
    assert p.dtype == torch.float32 and p.shape == (5, 8)
    assert (p >= -1e-7).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(5), atol=1e-5, rtol=0)
    ref = reference_qnode(probs, wires=range(N_QUBITS))
    torch.testing.assert_close(p.double(), ref(x.double(), layer.weight.detach().double()), atol=1e-5, rtol=0)


def test_unbatched_and_classifier_use():
    layer = qhybrid.QLayer(2, 2)
    assert layer(torch.rand(2)).shape == (4,)
    model = torch.nn.Sequential(torch.nn.Linear(5, 2), layer)
    x, y = torch.randn(6, 5), torch.tensor([0, 1, 2, 3, 0, 1])
    loss = torch.nn.functional.nll_loss(torch.log(model(x) + 1e-9), y)
    loss.backward()
    assert layer.weight.grad is not None and model[0].weight.grad is not None


def test_wrong_feature_count():
    with pytest.raises(ValueError, match=r"QLayer expects 3 input features.*got 2 features"):
        qhybrid.QLayer(3)(torch.rand(4, 2))


def test_state_dict_round_trip():
    a, b = qhybrid.QLayer(N_QUBITS, 2), qhybrid.QLayer(N_QUBITS, 2)
    x = torch.rand(2, N_QUBITS)
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b(x), a(x))

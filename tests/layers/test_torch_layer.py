"""TorchLayer: a qhybrid qnode wrapped as an nn.Module, checked against qml.qnn.TorchLayer on default.qubit."""

import math

import pennylane as qml
import pytest
import torch

import qhybrid

N = 3


def circuit(inputs, w, bias):
    qml.AngleEmbedding(inputs, wires=range(N))
    qml.StronglyEntanglingLayers(w, wires=range(N))
    qml.RZ(bias, wires=0)
    qml.RX(bias, wires=1)
    return [qml.expval(qml.Z(i)) for i in range(N)]


SHAPES = {"w": (2, N, 3), "bias": 1}


def make_pair(measure=circuit):
    ours = qhybrid.TorchLayer(qhybrid.qnode(qhybrid.device("tensornet", wires=N))(measure), SHAPES)
    ref_qnode = qml.qnode(qml.device("default.qubit"), interface="torch", diff_method="backprop")(measure)
    ref = qml.qnn.TorchLayer(ref_qnode, SHAPES)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def test_matches_pennylane_torchlayer_with_gradients():
    ours, ref = make_pair()
    ours, ref = ours.double(), ref.double()
    x = (torch.rand(5, N, dtype=torch.float64) * math.pi).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    out, expected = ours(x), ref(x_ref)
    assert out.shape == (5, N)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
    cot = torch.randn(5, N, dtype=torch.float64)
    (out * cot).sum().backward()
    (expected * cot).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-10, rtol=0)
    for name in SHAPES:
        torch.testing.assert_close(getattr(ours, name).grad, getattr(ref, name).grad, atol=1e-10, rtol=0)


def test_shapes_dtype_and_state_dict():
    ours, _ = make_pair()
    assert set(ours.state_dict()) == {"w", "bias"}
    assert ours.bias.shape == () and ours.w.shape == (2, N, 3)
    assert 0 <= ours.w.min() and ours.w.max() < 2 * math.pi
    out = ours(torch.rand(2, 4, N))
    assert out.shape == (2, 4, N) and out.dtype == torch.float32
    assert ours(torch.rand(N)).shape == (N,)


def test_mixed_measurements_concatenate():
    def mixed(inputs, w):
        qml.AngleEmbedding(inputs, wires=range(2))
        qml.BasicEntanglerLayers(w, wires=range(2))
        return qml.expval(qml.Z(0)), qml.probs(wires=[0, 1])

    layer = qhybrid.TorchLayer(qhybrid.qnode(qhybrid.device("tensornet", wires=2))(mixed), {"w": (1, 2)})
    assert layer(torch.rand(3, 2)).shape == (3, 5)
    assert layer(torch.rand(2)).shape == (5,)


def test_init_method():
    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=N))(circuit)
    layer = qhybrid.TorchLayer(qn, SHAPES, init_method=torch.nn.init.zeros_)
    assert torch.count_nonzero(layer.w) == 0
    w0 = torch.full((2, N, 3), 0.5)
    layer = qhybrid.TorchLayer(qn, SHAPES, init_method={"w": w0, "bias": torch.nn.init.ones_})
    assert torch.equal(layer.w.detach(), w0) and layer.bias.item() == 1.0
    with pytest.raises(ValueError, match="has shape"):
        qhybrid.TorchLayer(qn, SHAPES, init_method={"w": torch.zeros(3), "bias": torch.nn.init.ones_})


def test_signature_validation():
    dev = qhybrid.device("tensornet", wires=1)

    @qhybrid.qnode(dev)
    def no_inputs(x, w):
        return qml.expval(qml.Z(0))

    @qhybrid.qnode(dev)
    def two_weights(inputs, w, v):
        return qml.expval(qml.Z(0))

    with pytest.raises(TypeError, match="named 'inputs'"):
        qhybrid.TorchLayer(no_inputs, {"w": 1})
    with pytest.raises(ValueError, match=r"missing \['v'\]"):
        qhybrid.TorchLayer(two_weights, {"w": 1})
    with pytest.raises(ValueError, match="data argument"):
        qhybrid.TorchLayer(two_weights, {"inputs": 1, "w": 1, "v": 1})


@pytest.mark.parametrize("static", [True, False])
def test_repeat_steps_match_pennylane_torchlayer(static):
    """Training steps: later calls reuse the trace (static_structure) with the updated weights."""
    ours, ref = make_pair()
    ours = qhybrid.TorchLayer(ours.qnode, SHAPES, {k: v.detach() for k, v in ours.state_dict().items()}, static_structure=static)
    ours, ref = ours.double(), ref.double()
    opts = [torch.optim.SGD(m.parameters(), lr=0.2) for m in (ours, ref)]
    for _ in range(3):
        x = (torch.rand(4, N, dtype=torch.float64) * math.pi).requires_grad_()
        x_ref = x.detach().clone().requires_grad_()
        out, expected = ours(x), ref(x_ref)
        torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)
        (out**2).sum().backward()
        (expected**2).sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-10, rtol=0)
        for name in SHAPES:
            torch.testing.assert_close(getattr(ours, name).grad, getattr(ref, name).grad, atol=1e-10, rtol=0)
        for opt in opts:
            opt.step()
            opt.zero_grad()
    assert (ours._run._static.traces == 1) if static else ours._run._static is None

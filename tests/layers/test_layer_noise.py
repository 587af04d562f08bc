"""Noisy layers: ExpQLayer / QLayer with ``noise=`` and a TorchLayer over a ``qml.add_noise`` qnode, against the
same circuits written with channels on default.mixed (values and weight gradients)."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.layers._noise import layer_noise

TOL = 1e-10


def _reference(x, w, noise, ansatz):
    dev = qml.device("default.mixed", wires=3)

    @qml.qnode(dev, interface="torch")
    def circuit(x, w):
        qml.AngleEmbedding(x, wires=range(3), rotation="Y")
        noise(range(3))
        for layer in range(w.shape[0]):
            ansatz.layer(w[layer], list(range(3)), layer)
            noise(range(3))
        return [qml.expval(qml.Z(i)) for i in range(3)], qml.probs(wires=range(3))

    return circuit(x, w)


@pytest.mark.parametrize(
    "noise", [0.05, lambda wires: [qml.AmplitudeDamping(0.1, w) for w in wires]], ids=["depolarizing", "callable"]
)
def test_exp_and_prob_layers_under_noise(noise):
    x = torch.rand(6, 3, dtype=torch.float64)
    exp_layer = qhybrid.ExpQLayer(3, 2, noise=noise).double()
    prob_layer = qhybrid.QLayer(3, 2, noise=noise).double()
    prob_layer.weight.data.copy_(exp_layer.weight.data)
    expvals, probs = _reference(x, exp_layer.weight, layer_noise(noise), exp_layer.ansatz)
    out = exp_layer(x)
    torch.testing.assert_close(out, torch.stack(expvals, -1), atol=TOL, rtol=0)
    torch.testing.assert_close(prob_layer(x), probs, atol=TOL, rtol=0)
    (g,) = torch.autograd.grad(out.sum(), exp_layer.weight)
    (h,) = torch.autograd.grad(torch.stack(expvals, -1).sum(), exp_layer.weight)
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_noiseless_and_bad_noise():
    assert layer_noise(None) is None
    with pytest.raises(ValueError, match="depolarizing probability"):
        qhybrid.ExpQLayer(2, noise=1.5)


def test_torch_layer_over_a_noise_model():
    model = qml.NoiseModel({qml.noise.op_eq(qml.CNOT): qml.noise.partial_wires(qml.PhaseDamping, 0.2)})
    dev = qhybrid.device("tensornet", wires=2)

    def circuit(inputs, w):
        qml.AngleEmbedding(inputs, wires=range(2))
        qml.RY(w[0], 0)
        qml.CNOT([0, 1])
        qml.RX(w[1], 1)
        return [qml.expval(qml.X(i)) for i in range(2)]

    noisy = qml.add_noise(qhybrid.qnode(dev)(circuit), model)
    layer = qhybrid.TorchLayer(noisy, weight_shapes={"w": 2}).double()
    x = torch.rand(4, 2, dtype=torch.float64)
    ref = qml.add_noise(qml.QNode(circuit, qml.device("default.mixed", wires=2), interface="torch"), model)
    torch.testing.assert_close(layer(x), torch.stack(ref(x, layer.w), -1), atol=TOL, rtol=0)

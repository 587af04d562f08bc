"""The preprocessing cache's two ways to its gather maps: parameters handed through untouched (no probes)
and decomposed templates (probed), each against default.qubit on later calls with other values."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.interfaces import _preprocess


@pytest.fixture
def spied(monkeypatch):
    calls = []
    real = _preprocess._index_maps

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_preprocess, "_index_maps", spy)
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    return calls


def _both(circuit, wires):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=wires))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch")
    return ours, ref


def _check(ours, ref, *args):
    a = [x.clone().requires_grad_() for x in args]
    b = [x.clone().requires_grad_() for x in args]
    va, vb = torch.stack(list(ours(*a))), torch.stack(list(ref(*b)))
    (va * torch.arange(1.0, 1 + va.shape[0]).reshape(-1, *[1] * (va.ndim - 1))).sum().backward()
    (vb * torch.arange(1.0, 1 + vb.shape[0]).reshape(-1, *[1] * (vb.ndim - 1))).sum().backward()
    np.testing.assert_allclose(va.detach().numpy(), vb.detach().numpy(), atol=1e-10)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), atol=1e-10)


def test_parameters_handed_through_need_no_probes(spied):
    def circuit(x, w):
        qml.RX(x[0], 0)
        qml.RY(w, 1)  # a batched parameter: read whole, in its own shape
        qml.CRZ(x[1], [0, 1])
        qml.IsingZZ(x[2], [1, 2])
        return qml.expval(qml.Z(0) @ qml.Z(2)), qml.expval(qml.X(1))

    ours, ref = _both(circuit, 3)
    rng = np.random.default_rng(3)
    for _ in range(3):  # the first call fills the cache; the later ones gather from it
        x, w = torch.tensor(rng.uniform(-3, 3, 3)), torch.tensor(rng.uniform(-3, 3, 4))
        _check(ours, ref, x, w)
    assert not spied


def test_decomposed_templates_are_probed(spied):
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(3))
        return qml.expval(qml.Z(0) @ qml.Y(2)), qml.expval(qml.X(1))

    ours, ref = _both(circuit, 3)
    rng = np.random.default_rng(4)
    for _ in range(3):
        _check(ours, ref, torch.tensor(rng.uniform(-3, 3, (2, 3, 3))))
    assert len(spied) == 1


def test_a_tensor_read_by_many_gates_and_two_equal_tensors_are_different_structures():
    """The key numbers the distinct tensors among a tape's parameters (a lazily recorded tape reads a few of them
    thousands of times): ``[a, a]`` and ``[c, c]`` share a key, ``[a, b]`` does not, and each runs right."""
    dev = qhybrid.device("tensornet", wires=2)
    a, b, c = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.3, -1.1, 0.8))

    def tape(p, q):
        return qml.tape.QuantumScript([qml.RX(p, 0), qml.IsingZZ(q, [0, 1]), qml.RY(q, 1)], [qml.expval(qml.Y(0) @ qml.X(1))])

    def key(t):
        return _preprocess._structure_key(dev, t, _preprocess.tape_parameters_fast(t))

    assert key(tape(a, a)) == key(tape(c, c)) != key(tape(a, b))
    ref = qml.device("default.qubit", wires=2)
    for p, q in [(a, a), (a, b), (c, c), (b, a)]:
        (ours,) = qhybrid.execute([tape(p, q)], dev, diff_method="adjoint")
        want = qml.execute([tape(p, q)], ref, diff_method="backprop")[0]
        grads = torch.autograd.grad(ours, (p, q) if p is not q else (p,))
        wants = torch.autograd.grad(want, (p, q) if p is not q else (p,))
        assert abs(float(ours.detach() - want.detach())) < 1e-10
        assert all(abs(float(g - w)) < 1e-10 for g, w in zip(grads, wants))


def test_an_argument_that_stops_and_starts_requiring_grad_gets_its_gradient_only_when_it_does(spied):
    """Which gathered parameters are trainable is remembered per pattern of ``requires_grad`` of the inputs."""

    def circuit(w, x):
        for k in range(3):
            qml.RX(2 * x[k], k)
            qml.IsingZZ(w[0] - 0.5, [k, (k + 1) % 3])
            qml.RY(w[1] * 3, k)
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(2))

    ours, ref = _both(circuit, 3)
    rng = np.random.default_rng(8)
    for x_grad in (False, True, False, True):
        w, x = torch.tensor(rng.uniform(-3, 3, 2)), torch.tensor(rng.uniform(-3, 3, 3))
        outs = []
        for node in (ours, ref):
            wa, xa = w.clone().requires_grad_(), x.clone().requires_grad_(x_grad)
            sum(k * v for k, v in enumerate(node(wa, xa), 1)).backward()
            outs.append((wa.grad, xa.grad))
        np.testing.assert_allclose(outs[0][0].numpy(), outs[1][0].numpy(), atol=1e-10)
        assert (outs[0][1] is None) == (not x_grad)
        if x_grad:
            np.testing.assert_allclose(outs[0][1].numpy(), outs[1][1].numpy(), atol=1e-10)


def test_trainable_positions_follow_the_inputs_of_each_rebound_copy():
    """A template's rebound copies share its memo: the positions remembered for one pattern of ``requires_grad``
    are not handed to another."""
    from qhybrid._variant import Gather, Variant

    tape = qml.tape.QuantumScript([qml.RX(0.0, 0), qml.RY(0.0, 0), qml.RZ(0.0, 0)], [qml.expval(qml.Z(0))])
    template = Gather((), ((0, torch.tensor(0)), ("const", 0.5), (1, torch.tensor(1))))
    w = torch.zeros(2, dtype=torch.float64)
    for grads, want in [((True, False), [0]), ((False, True), [2]), ((True, True), [0, 2]), ((False, False), [])]:
        inputs = [w.clone().requires_grad_(g) for g in grads]
        assert Variant(tape, None, template.rebound(inputs)).trainable_positions() == want


def test_a_device_made_at_a_dropped_devices_id_does_not_take_its_tape(monkeypatch):
    """The cache's key holds the device's id, not the device: a device made where a dropped one lay (CPython reuses the
    address; a script making a device per experiment met it in 64 of 400 devices) took the dropped one's tape, here
    its wire order (``probs()`` of wires [1, 0] in the order of [0, 1]). The collision is forced: every device keys
    alike."""
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    real = _preprocess._structure_key
    monkeypatch.setattr(_preprocess, "_structure_key", lambda device, tape, params: real(None, tape, params))

    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        return qml.probs()

    x = torch.tensor([0.4, 1.1], dtype=torch.float64)
    for wires in ([0, 1], [1, 0], [0, 1]):
        got = qhybrid.qnode(qhybrid.device("tensornet", wires=wires), diff_method="adjoint")(circuit)(x)
        want = qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch")(x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12, rtol=0)

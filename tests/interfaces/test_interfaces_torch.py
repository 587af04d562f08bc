"""ExecuteTapes / qhybrid.execute: torch autograd semantics and PennyLane result structure."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _bound
from qhybrid.errors import GradientError
from qhybrid.gradients import Launcher

DIFF_METHODS = ["adjoint", "parameter-shift"]


def _circuit(x, w, wires=3):
    qml.AngleEmbedding(x, wires=range(wires), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(wires))


def _pair(diff_method):
    dev = qhybrid.device("tensornet", wires=3)

    @qhybrid.qnode(dev, diff_method=diff_method)
    def ours(x, w):
        _circuit(x, w)
        return [qml.expval(qml.Z(i)) for i in range(3)]

    @qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    def ref(x, w):
        _circuit(x, w)
        return [qml.expval(qml.Z(i)) for i in range(3)]

    return ours, ref


def _inputs(batch=4):
    x = torch.rand(batch, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True)
    return x, w


@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_qnode_structure_and_values_match_pennylane(diff_method):
    ours, ref = _pair(diff_method)
    x, w = _inputs()
    a, b = ours(x, w), ref(x, w)
    assert type(a) is type(b) is list
    for u, v in zip(a, b):
        assert u.shape == v.shape == (4,)
        torch.testing.assert_close(u, v, atol=1e-12, rtol=0)


@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_grad_tensors_for_non_scalar_outputs(diff_method):
    ours, ref = _pair(diff_method)
    x, w = _inputs()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    gt = torch.randn(4, 3, dtype=torch.float64)
    torch.autograd.backward(torch.stack(ours(x, w), -1), grad_tensors=gt)
    torch.autograd.backward(torch.stack(ref(x2, w2), -1), grad_tensors=gt)
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-10, rtol=0)
    torch.testing.assert_close(w.grad, w2.grad, atol=1e-10, rtol=0)


@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_retain_graph_backward_twice_gives_same_grads(diff_method):
    ours, _ = _pair(diff_method)
    x, w = _inputs()
    loss = torch.stack(ours(x, w)).sum()
    loss.backward(retain_graph=True)
    first = w.grad.clone()
    w.grad = None
    loss.backward()
    torch.testing.assert_close(w.grad, first, atol=0, rtol=0)


@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_hessian_matches_default_qubit(diff_method):
    dev = qhybrid.device("tensornet", wires=2)

    def f(p):
        qml.RX(p[0], wires=0)
        qml.RY(p[1], wires=1)
        qml.CNOT(wires=[0, 1])
        qml.CRX(p[0] * p[1], wires=[1, 0])
        return qml.expval(qml.Z(0) @ qml.X(1) + 0.5 * qml.Y(1))

    ours = qhybrid.qnode(dev, diff_method=diff_method, max_diff=2)(f)
    ref = qml.qnode(qml.device("default.qubit"), interface="torch", diff_method="backprop")(f)
    p = torch.tensor([0.4, -1.1], dtype=torch.float64)
    h1 = torch.autograd.functional.hessian(ours, p)
    h2 = torch.autograd.functional.hessian(ref, p)
    torch.testing.assert_close(h1, h2, atol=1e-10, rtol=0)
    assert h1.abs().sum() > 0.1


def test_only_requires_grad_parameters_enter_the_graph(monkeypatch):
    dev = qhybrid.device("tensornet", wires=3)
    x = torch.rand(4, 3, dtype=torch.float64)  # data without grad
    w = torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.make_qscript(_circuit)(x, w)
    tape = tape.copy(measurements=[qml.expval(qml.Z(0))])
    seen = {}
    original = qhybrid.AdjointTN.forward

    def spy(self, variants, trainable, **kwargs):
        seen["trainable"] = trainable
        return original(self, variants, trainable, **kwargs)

    monkeypatch.setattr(_bound, "ENABLED", False)  # the general path (the bound one takes no trainable list)
    qhybrid.AdjointTN.forward = spy
    try:
        (res,) = qhybrid.execute([tape], dev, diff_method="adjoint")
    finally:
        qhybrid.AdjointTN.forward = original
    res.sum().backward()
    assert len(seen["trainable"][0]) == w.numel()  # the 3 embedding angles are not differentiated
    assert w.grad is not None and x.grad is None


def test_no_grad_mode_and_diff_method_none_return_plain_tensors():
    ours, _ = _pair(None)
    x, w = _inputs()
    out = ours(x, w)
    assert all(not o.requires_grad for o in out)
    ours2, _ = _pair("adjoint")
    with torch.no_grad():
        assert all(not o.requires_grad for o in ours2(x, w))


def test_execute_many_tapes_in_one_call_and_structures():
    dev = qhybrid.device("tensornet", wires=2)
    a = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    t1 = qml.tape.QuantumScript([qml.RX(a, 0)], [qml.expval(qml.Z(0))])
    t2 = qml.tape.QuantumScript([qml.RX(a, 0), qml.CNOT([0, 1])], [qml.expval(qml.Z(1)), qml.probs(wires=[0, 1])])
    r1, r2 = qhybrid.execute([t1, t2], dev, diff_method="parameter-shift")
    assert isinstance(r1, torch.Tensor) and r1.shape == ()
    assert isinstance(r2, tuple) and r2[1].shape == (4,)
    (r1 + r2[0] + r2[1][3]).backward()
    expected = -2 * torch.sin(a.detach()) + torch.sin(a.detach()) / 2
    torch.testing.assert_close(a.grad, expected, atol=1e-12, rtol=0)


def test_parameter_shift_sends_all_shifted_tapes_in_one_call():
    dev = qhybrid.device("tensornet", wires=3)
    launcher = Launcher(dev)
    jpc = qhybrid.ParameterShift(launcher)
    x, w = _inputs(batch=2)
    tapes = []
    for k in range(3):
        t = qml.tape.make_qscript(_circuit)(x, w)
        (t,), _ = dev.preprocess_transforms()([t.copy(measurements=[qml.expval(qml.Z(k))])])
        tapes.append(t)
    from qhybrid.interfaces.torch import execute_variants
    from qhybrid._variant import Variant

    res = execute_variants([Variant.of(t) for t in tapes], jpc)
    assert launcher.calls == 1
    sum(r[0].sum() for r in res).backward()
    assert launcher.calls == 2  # forward + one call for every shifted tape of every tape


@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_broadcast_data_gradients_per_sample(diff_method):
    """Trainable broadcast inputs get per-element gradients (PennyLane's parameter-shift refuses)."""
    ours, ref = _pair(diff_method)
    x, w = _inputs(batch=5)
    x2 = x.detach().clone().requires_grad_()
    torch.stack(ours(x, w)).pow(2).sum().backward()
    torch.stack(ref(x2, w)).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-10, rtol=0)


def test_float32_parameters_get_float32_gradients():
    ours, _ = _pair("adjoint")
    x = torch.rand(4, 3, requires_grad=True)
    w = torch.rand(2, 3, 3, requires_grad=True)
    out = ours(x, w)
    assert out[0].dtype == torch.float64
    torch.stack(out).sum().backward()
    assert x.grad.dtype == torch.float32 and w.grad.dtype == torch.float32


def test_device_shots_reach_qhybrid_qnodes_with_statistical_accuracy():
    """A device with shots samples (never a silent exact result); parameter-shift differentiates."""
    n = 20000
    dev = qhybrid.device("tensornet", wires=2, shots=n, seed=11)

    @qhybrid.qnode(dev, diff_method="best")
    def f(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    values = torch.stack([f(x) for _ in range(3)])
    assert values.unique().numel() > 1  # sampled, not exact
    exact = torch.cos(x.detach())
    se = torch.sqrt((1 - exact**2) / n)
    assert (values - exact).abs().max() < 5 * se
    f(x).backward()
    se_grad = (2 / (4 * n)) ** 0.5
    assert abs(x.grad + torch.sin(x.detach())) < 5 * se_grad


@pytest.mark.parametrize("name", ["tensornet", "aer"])
def test_a_tapes_own_shots_are_sampled_on_an_analytic_device(name):
    """``qhybrid.execute`` of tapes that set shots on a device without shots samples them, as PennyLane's devices
    do (the launcher ran them at the device's analytic mode: an expectation at shots=100 came back exact, 0.6967
    for a sampled 0.6, and ``qml.sample`` was refused as needing shots); parameter-shift samples its shifted runs."""
    n = 20000
    dev = qhybrid.device(name, wires=1, seed=3)
    x = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))], shots=n)
    values = torch.stack([qhybrid.execute([tape], dev, diff_method="parameter-shift")[0] for _ in range(3)])
    assert values.unique().numel() > 1  # sampled, not exact
    exact = torch.cos(x.detach())
    assert (values - exact).abs().max() < 5 * torch.sqrt((1 - exact**2) / n)
    (value,) = qhybrid.execute([tape], dev, diff_method="parameter-shift")
    value.backward()
    assert x.grad != -torch.sin(x.detach()) and abs(x.grad + torch.sin(x.detach())) < 5 * (2 / (4 * n)) ** 0.5
    (samples,) = qhybrid.execute([qml.tape.QuantumScript([qml.RX(x, 0)], [qml.sample(wires=[0])], shots=5)], dev)
    assert samples.shape == (5, 1)


@pytest.mark.parametrize("name", ["tensornet", "aer"])
def test_shot_vectors_give_a_result_per_setting_and_parameter_shift_gradients(name):
    """A shot vector runs one tape per setting; results come as a tuple over settings (as PennyLane's), each
    within its own statistical error, and parameter-shift differentiates their sum."""
    settings = (4000, 4000, 16000)
    dev = qhybrid.device(name, wires=2, shots=[(4000, 2), 16000], seed=5)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[0])

    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    out = f(x)
    assert isinstance(out, tuple) and len(out) == len(settings)
    exact = torch.cos(x.detach())
    for (z, probs), n in zip(out, settings):
        assert probs.shape == (2,) and abs(z - exact) < 5 * torch.sqrt((1 - exact**2) / n)
        assert abs(probs[0] - (1 + exact) / 2) < 5 * torch.sqrt((1 - exact**2) / 4 / n)
    sum(z for z, _ in out).backward()
    se_grad = sum(2 / (4 * n) for n in settings) ** 0.5
    assert abs(x.grad + len(settings) * torch.sin(x.detach())) < 5 * se_grad


def test_torch_func_transforms_run_through_a_qhybrid_qnode():
    """vmap, jacrev and grad through ``qhybrid.qnode`` agree with default.qubit under the same transforms
    (tests/workflow/test_functorch.py covers them in depth); a broadcast batch and
    torch.autograd.functional.jacobian stay the ordinary ways."""
    dev = qhybrid.device("tensornet", wires=2)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def f(w):
        qml.RX(w[0], 0)
        qml.CNOT([0, 1])
        qml.RY(w[1], 1)
        return qml.expval(qml.Z(1))

    w = torch.tensor([0.3, -0.4], dtype=torch.float64)
    ref = qml.QNode(f.func, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    for transform in (torch.func.vmap, torch.func.jacrev, torch.func.grad):
        arg = w * torch.tensor([[1.0], [2.0], [-1.0]], dtype=torch.float64) if transform is torch.func.vmap else w
        torch.testing.assert_close(transform(f)(arg), transform(ref)(arg), atol=1e-10, rtol=0)
    # the alternatives work: a broadcast batch, and torch.autograd.functional.jacobian
    assert f(w.expand(3, 2).T).shape == (3,)
    jac = torch.autograd.functional.jacobian(f, w)
    assert torch.allclose(jac, torch.autograd.functional.jacobian(ref, w), atol=1e-10, rtol=0)


@pytest.mark.parametrize("n_params", [2, 5])  # (five: the combined path of many parameters; two: one by one)
@pytest.mark.parametrize("diff_method", DIFF_METHODS)
def test_a_trainable_global_phase_has_a_zero_gradient(diff_method, n_params):
    """No expectation value depends on a global phase: its generator has no gaps, so its shift rule is empty and its
    gradient zero (PennyLane's rule generator fails on no frequencies); the other gradients are default.qubit's."""

    def circuit(w):
        qml.Hadamard(0)
        qml.GlobalPhase(w[0])
        for k in range(1, n_params):
            qml.RY(w[k], k % 2)
            qml.CNOT([0, 1])
        qml.GlobalPhase(w[0] * 2, wires=[1])
        return qml.expval(qml.Z(0) @ qml.X(1)), qml.var(qml.Y(1))

    w = torch.linspace(0.3, 1.2, n_params, dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    a, b = w.clone().requires_grad_(), w.clone().requires_grad_()
    (torch.stack(ours(a)) * torch.tensor([1.0, -0.5])).sum().backward()
    (torch.stack(ref(b)) * torch.tensor([1.0, -0.5])).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=0)
    assert abs(float(a.grad[0])) < 1e-12


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
def test_a_result_written_in_place_before_the_backward(diff_method):
    """Under parameter-shift the results were views of one multi-output node, which torch does not let be written in
    place (``out[0].mul_(2)``: RuntimeError; found by a fuzzing helper); the gradient is default.qubit's."""

    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.X(1)), qml.var(qml.Z(0))

    def grad(node):
        x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
        out = node(x)
        out[0].mul_(2.0)
        return torch.autograd.grad(out[0] + out[1], x)[0]

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    torch.testing.assert_close(grad(ours), grad(ref), atol=1e-10, rtol=0)

"""torch.compile on models holding circuits: the circuit call is one opaque step (qhybrid/interfaces/_compile.py)."""

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


class _Net(torch.nn.Module):
    """Linear -> ExpQLayer -> Linear with its own forward (a break inside nn.Sequential's loop makes torch
    run the whole Sequential eagerly; a plain forward keeps the classical parts compiled)."""

    def __init__(self, diff_method):
        super().__init__()
        self.pre = torch.nn.Linear(5, 3)
        self.quantum = qhybrid.ExpQLayer(3, 2, reupload=True, diff_method=diff_method)
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.quantum(torch.tanh(self.pre(x))))


def _model(diff_method="adjoint"):
    return _Net(diff_method).double()


def _loss_and_grads(model, x):
    model.zero_grad()
    out = model(x)
    (out**2).sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def _reference(model, x):
    """The same model with the circuit run on default.qubit through PennyLane's own torch QNode."""
    layer = model.quantum
    dev = qml.device("default.qubit", wires=3)

    @qml.qnode(dev, interface="torch", diff_method="backprop")
    def circuit(inputs, weights):
        return layer._circuit(inputs, weights)

    h = torch.tanh(model.pre(x))
    return model.head(torch.stack(list(circuit(h, layer.weight)), dim=-1))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_compiled_model_matches_eager_from_the_first_call(backend, diff_method):
    torch._dynamo.reset()
    model = _model(diff_method)
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(4, 5, dtype=torch.float64)
    out_c, grads_c = _loss_and_grads(compiled, x)  # the very first call is a compiled one
    out_e, grads_e = _loss_and_grads(model, x)
    assert torch.allclose(out_c, out_e, atol=TOL, rtol=0)
    for gc, ge in zip(grads_c, grads_e):
        assert torch.allclose(gc, ge, atol=TOL, rtol=0)
    model.zero_grad()
    ref = _reference(model, x)
    (ref**2).sum().backward()
    assert torch.allclose(out_c, ref.detach(), atol=TOL, rtol=0)
    for gc, p in zip(grads_c, model.parameters()):
        assert torch.allclose(gc, p.grad, atol=TOL, rtol=0)
    # a second batch of another size recompiles or reuses the graphs, and still agrees
    x2 = torch.randn(7, 5, dtype=torch.float64)
    assert torch.allclose(compiled(x2), model(x2), atol=TOL, rtol=0)


def test_the_classical_parts_are_compiled_and_the_circuit_is_not():
    torch._dynamo.reset()
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    model = _model()
    torch.compile(model, backend=record)(torch.randn(4, 5, dtype=torch.float64))
    ops = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert sum("linear" in t for t in ops) == 2 and any("tanh" in t for t in ops)
    # nothing of the circuit was traced: its ops would show up as trig / complex ops in some graph
    assert not any(k in t for t in ops for k in ("cos", "sin", "einsum", "matmul", "complex"))


def test_sequential_model_compiles_and_matches():
    torch._dynamo.reset()
    layer = qhybrid.ExpQLayer(3, 2)
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), layer, torch.nn.Linear(3, 2)).double()
    x = torch.randn(4, 5, dtype=torch.float64)
    out_c, grads_c = _loss_and_grads(torch.compile(model, backend="aot_eager"), x)
    out_e, grads_e = _loss_and_grads(model, x)
    assert torch.allclose(out_c, out_e, atol=TOL, rtol=0)
    for gc, ge in zip(grads_c, grads_e):
        assert torch.allclose(gc, ge, atol=TOL, rtol=0)


def test_inductor_backend():
    pytest.importorskip("torch._inductor")
    torch._dynamo.reset()
    model = _model()
    compiled = torch.compile(model)  # the default (inductor) backend
    x = torch.randn(4, 5, dtype=torch.float64)
    out_c, grads_c = _loss_and_grads(compiled, x)
    out_e, grads_e = _loss_and_grads(model, x)
    assert torch.allclose(out_c, out_e, atol=TOL, rtol=0)
    for gc, ge in zip(grads_c, grads_e):
        assert torch.allclose(gc, ge, atol=TOL, rtol=0)


def test_qnode_inside_a_compiled_function():
    torch._dynamo.reset()
    dev = qhybrid.device("tensornet", wires=2)

    @qhybrid.qnode(dev, diff_method="adjoint")
    def circuit(x, w):
        qml.RY(x, wires=0)
        qml.CNOT(wires=[0, 1])
        qml.RX(w, wires=1)
        return qml.expval(qml.Z(1))

    def f(x, w):
        return torch.sin(circuit(torch.cos(x), w)) * 2

    x = torch.tensor([0.3, 1.1], dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    out = torch.compile(f, backend="aot_eager")(x, w)
    gx, gw = torch.autograd.grad(out.sum(), (x, w))
    out_e = f(x, w)
    ex, ew = torch.autograd.grad(out_e.sum(), (x, w))
    assert torch.allclose(out, out_e, atol=TOL, rtol=0)
    assert torch.allclose(gx, ex, atol=TOL, rtol=0) and torch.allclose(gw, ew, atol=TOL, rtol=0)


def test_fullgraph_fails_with_a_qhybrid_message():
    torch._dynamo.reset()
    compiled = torch.compile(_model(), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="qhybrid") as err:
        compiled(torch.randn(4, 5, dtype=torch.float64))
    assert "fullgraph=False" in str(err.value)

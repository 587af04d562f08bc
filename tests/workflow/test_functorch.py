"""torch.func through qhybrid.qnode and the layers (grad, vjp, jacrev, vmap, functional_call, second order, forward
mode) against PennyLane default.qubit (torch, backprop) under the same transforms, and the refusals (third order,
jacfwd of jacfwd)."""

import pennylane as qml
import pytest
import torch
from torch.func import functional_call, grad, jacfwd, jacrev, jvp, vjp, vmap

import qhybrid
from qhybrid.errors import GradientError

from _layer_reference import reference_qnode

N = 3
METHODS = ["adjoint", "parameter-shift", "backprop", "best"]
REF = qml.device("default.qubit", wires=N)


def body(x, w, scale=0.4):
    """Data in ``x``, weights in ``w``; derived angles, a python-float angle and several measurement kinds."""
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.StronglyEntanglingLayers(w[:6].reshape(2, N, 1).expand(2, N, 3) * torch.tensor([1.0, 0.5, -1.0]), wires=range(N))
    qml.IsingXX(w[0] * w[1], wires=[0, 2])
    qml.CRZ(w[6], wires=[2, 1])
    qml.RX(scale, wires=1)  # a python float
    qml.PhaseShift(torch.sin(w[7]), wires=0)
    return qml.expval(qml.Z(0)), qml.expval(qml.X(1) @ qml.Y(2)), qml.probs(wires=[0, 2])


def pair(diff_method, **kw):
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method=diff_method, **kw)(body)
    ref = qml.qnode(REF, interface="torch", diff_method="backprop")(body)
    return ours, ref


def vector(q):
    return lambda x, w: torch.cat([torch.stack(q(x, w)[:2]), q(x, w)[2]])


def scalar(q):
    return lambda x, w: (vector(q)(x, w) * torch.arange(1.0, 7.0, dtype=torch.float64)).sin().sum()


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(41)
    x = torch.rand(N, generator=g, dtype=torch.float64) * 3
    w = torch.rand(8, generator=g, dtype=torch.float64) * 6 - 3
    xs = torch.rand(5, N, generator=g, dtype=torch.float64) * 3
    return x, w, xs


def close(a, b):
    for u, v in zip(torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)):
        assert u.shape == v.shape
        torch.testing.assert_close(u, v, atol=1e-10, rtol=0)


@pytest.mark.parametrize("diff_method", METHODS)
def test_grad_of_a_scalar_loss(diff_method, data):
    x, w, _ = data
    ours, ref = pair(diff_method)
    got = grad(scalar(ours), argnums=(0, 1))(x, w)
    close(got, grad(scalar(ref), argnums=(0, 1))(x, w))
    xl, wl = x.clone().requires_grad_(), w.clone().requires_grad_()  # and torch.autograd on default.qubit
    close(got, torch.autograd.grad(scalar(ref)(xl, wl), (xl, wl)))


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_jacrev_and_vjp_of_a_vector_output(diff_method, data):
    x, w, _ = data
    ours, ref = pair(diff_method)
    close(jacrev(vector(ours), argnums=(0, 1))(x, w), jacrev(vector(ref), argnums=(0, 1))(x, w))
    close(jacrev(ours, argnums=1)(x, w), jacrev(ref, argnums=1)(x, w))  # a tuple of measurements
    out, fn = vjp(lambda w: vector(ours)(x, w), w)
    ref_out, ref_fn = vjp(lambda w: vector(ref)(x, w), w)
    cot = torch.linspace(-1, 1, 6, dtype=torch.float64)
    close((out, fn(cot)), (ref_out, ref_fn(cot)))


@pytest.mark.parametrize("diff_method", METHODS)
def test_per_sample_gradients(diff_method, data):
    _, w, xs = data
    ours, ref = pair(diff_method)
    got = vmap(grad(scalar(ours), argnums=1), in_dims=(0, None))(xs, w)
    close(got, vmap(grad(scalar(ref), argnums=1), in_dims=(0, None))(xs, w))
    assert got.shape == (5, 8)


def test_vmap_forward_and_jacrev_over_a_broadcast_batch(data):
    x, w, xs = data
    ours, ref = pair("adjoint")
    close(vmap(vector(ours), in_dims=(0, None))(xs, w), vmap(vector(ref), in_dims=(0, None))(xs, w))
    close(vmap(ours, in_dims=(None, 0))(x, torch.stack([w, -w])), vmap(ref, in_dims=(None, 0))(x, torch.stack([w, -w])))
    # the qnode's own broadcasting inside one transformed call: a (5,) output per measurement
    first = lambda q: (lambda w: q(xs, w)[0])  # noqa: E731
    close(jacrev(first(ours))(w), jacrev(first(ref))(w))


def test_static_structure_kwargs_and_transforms(data):
    x, w, xs = data
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint", static_structure=True)(body)
    ref = qml.qnode(REF, interface="torch", diff_method="backprop")(body)
    for _ in range(2):  # the trace, then its reuse
        close(vmap(grad(scalar(ours), argnums=1), in_dims=(0, None))(xs, w),
              vmap(grad(scalar(ref), argnums=1), in_dims=(0, None))(xs, w))
    kw = lambda q: (lambda w, s: q(x, w=w, scale=s)[0])  # noqa: E731  tensors passed by keyword
    s = torch.tensor(0.9, dtype=torch.float64)
    close(grad(kw(ours), argnums=(0, 1))(w, s), grad(kw(ref), argnums=(0, 1))(w, s))
    moved = qml.transforms.merge_rotations(pair("adjoint")[0])  # a PennyLane transform on the qnode
    close(grad(scalar(moved), argnums=1)(x, w), grad(scalar(ref), argnums=1)(x, w))


def layer_body(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(N))
    qml.StronglyEntanglingLayers(w, wires=range(N))
    return [qml.expval(qml.Z(i)) for i in range(N)]


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_torch_layer_per_sample_gradients(diff_method, data):
    _, _, xs = data
    ys = xs.flip(0).cos()
    qnode = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method=diff_method)(layer_body)
    layer = qhybrid.TorchLayer(qnode, {"w": (2, N, 3)})
    ref = qml.qnn.TorchLayer(qml.qnode(REF, interface="torch", diff_method="backprop")(layer_body), {"w": (2, N, 3)})
    with torch.no_grad():
        ref.w.copy_(layer.w)
    params = {k: v.detach() for k, v in layer.named_parameters()}

    def loss(p, x, y):
        return (functional_call(layer, p, (x,)) - y).pow(2).sum()

    got = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)["w"]
    want = []  # per sample with torch.autograd (qml.qnn.TorchLayer keeps its own weights under functional_call)
    for x, y in zip(xs, ys):
        ref.zero_grad()
        (ref(x) - y).pow(2).sum().backward()
        want.append(ref.w.grad.clone())
    close(got, torch.stack(want))
    batched = lambda p, x: functional_call(layer, p, (x,)).sum()  # noqa: E731  a batch inside one call
    close(grad(batched)(params, xs)["w"], torch.autograd.grad(ref(xs).sum(), ref.w)[0])


def test_exp_qlayer_per_sample_gradients(data):
    _, _, xs = data
    layer = qhybrid.ExpQLayer(N, 2, encoding="angle", rotation="X", diff_method="adjoint").double()
    ref = reference_qnode(lambda ws: [qml.expval(qml.Z(i)) for i in ws], wires=range(N), rotation="X")
    params = {"weight": layer.weight.detach()}
    got = vmap(grad(lambda p, x: functional_call(layer, p, (x,)).pow(2).sum()), in_dims=(None, 0))(params, xs)
    want = vmap(grad(lambda w, x: torch.stack(ref(x, w)).pow(2).sum()), in_dims=(None, 0))(params["weight"], xs)
    close(got["weight"], want)
    bad = xs.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):  # the finiteness check still reads the values
        vmap(grad(lambda p, x: functional_call(layer, p, (x,)).sum()), in_dims=(None, 0))(params, bad)


@pytest.mark.parametrize("diff_method", METHODS)
def test_second_order(diff_method, data):
    """jacrev of jacrev (a Hessian), grad of a gradient penalty, and per-sample Hessians under vmap."""
    x, w, xs = data
    ours, ref = pair(diff_method)
    hess = lambda q: jacrev(jacrev(scalar(q), argnums=1), argnums=1)  # noqa: E731
    close(hess(ours)(x, w), hess(ref)(x, w))
    penalty = lambda q: grad(lambda x, w: grad(scalar(q), argnums=1)(x, w).pow(2).sum(), argnums=(0, 1))  # noqa: E731
    close(penalty(ours)(x, w), penalty(ref)(x, w))
    if diff_method == "adjoint":
        close(vmap(hess(ours), in_dims=(0, None))(xs[:3], w), vmap(hess(ref), in_dims=(0, None))(xs[:3], w))


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_forward_mode(diff_method, data):
    """jvp, jacfwd and hessian (jacfwd of jacrev), each reverse mode twice underneath."""
    x, w, _ = data
    ours, ref = pair(diff_method)
    t = torch.linspace(-1, 1, 8, dtype=torch.float64)
    close(jvp(lambda w: vector(ours)(x, w), (w,), (t,)), jvp(lambda w: vector(ref)(x, w), (w,), (t,)))
    close(jacfwd(vector(ours), argnums=(0, 1))(x, w), jacfwd(vector(ref), argnums=(0, 1))(x, w))
    close(torch.func.hessian(scalar(ours), argnums=1)(x, w), torch.func.hessian(scalar(ref), argnums=1)(x, w))


@pytest.mark.parametrize("diff_method", METHODS)
def test_dual_tensors(diff_method, data):
    """``torch.autograd.forward_ad``'s dual tensors (and ``gradcheck(check_forward_ad=True)``) as ``jvp``: they
    crashed in the device's ops (``mm`` with ``out=``, a sparse observable table; found by a fuzzing helper)."""
    from torch.autograd import forward_ad

    x, w, _ = data
    ours, ref = pair(diff_method)
    t = torch.linspace(-1, 1, 8, dtype=torch.float64)
    with forward_ad.dual_level():
        got = forward_ad.unpack_dual(vector(ours)(x, forward_ad.make_dual(w, t))).tangent
    close(got, jvp(lambda w: vector(ref)(x, w), (w,), (t,))[1])
    w = w.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda w: vector(ours)(x, w), (w,), check_forward_ad=True, check_backward_ad=False)


def test_dual_tensors_through_execute_or_pennylane_qnode_refused_by_name(data):
    """Where there is no forward mode (qhybrid.execute, PennyLane's QNode on the plugin: PennyLane answered no tangent
    with adjoint and parameter-shift, and crashed with backprop), a dual tensor is refused with the way that has one."""
    from torch.autograd import forward_ad

    x, w, _ = data
    plugin = qml.device("qhybrid.tensornet", wires=N)
    for method in ("adjoint", "backprop"):
        node = qml.QNode(body, plugin, interface="torch", diff_method=method)
        with forward_ad.dual_level(), pytest.raises(GradientError, match="Decorate the function with qhybrid.qnode"):
            node(x, forward_ad.make_dual(w, torch.ones_like(w)))
    with forward_ad.dual_level(), pytest.raises(GradientError, match="Forward-mode AD"):
        tape = qml.tape.QuantumScript([qml.RX(forward_ad.make_dual(w[0], w[1]), 0)], [qml.expval(qml.X(0))])
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))


def test_third_order_and_forward_over_forward_refused_by_name(data):
    x, w, _ = data
    ours, _ = pair("adjoint")
    f = lambda w: scalar(ours)(x, w)  # noqa: E731
    third = grad(lambda w: grad(lambda w: grad(f)(w).sum())(w).sum())
    for transform in (third, jacfwd(jacfwd(f))):
        with pytest.raises(GradientError, match="Third and higher derivatives .* create_graph=True"):
            transform(w)
    # reverse over forward: refused by its own name (the message spoke of third order and jacfwd of jacfwd only)
    with pytest.raises(GradientError, match=r"reverse mode over forward mode \(jacrev or grad of jacfwd"):
        jacrev(jacfwd(f))(w)


def test_plain_qnode_on_a_qhybrid_device_names_qhybrid_qnode(data):
    x, w, _ = data
    plain = qml.qnode(qhybrid.device("tensornet", wires=N), interface="torch")(body)
    with pytest.raises(GradientError, match="Decorate the function with qhybrid.qnode"):
        grad(scalar(plain), argnums=1)(x, w)


def test_samples_refused_inside_transforms():
    dev = qhybrid.device("tensornet", wires=1, shots=5)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def f(x):
        qml.RX(x, 0)
        return qml.counts(wires=0)

    with pytest.raises(GradientError, match="must return tensors"):
        vmap(f)(torch.tensor([0.1, 0.2]))


@pytest.mark.parametrize("kind, output", [("qaoa", "cost"), ("qgnn", "nodes")])
def test_graph_layer_per_sample_gradients(kind, output):
    """GraphQLayer runs its whole forward as one Function (its parameters passed in): per-sample gradients equal
    its ordinary autograd ones sample by sample (which tests/layers/test_graph_layer.py holds to default.qubit)."""
    torch.manual_seed(3)
    layer = qhybrid.GraphQLayer([(0, 1), (1, 2), (2, 0), (2, 3)], n_layers=2, kind=kind, output=output).double()
    params = {k: v.detach() for k, v in layer.named_parameters()}
    ws = torch.rand(3, 4, dtype=torch.float64)
    x = torch.rand(4, dtype=torch.float64) if kind == "qgnn" else None
    got = vmap(grad(lambda p, w: functional_call(layer, p, (w, x)).sin().sum()), in_dims=(None, 0))(params, ws)
    want = {k: [] for k in params}
    for w in ws:
        layer.zero_grad()
        layer(w, x).sin().sum().backward()
        for k, v in layer.named_parameters():
            want[k].append(v.grad.clone())
    close(got, {k: torch.stack(v) for k, v in want.items()})
    edge = vmap(grad(lambda w: layer(w, x).sin().sum()))(ws)
    wl = ws.clone().requires_grad_()
    layer(wl, None if x is None else x.reshape(4, 1).expand(3, 4, 1)).sin().sum().backward()
    close(edge, wl.grad)


def test_vmap_forward_then_ordinary_backward_to_the_weights(data):
    """vmap over a layer's forward, then loss.backward() to its nn.Parameters (torch.func mixed with autograd)."""
    _, _, xs = data
    layer = qhybrid.ExpQLayer(N, 2, diff_method="adjoint").double()
    vmap(layer)(xs).sin().sum().backward()
    got = layer.weight.grad.clone()
    layer.zero_grad()
    layer(xs).sin().sum().backward()  # one broadcast execution, held to default.qubit in tests/layers
    close(got, layer.weight.grad)

"""Lazy gate parameters (``workflow/_lazy.py``): a plain qnode records ``2 * gamma[l]`` per gate without an aten
op per gate, with the values, gradients and Hessians it had, and every other use of an argument unchanged."""

from __future__ import annotations

import random
import warnings

import pennylane as qml
import pytest
import torch

import qhybrid
from benchmarks.workloads import qaoa_function
from qhybrid.testing import OpCount
from qhybrid.workflow import _lazy, _lazy_arguments
from qhybrid.workflow._lazy import LazyParam

TOL = 1e-10


def _random_circuit(seed: int, n: int = 3, gates: int = 14):
    """A circuit of several gate kinds whose angles are written the ways users write them: ``2*w[i]``,
    ``-w[i]/3``, ``w[i, j]``, ``x[:, i]`` (batched data), ``w[i] + 0.5``, ``torch.sin(w[i])`` (real)."""
    rng = random.Random(seed)
    plan = []
    for _ in range(gates):
        kind = rng.choice(["RX", "RY", "RZ", "IsingZZ", "CRX", "Rot", "PhaseShift", "IsingXX"])
        form = rng.choice(["2w", "-w/3", "wij", "x", "w+", "sin", "w", "0.5-w", "w.T"])
        wires = rng.sample(range(n), 2)
        plan.append((kind, form, wires, rng.randrange(4), rng.randrange(3)))

    def angle(form, w, m, x, i, j):
        if form == "2w":
            return 2 * w[i]
        if form == "-w/3":
            return -w[i] / 3
        if form == "wij":
            return m[i, j]
        if form == "x":
            return x[:, j]
        if form == "w+":
            return w[i] + 0.5
        if form == "sin":
            return torch.sin(w[i])
        if form == "0.5-w":
            return 0.5 - 1.5 * w[i]
        if form == "w.T":
            return m.T[j, i] * 0.25
        return w[i]

    def circuit(x, w, m):
        for kind, form, wires, i, j in plan:
            a = angle(form, w, m, x, i, j)
            if kind == "Rot":
                qml.Rot(a, w[(i + 1) % 4], m[i, (j + 1) % 3], wires=wires[0])
            elif kind in ("IsingZZ", "CRX", "IsingXX"):
                getattr(qml, kind)(a, wires=wires)
            else:
                getattr(qml, kind)(a, wires=wires[0])
            qml.CNOT(wires=wires)
        return qml.expval(qml.Z(0) @ qml.X(1)), qml.expval(qml.Y(2) + 0.5 * qml.Z(2))

    return circuit


def _args(dtype=torch.float64, batch=3):
    x = torch.rand(batch, 3, dtype=dtype, requires_grad=True)
    w = torch.rand(4, dtype=dtype, requires_grad=True)
    m = torch.rand(4, 3, dtype=dtype, requires_grad=True)
    return x, w, m


def _loss(f):
    return lambda *a: sum(r.sum() for r in f(*a))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("diff_method", ["best", "adjoint", "parameter-shift"])
def test_random_circuits_match_default_qubit(seed, diff_method):
    circuit = _random_circuit(seed)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(circuit)
    args = _args()
    for _ in range(2):  # the second call: every cache warm
        got, want = ours(*args), ref(*args)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
        g = torch.autograd.grad(_loss(ours)(*args), args, allow_unused=True)
        g_ref = torch.autograd.grad(_loss(ref)(*args), args, allow_unused=True)
        for a, b, arg in zip(g, g_ref, args):
            zero = torch.zeros_like(arg)
            torch.testing.assert_close(zero if a is None else a, zero if b is None else b, atol=TOL, rtol=0)
    assert not any(isinstance(p, LazyParam) for p in ours.tape.get_parameters())


@pytest.mark.parametrize("seed", [0, 3])
def test_random_circuit_hessian_matches_default_qubit(seed):
    circuit = _random_circuit(seed, gates=8)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(circuit)
    x, w, m = (a.detach() for a in _args(batch=2))
    h = torch.autograd.functional.hessian(lambda w, m: _loss(ours)(x, w, m), (w, m))
    h_ref = torch.autograd.functional.hessian(lambda w, m: _loss(ref)(x, w, m), (w, m))
    for row, row_ref in zip(h, h_ref):
        for a, b in zip(row, row_ref):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert sum(b.abs().sum() for row in h for b in row) > 1e-3


def test_float32_matches_default_qubit():
    circuit = _random_circuit(2)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method="adjoint")(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")(circuit)
    args = _args(torch.float32)
    ref_args = [a.detach().double().requires_grad_() for a in args]
    for a, b in zip(ours(*args), ref(*ref_args)):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=0)
    g = torch.autograd.grad(_loss(ours)(*args), args)
    g_ref = torch.autograd.grad(_loss(ref)(*ref_args), ref_args)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_parameters_are_bit_for_bit_the_users_arithmetic(dtype):
    w = torch.rand(5, dtype=dtype, requires_grad=True) * 3 - 1.5
    consts = [2, 0.1, 1 / 3, 7.25, -2.5]

    def forms(w):
        return [
            *(c * w[k] for k, c in enumerate(consts)),
            *(w[k] / c for k, c in enumerate(consts)),
            *(-w[k] / 3 for k in range(5)),
            *((w[k] + c) * 2 for k, c in enumerate(consts)),
            *(c - w[k] * 1.1 for k, c in enumerate(consts)),
            *(w[k] - c for k, c in enumerate(consts)),
        ]

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="adjoint")(
        lambda w: ([qml.RX(a, 0) for a in forms(w)], qml.expval(qml.Z(0)))[1]
    )
    node(w)
    for got, want in zip(node.tape.get_parameters(), forms(w)):
        assert type(got) is torch.Tensor and got.dtype == dtype
        assert torch.equal(got, want), (got, want)


def test_recording_dispatches_no_op_per_gate():
    """The user's function dispatches no aten op while it records (it did two a gate: a select and a mul),
    and a whole value + gradient step dispatches a few ops more than the device's, not two or three a gate."""
    n, p = 8, 2
    edges = [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 3) % n) for i in range(0, n, 2)]
    circuit = qaoa_function(edges, n)  # p layers: gamma and beta hold p angles
    inside = OpCount()

    def counted(gamma, beta):
        with inside:
            return circuit(gamma, beta)

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(counted)
    gamma = torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([-0.2, 0.4], dtype=torch.float64, requires_grad=True)
    node(gamma, beta).backward()  # plans, tables
    inside.ops.clear()
    node(gamma, beta).backward()
    gates = p * (len(edges) + n)
    assert gates >= 20
    assert sum(inside.ops.values()) == 0, inside.ops
    ref = qml.qnode(qml.device("default.qubit", wires=n), interface="torch")(circuit)
    g = torch.autograd.grad(node(gamma, beta), (gamma, beta))
    g_ref = torch.autograd.grad(ref(gamma, beta), (gamma, beta))
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_values_control_flow_printing_and_math(capsys):
    def circuit(w, scale):
        if w[0] > 0:  # a branch on a value: real
            qml.RX(2 * w[0], 0)
        else:
            qml.RY(2 * w[0], 0)
        print("angle", w[1])
        qml.RZ(qml.math.cos(w[1]) * float(scale), 1)
        qml.RY(qml.math.stack([w[0], w[1]]).sum(), 1)
        qml.CNOT([0, 1])
        assert qml.math.get_interface(w) == "torch" and qml.math.requires_grad(w[0])
        return qml.expval(qml.Z(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit)
    for sign in (1.0, -1.0):
        w = torch.tensor([0.4 * sign, 0.7], dtype=torch.float64, requires_grad=True)
        scale = torch.tensor(1.3)
        (g,) = torch.autograd.grad(ours(w, scale=scale), w)
        (g_ref,) = torch.autograd.grad(ref(w, scale=scale), w)
        torch.testing.assert_close(g, g_ref, atol=TOL, rtol=0)
        assert isinstance(ours.tape.operations[0], qml.RX if sign > 0 else qml.RY)
    assert "angle tensor(0.7000, dtype=torch.float64, grad_fn=<SelectBackward0>)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "template",
    [
        lambda x, w: (qml.AngleEmbedding(x, wires=range(3)), qml.StronglyEntanglingLayers(w, wires=range(3))),
        lambda x, w: (qml.AngleEmbedding(x[:, 1:] * 2, wires=range(2)), qml.BasicEntanglerLayers(w[:, :, 0], wires=range(3))),
        lambda x, w: qml.QAOAEmbedding(x, w[:, :, :2].reshape(2, 6), wires=range(3)),
        lambda x, w: [qml.Rot(*row, wires=k % 3) for k, row in enumerate(w.reshape(-1, 3))],
    ],
)
def test_templates_match_default_qubit(template):
    def circuit(x, w):
        template(x, w)
        return [qml.expval(qml.Z(i)) for i in range(3)]

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=3), interface="torch")(circuit)
    x = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        got, want = torch.stack(ours(x, w)), torch.stack(ref(x, w))
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        g = torch.autograd.grad(got.sum(), (x, w), allow_unused=True, materialize_grads=True)
        g_ref = torch.autograd.grad(want.sum(), (x, w), allow_unused=True, materialize_grads=True)
        for a, b in zip(g, g_ref):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_hamiltonian_coefficients_from_an_argument():
    def circuit(w, c):
        qml.RX(w[0], 0)
        qml.RY(-w[1] / 2, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Hamiltonian([2 * c[0], c[1], c[2] + 0.5], [qml.Z(0), qml.X(1), qml.Z(0) @ qml.Z(1)]))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit)
    w = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.5, -1.2, 0.7], dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        got, want = ours(w, c), ref(w, c)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for a, b in zip(torch.autograd.grad(got, (w, c)), torch.autograd.grad(want, (w, c))):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_an_observable_from_the_arguments_turns_lazy_recording_off_for_later_calls(monkeypatch):
    """Resolving proxies inside an observable rebuilds it term by term (a 1,079-word Hamiltonian: ~0.7 s a
    call), so after the first such call the qnode records from the real tensors."""
    from qhybrid.workflow import _lazy

    words = [qml.Z(0), qml.X(1), qml.Z(0) @ qml.Z(1), qml.Y(0) @ qml.Y(1)]

    def circuit(w, c):
        qml.RX(2 * w[0], 0)
        qml.RY(w[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.dot(c, words))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit)
    proxied = []
    real = _lazy_arguments.proxied
    monkeypatch.setattr(_lazy_arguments, "proxied", lambda *a: proxied.append(1) or real(*a))
    w = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    for k in range(3):
        c = torch.tensor([0.5, -1.2, 0.7, 0.1 * k], dtype=torch.float64, requires_grad=True)
        got, want = ours(w, c), ref(w, c)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for a, b in zip(torch.autograd.grad(got, (w, c)), torch.autograd.grad(want, (w, c))):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    assert len(proxied) == 1  # the first call only


def test_a_hamiltonian_made_outside_the_function_is_not_walked_again(monkeypatch):
    """``Sum.data`` walks every term (a 276-word Hamiltonian: ~3 ms): a Hamiltonian the function measures but
    did not make holds no proxy, and later calls neither search it for proxies nor read its data again."""
    H = qml.dot([0.5, -0.2, 0.3], [qml.Z(0), qml.X(0) @ qml.X(1), qml.Y(1)])
    walks = []
    data = type(H).data
    monkeypatch.setattr(type(H), "data", property(lambda self: walks.append(1) or data.fget(self)))

    @qhybrid.qnode(qhybrid.device("tensornet", wires=2))
    def circuit(w):
        qml.RX(2 * w[0], 0)
        qml.CNOT([0, 1])
        qml.RY(w[1], 1)
        return qml.expval(H)

    w = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    got = [circuit(w) for _ in range(3)]
    walked = len(walks)
    got.append(circuit(w))
    assert len(walks) == walked  # a steady call reads nothing of H
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit.func)
    for g in got:
        torch.testing.assert_close(g, ref(w), atol=TOL, rtol=0)


def test_keywords_integers_complex_and_no_grad_arguments():
    def circuit(w, *, wires, k, u, scale=None):
        qml.RX(w[int(k[0])] * 2, wires[0])
        qml.QubitUnitary(u, wires=wires[1])
        qml.RY(scale[1] / 4, wires[1])
        qml.CNOT(wires)
        return qml.expval(qml.Z(wires[1]))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit)
    w = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    u = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128) * 1j
    kw = dict(wires=[0, 1], k=torch.tensor([1]), u=u, scale=torch.tensor([0.2, 0.9], dtype=torch.float64))
    got, want = ours(w, **kw), ref(w, **kw)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    torch.testing.assert_close(torch.autograd.grad(got, w)[0], torch.autograd.grad(want, w)[0], atol=TOL, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(ours(w, **kw), want.detach(), atol=TOL, rtol=0)


def test_in_place_writes_keep_their_meaning():
    """A write into an argument inside the function: proxies made before it keep the values they had (views
    see the write, as views do), and everything after it is real."""

    def circuit(x):
        a = 2 * x[0]  # made before the write: the old value
        v = x[1]  # a view: sees the write
        x[1] = 0.25
        qml.RX(a, 0)
        qml.RY(v, 0)
        qml.RZ(x[1] * 3, 0)
        return qml.expval(qml.X(0))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=1), interface="torch")(circuit)
    base = torch.tensor([0.3, 0.8], dtype=torch.float64)
    x1, x2 = base.clone(), base.clone()
    torch.testing.assert_close(ours(x1), ref(x2), atol=TOL, rtol=0)
    assert torch.equal(x1, x2)


def test_transforms_and_static_structure_record_real_tensors():
    seen = []

    @qml.transform
    def spy(tape):
        seen.extend(tape.get_parameters())
        return [tape], lambda r: r[0]

    def circuit(w):
        qml.RX(2 * w[0], 0)
        qml.RY(w[1], 0)
        return qml.expval(qml.Z(0))

    w = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    plain = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(circuit)
    want = plain(w)
    transformed = spy(qhybrid.qnode(qhybrid.device("tensornet", wires=1))(circuit))
    torch.testing.assert_close(transformed(w), want, atol=TOL, rtol=0)
    assert seen and not any(isinstance(p, LazyParam) for p in seen)
    static = qhybrid.qnode(qhybrid.device("tensornet", wires=1), static_structure=True)(circuit)
    for _ in range(2):
        torch.testing.assert_close(static(w), want, atol=TOL, rtol=0)
    ps = qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")(circuit)
    torch.testing.assert_close(torch.autograd.grad(ps(w), w)[0], torch.autograd.grad(want, w)[0], atol=TOL, rtol=0)


def test_an_intermediate_the_user_keeps_is_on_the_graph():
    """``a = 2 * g[0]`` kept and differentiated by itself (``retain_grad``, ``autograd.grad``): its gates read it."""
    kept = []

    def circuit(g):
        a = 2 * g[0]
        a.retain_grad()
        kept.append(a)
        for k in range(10):
            qml.RX(a, k % 2)
            qml.RY(-g[1] / 3, k % 2)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="adjoint")(circuit)
    g = torch.tensor([0.3, 0.8], dtype=torch.float64, requires_grad=True)
    out = node(g)
    (da,) = torch.autograd.grad(out, kept[0], retain_graph=True)
    out.backward()
    assert kept[0].grad is not None and da.abs() > 0.1
    torch.testing.assert_close(g.grad[0], 2 * da, atol=TOL, rtol=0)


@pytest.mark.parametrize("chain", ["2 * gamma[l]", "mixed", "views"])
def test_the_folds_chains_recorded_lazily_match_default_qubit(monkeypatch, chain):
    """The chains ``gradients/_derived.py`` folds, now recorded lazily through light cones of closed networks."""
    from qhybrid.devices.tensornet import _simulate
    from tests.gradients.test_derived_sources import CHAINS, _circuit, _run

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)
    _run(_circuit(CHAINS[chain]))


def test_views_parameters_and_no_grad_inside_the_function():
    """A transposed (non-contiguous) argument, an ``nn.Parameter``, and a parameter made under ``no_grad``."""

    def circuit(m, p):
        with torch.no_grad():
            frozen = 2 * m[0, 1]
        qml.RX(frozen, 0)
        qml.RY(m[1, 0] * 3, 0)
        qml.RZ(-p[1] / 2, 1)
        qml.IsingXX(m[0, 0] + p[0], [0, 1])
        return qml.expval(qml.Y(0) @ qml.X(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    ref = qml.qnode(qml.device("default.qubit", wires=2), interface="torch")(circuit)
    base = torch.rand(2, 2, dtype=torch.float64, requires_grad=True)
    p = torch.nn.Parameter(torch.rand(2, dtype=torch.float64))
    for _ in range(2):
        got, want = ours(base.T, p), ref(base.T, p)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for a, b in zip(torch.autograd.grad(got, (base, p)), torch.autograd.grad(want, (base, p))):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)


VIEWS = {
    "slices": lambda t: t[::2, 1::2],
    "None and int": lambda t: t[..., None, 2],
    ".T": lambda t: t.T[1],
    "permute": lambda t: t.permute(1, 0)[2, 1:],
    "reshape": lambda t: t.reshape(4, 3)[3],
    "flatten": lambda t: t.flatten()[5:7],
    "iteration": lambda t: list(t)[2][1],
    "unbind": lambda t: t.unbind(1)[3],
    "select": lambda t: torch.select(t, 1, -1),
    "transpose": lambda t: t.transpose(0, 1)[0],
    "steps": lambda t: -(t[1] - 3) / 2,
    "rsub": lambda t: 0.5 - t[0] * 2 + 1,
}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_views_stay_lazy_and_read_what_torch_reads(view):
    from qhybrid.workflow._lazy_arguments import proxied

    w = torch.arange(12.0, dtype=torch.float64).reshape(3, 4).requires_grad_()
    (p,), _, _ = proxied((w,), {})
    inside = OpCount()
    with inside:
        lazy = VIEWS[view](p)
    assert isinstance(lazy, LazyParam) and not inside.ops
    want = VIEWS[view](w)
    assert lazy.shape == want.shape
    if not lazy._steps:  # the index table reads the very elements torch's view does
        assert torch.equal(torch.take(w, torch.as_tensor(lazy._index.copy())), want)
    assert torch.equal(lazy._value(), want) and lazy._value().grad_fn is not None


def test_arithmetic_operators_skip_torch_function_and_fall_back_as_torch(monkeypatch):
    """``2 * p``, ``p / 3``, ``0.5 - p``, ``-p`` ... on a proxy call their handlers from Python (no
    ``__torch_function__`` round trip, ~10 us each); anything the handlers do not take (a tensor operand) still
    runs for real, with torch's value."""
    from qhybrid.workflow import _lazy

    calls = []
    through = _lazy.LazyParam.__torch_function__.__func__

    def counted(cls, func, types, args=(), kwargs=None):
        calls.append(getattr(func, "__name__", func))
        return through(cls, func, types, args, kwargs)

    monkeypatch.setattr(_lazy.LazyParam, "__torch_function__", classmethod(counted))
    w = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    (p,), _, _ = _lazy_arguments.proxied((w,), {})
    q = p[1]  # indexing goes through __torch_function__ (see _lazy._operator)
    calls.clear()
    made = [2 * q, q * 2, q / 3, q + 0.5, 0.5 + q, q - 0.25, 0.5 - q, -q]
    assert calls == [] and all(isinstance(m, LazyParam) for m in made)
    assert made[0] is made[1] or torch.equal(made[0]._value(), made[1]._value())
    want = [2 * w[1], w[1] * 2, w[1] / 3, w[1] + 0.5, 0.5 + w[1], w[1] - 0.25, 0.5 - w[1], -w[1]]
    for m, v in zip(made, want):
        assert torch.equal(m._value(), v)
    t = torch.tensor(1.5, dtype=torch.float64)
    mixed = q * t  # a tensor operand: the real product, as torch gives it
    assert type(mixed) is torch.Tensor and torch.equal(mixed, w[1] * t) and calls


def test_a_number_step_made_before_is_found_without_the_handler(monkeypatch):
    """``2 * gamma[l]`` written per gate finds the proxies made for the layer's first gate (the index and the
    product) before calling the handlers (~1 us, not ~3); only a plain ``int`` or ``float`` in the grad mode it was made in is found so: a NumPy number,
    ``2`` against ``2.0``, another grad mode or a frozen session go the handler's way, and every value is torch's."""
    import numpy as np

    from qhybrid.workflow import _lazy

    w = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    (p,), _, session = _lazy_arguments.proxied((w,), {})
    q = p[1]
    first = 2 * q
    handled = []
    real = _lazy._handled
    monkeypatch.setattr(_lazy, "_handled", lambda *a: handled.append(a) or real(*a))
    assert 2 * q is first and q * 2 is first and p[1] is q and not handled  # found, no handler call
    assert p[0] is not q and p[-1] is not q and handled  # (a negative index: another key, the handler's)
    handled.clear()
    third = q / 3
    assert (q / 3) is third and (0.5 - q) is (0.5 - q) and (q + 0.5) is (0.5 + q)
    handled.clear()
    two_float = 2.0 * q  # another key than the integer 2 (``_step``'s own): made by the handler
    assert handled and two_float is not first and torch.equal(two_float._value(), 2.0 * w[1])
    handled.clear()
    np_two = np.float64(2.0) * q  # a float subclass: the handler decides
    value = np_two._value() if isinstance(np_two, LazyParam) else np_two
    assert handled and torch.equal(torch.as_tensor(value), 2 * w[1])
    with torch.no_grad():
        plain = 2 * q  # made in another grad mode: not the child made with grad on
    assert plain is not first and not plain.requires_grad
    session.eager = True  # the arguments were written in place: every use is real
    eager = 2 * q
    assert type(eager) is torch.Tensor and torch.equal(eager, 2 * w[1])
    for m, v in ((first, 2 * w[1]), (third, w[1] / 3)):
        assert torch.equal(m._value(), v)


def test_an_integer_index_made_before_is_found_in_python(monkeypatch):
    """``gamma[l]`` and ``w[l, i]`` written per gate find the proxy made before without torch's ``__torch_function__``
    (a proxy of one dimension or more reads integer indexes in Python); every other index goes torch's way, and a
    0-d proxy is no sequence, so lists of them still make tensors (a Hamiltonian's coefficients)."""
    from qhybrid.workflow import _lazy

    w = torch.tensor([[0.3, -0.7, 1.1], [0.2, 0.5, -0.4]], dtype=torch.float64, requires_grad=True)
    (p,), _, session = _lazy_arguments.proxied((w,), {})
    row, elem = p[1], p[0, 2]
    calls = []
    real = LazyParam.__torch_function__.__func__
    monkeypatch.setattr(LazyParam, "__torch_function__", classmethod(lambda *a, **k: calls.append(a[1]) or real(*a, **k)))
    assert p[1] is row and p[0, 2] is elem and p[1][0] is p[1][0] and not calls[1:]  # (p[1][0]: made once, then found)
    calls.clear()
    for index, want in [(-1, w[-1]), (slice(0, 1), w[0:1]), ((0, slice(None)), w[0, :]), (torch.tensor([1, 0]), w[[1, 0]])]:
        got = p[index]
        assert calls and torch.equal(got._value() if isinstance(got, LazyParam) else got, want)
        calls.clear()
    assert type(elem) is LazyParam and type(p) is not LazyParam and isinstance(p, LazyParam)
    assert torch.equal(torch.tensor([p[0, 0], p[1, 2]]), torch.tensor([0.3, -0.4], dtype=torch.float64))
    stacked = torch.stack([p[0], p[1]])
    assert torch.equal(stacked, w) and stacked.requires_grad
    with torch.no_grad():
        assert p[1] is not row and not p[1].requires_grad  # made in another grad mode: a child of its own
    session.eager = True
    assert type(p[1]) is torch.Tensor and torch.equal(p[1], w[1])  # written in place: every use is real


@pytest.mark.parametrize("static", [False, True])
def test_a_tensor_made_from_an_argument_is_its_value_detached(static):
    """``torch.tensor(w)`` inside the function (a detached copy; torch detaches in C++, past ``__torch_function__``)
    and ``torch.tensor([w[0, 1], w[1, 2]])`` give the values PennyLane's qnode gives, without a gradient through them,
    and a static trace counts them as uses of the values."""

    def circuit(w):
        frozen = torch.tensor(w)  # noqa: the user's own (torch warns: a copy of a tensor)
        pair = torch.tensor([w[0, 1], w[1, 2]])
        qml.RX(frozen[0, 0] * 2, 0)
        qml.RY(w[1, 1], 0)
        qml.IsingZZ(pair[0] - pair[1], [0, 1])
        qml.RX(w[0, 2], 1)
        return qml.expval(qml.Z(0) @ qml.Y(1))

    w = torch.tensor([[0.3, -0.7, 1.1], [0.2, 0.5, -0.4]], dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), static_structure=static)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    for k in range(2):
        a, b = (w + 0.1 * k).requires_grad_(), (w + 0.1 * k).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            va, vb = ours(a), ref(b)
        va.backward(), vb.backward()
        assert abs(float(va.detach() - vb.detach())) < TOL
        assert torch.allclose(a.grad, b.grad, atol=TOL, rtol=0) and a.grad[0, 0] == 0 and a.grad[1, 1] != 0


@pytest.mark.parametrize("static", [False, True])
def test_an_op_torch_runs_past_torch_function_records_the_call_from_the_real_tensors(static):
    """``torch.as_tensor(w, dtype=torch.float64)`` of a float32 argument copies in C++, where a proxy's value cannot be
    made with its gradient: the call (and later ones) is recorded from the real tensors, with PennyLane's values and
    gradients."""

    def circuit(w):
        wide = torch.as_tensor(w, dtype=torch.float64)
        qml.RX(wide[0] * 2, 0)
        qml.IsingZZ(wide[1], [0, 1])
        qml.RY(wide[2] - wide[1], 1)
        return qml.expval(qml.Z(0) @ qml.X(1))

    w = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float32)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=2), static_structure=static)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")
    for k in range(2):
        a, b = (w + 0.1 * k).requires_grad_(), (w + 0.1 * k).requires_grad_()
        va, vb = ours(a), ref(b)
        va.backward(), vb.backward()
        assert ours._record_real
        assert abs(float(va.detach() - vb.detach())) < TOL
        assert torch.allclose(a.grad, b.grad, atol=TOL, rtol=0) and a.grad[0] != 0


def test_recording_runs_with_the_collector_paused_and_leaves_no_cycles():
    """The user's function is recorded with Python's cyclic collector paused (restored afterwards, also when the
    function raises), and the lazy proxies leave no reference cycles behind for the collector (~70 objects a
    step before)."""
    import collections
    import gc

    seen = []
    edges = [(0, 1), (1, 2), (2, 3), (3, 0)]
    qaoa = qaoa_function(edges, 4)

    def circuit(gamma, beta):
        seen.append(gc.isenabled())
        if gamma.shape[0] == 3:
            raise ValueError("three layers refused")
        return qaoa(gamma, beta)

    node = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(circuit)
    ref = qml.QNode(qaoa, qml.device("default.qubit", wires=4), interface="torch")
    g, b = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in ([0.3, -0.2], [0.7, 0.1]))
    assert gc.isenabled()
    node(g, b).backward()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            node(g, b).backward()
        gc.collect()
        # (other tests' objects may still turn into garbage here, a cache's evicted entry say: only the lazy
        # recording's own are this test's business)
        ours = [o for o in gc.garbage if isinstance(o, (LazyParam, _lazy_arguments.Session))]
        assert not ours, collections.Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert seen and not any(seen) and gc.isenabled()
    with pytest.raises(ValueError, match="three layers"):
        node(torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    assert gc.isenabled()
    gr, br = (t.detach().clone().requires_grad_() for t in (g, b))
    ref(gr, br).backward()
    want = ref(gr, br)
    assert abs(node(g, b).item() - want.item()) < 1e-10
    # (four backward calls accumulated into g.grad and b.grad)
    assert torch.allclose(g.grad / 4, gr.grad, atol=1e-10) and torch.allclose(b.grad / 4, br.grad, atol=1e-10)

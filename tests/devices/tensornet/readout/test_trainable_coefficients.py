"""Trainable Hamiltonian coefficients (readout/sentence_data.py): values and gradients for circuit parameters
and coefficients against default.qubit, broadcast, float32/float64, as qml.dot and qml.Hamiltonian; a call
with new coefficient values binds, validates and plans nothing again."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid import _variant
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet.plugin import preprocess as device_preprocess
from qhybrid.devices.tensornet.readout import pauli_tables, sentence_data
from qhybrid.interfaces import _preprocess


def _words(rng, n: int, terms: int, z_only: bool = False):
    letters = "IZ" if z_only else "IXYZ"
    out = []
    while len(out) < terms:
        ops = [getattr(qml, L)(w) for w, L in enumerate(rng.choice(list(letters), size=n)) if L != "I"]
        word = qml.prod(*ops) if len(ops) > 1 else ops[0] if ops else qml.Identity(0)
        if all(word.pauli_rep != w.pauli_rep for w in out):
            out.append(word)
    return out


def _circuit(n, words, build):
    def circuit(x, c):
        qml.BasisState(np.array([1, 0] * (n // 2) + [0] * (n % 2)), wires=range(n))
        for w in range(n):
            qml.RY(x[..., w], wires=w)
        for w in range(n - 1):
            qml.CNOT(wires=[w, w + 1])
        qml.DoubleExcitation(x[..., 1] * 0.3, wires=[3, 1, 0, 2])
        return qml.expval(build(c, words))

    return circuit


BUILDS = {
    "dot": qml.dot,
    "Hamiltonian": qml.Hamiltonian,
    "dot + constant term": lambda c, words: qml.dot(c, words) + 0.25 * qml.X(0) @ qml.Z(2),
    "scaled sentences": lambda c, words: qml.sum(*(c[k] * (words[k] + 0.5 * words[(k + 1) % len(words)])
                                                   for k in range(len(words)))),
    # a number times scaled words (nested SProd of a float over a tensor: an AttributeError before)
    "a number times scaled words": lambda c, words: qml.s_prod(
        -1.5, qml.sum(*(qml.s_prod(0.5, c[k] * words[k]) for k in range(len(words))))
    ),
}


@pytest.fixture
def mapped(monkeypatch):
    """Counts the measurements read through a SentenceMap (the tests must reach the new path)."""
    calls = []
    real = sentence_data.SentenceMap.coefficients

    def spy(self, *args):
        calls.append(1)
        return real(self, *args)

    monkeypatch.setattr(sentence_data.SentenceMap, "coefficients", spy)
    return calls


@pytest.mark.parametrize("build", sorted(BUILDS))
@pytest.mark.parametrize("seed", [0, 1])
def test_values_and_gradients_match_default_qubit(build, seed, mapped):
    rng = np.random.default_rng(seed)
    n = 5
    words = _words(rng, n, 12, z_only=(seed == 1 and build == "dot"))
    circuit = _circuit(n, words, BUILDS[build])
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x0 = torch.tensor(rng.normal(size=n), dtype=torch.float64)
    c0 = torch.tensor(rng.normal(size=len(words)), dtype=torch.float64)
    for step in range(3):  # later calls: new coefficient values, the same plan
        out = []
        for f in (ours, ref):
            x = (x0 + step).clone().requires_grad_()
            c = (c0 * (1 + step)).clone().requires_grad_()
            v = f(x, c)
            v.backward()
            out.append((v.detach(), x.grad, c.grad))
        (va, ga, ca), (vb, gb, cb) = out
        assert abs(float(va - vb)) < 1e-10
        assert torch.allclose(ga, gb, atol=1e-10, rtol=0)
        assert torch.allclose(ca, cb, atol=1e-10, rtol=0)
    assert len(mapped) == 3


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_broadcast_and_precision(dtype, mapped):
    rng = np.random.default_rng(4)
    n = 4
    words = _words(rng, n, 10)
    circuit = _circuit(n, words, qml.dot)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    x0 = torch.tensor(rng.normal(size=(3, n)), dtype=torch.float64)
    c0 = torch.tensor(rng.normal(size=len(words)), dtype=torch.float64)
    xb, cb = x0.clone().requires_grad_(), c0.clone().requires_grad_()
    vb = ref(xb, cb)
    (vb * torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)).sum().backward()
    tol = 1e-10 if dtype == torch.float64 else 2e-5
    cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, dtype=cdtype))(circuit)
    xa, ca = x0.to(dtype).clone().requires_grad_(), c0.to(dtype).clone().requires_grad_()
    va = ours(xa, ca)
    (va * torch.tensor([1.0, -2.0, 0.5], dtype=dtype)).sum().backward()
    assert va.shape == (3,) and va.dtype == dtype
    assert torch.allclose(va.double(), vb.detach(), atol=tol, rtol=0)
    assert torch.allclose(xa.grad.double(), xb.grad, atol=tol, rtol=0)
    assert torch.allclose(ca.grad.double(), cb.grad, atol=tol, rtol=0)
    assert len(mapped) == 1


def test_second_call_binds_validates_and_plans_nothing(monkeypatch):
    rng = np.random.default_rng(2)
    n = 5
    words = _words(rng, n, 15)
    counts = {"bound": 0, "validated": 0, "tables": 0, "maps": 0, "programs": 0}

    def counting(name, owner, attr):
        real = getattr(owner, attr)

        def spy(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, attr, spy)

    counting("bound", _variant.Variant, "with_observables_bound")
    counting("validated", device_preprocess, "_observable_analytic")
    counting("tables", pauli_tables.PauliTable, "__init__")
    counting("maps", _simulate, "sentence_map")
    counting("programs", _simulate, "build_program")
    monkeypatch.setattr(_preprocess, "_CACHE", type(_preprocess._CACHE)())
    monkeypatch.setattr(pauli_tables, "_TABLES", type(pauli_tables._TABLES)())
    f = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(_circuit(n, words, qml.dot))
    x = torch.tensor(rng.normal(size=n), dtype=torch.float64)
    c0 = torch.tensor(rng.normal(size=len(words)), dtype=torch.float64)
    f(x, c0.clone().requires_grad_()).backward()
    first = dict(counts)
    assert first["tables"] == 1 and first["maps"] == 1 and first["programs"] == 1
    for k in range(2):
        c = (c0 * (2 + k)).requires_grad_()
        f(x, c).backward()
        assert c.grad is not None and c.grad.abs().sum() > 0
    assert counts == first


def test_words_coefficients_of_a_linear_combination():
    c = torch.tensor([0.5, -1.5, 2.0], dtype=torch.float64)
    H = qml.Hamiltonian(c, [qml.X(0) @ qml.X(1), qml.Z(1), qml.X(0) @ qml.X(1) @ qml.Identity(2)])
    m = sentence_data.sentence_map(H, 4, {0: 0, 1: 1, 2: 2})
    assert m.offset == 4 and m.tensors == [0, 1, 2] and len(m.table.words) == 2  # the repeated word is one table row
    assert m.words_coefficients(c, torch.float64, "cpu").tolist() == [2.5, -1.5]


def test_non_coefficient_data_keep_the_bound_path():
    theta = torch.tensor(0.3, dtype=torch.float64)
    assert sentence_data.sentence_map(qml.Hermitian(torch.eye(2, dtype=torch.float64), 0), 0, {0: 0}) is None
    assert sentence_data.sentence_map(qml.exp(qml.X(0), theta), 0, {0: 0}) is None


def test_a_constant_hamiltonian_beside_a_trainable_one(mapped):
    rng = np.random.default_rng(6)
    n = 4
    words = _words(rng, n, 8)
    fixed = qml.dot(rng.normal(size=5), _words(rng, n, 5))

    def circuit(x, c):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(n))
        qml.DoubleExcitation(x[0], wires=[0, 1, 2, 3])
        qml.RY(x[1], wires=2)
        return qml.expval(fixed), qml.expval(qml.dot(c, words)), qml.expval(qml.Z(1))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    out = []
    for f in (ours, ref):
        x = torch.tensor([0.4, -0.7], dtype=torch.float64, requires_grad=True)
        c = torch.tensor(rng.normal(size=len(words)) if not out else out[0][3], dtype=torch.float64, requires_grad=True)
        v = torch.stack(f(x, c))
        (v * torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64)).sum().backward()
        out.append((v.detach(), x.grad, c.grad, c.detach().numpy()))
    assert torch.allclose(out[0][0], out[1][0], atol=1e-10, rtol=0)
    assert torch.allclose(out[0][1], out[1][1], atol=1e-10, rtol=0)
    assert torch.allclose(out[0][2], out[1][2], atol=1e-10, rtol=0)
    assert len(mapped) == 2  # both Hamiltonians through their maps


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
@pytest.mark.parametrize("static", [False, True])
def test_a_number_times_a_tensor_coefficient_is_exact_in_a_variance(diff_method, static):
    """PennyLane's ``SProd`` sentence multiplies a tensor coefficient by a number made a float32 tensor first, and
    a variance reads that sentence: 12.3248827804 for 12.3248819965 (found by a fuzzing helper, 2026-11-29).
    Reference: default.qubit's state and the observable's matrix built with torch (default.qubit's own
    variance gives NaN for the coefficient's derivative here)."""

    def observable(x):
        return qml.s_prod(-1.8653, qml.sum(qml.s_prod(x[0], qml.Z(0)), qml.s_prod(0.37, qml.X(0) @ qml.Z(1))))

    def gates(x):
        qml.Hadamard(0)
        qml.RX(x[1], 0)
        qml.CNOT([0, 1])

    def circuit(x):
        gates(x)
        return qml.var(observable(x))

    def state(x):
        gates(x)
        return qml.state()

    def reference(x):
        psi = qml.QNode(state, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(x)
        z, xm, i2 = (torch.tensor(m, dtype=torch.complex128) for m in ([[1, 0], [0, -1]], [[0, 1], [1, 0]], np.eye(2)))
        m = -1.8653 * (x[0] * torch.kron(z, i2) + 0.37 * torch.kron(xm, z))
        mean = (psi.conj() @ m @ psi).real
        return (psi.conj() @ m @ m @ psi).real - mean**2

    def run(node):
        x = torch.tensor([1.8821, 0.3], dtype=torch.float64, requires_grad=True)
        value = node(x)
        return value.detach(), torch.autograd.grad(value, x)[0]

    ours = run(qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(circuit))
    ref = run(reference)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)

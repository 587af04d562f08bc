"""Fermionic excitation gates: closed-form matrices, the two-level kernel and its adjoint walk
(engines/statevector/excitations.py), BasisState starting the state-vector program, and the chemistry
templates built on them, against default.qubit."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet._excitation_gates import TWO_LEVEL, excitation_matrix
from qhybrid.devices.tensornet.engines.statevector import excitations, kernels

GATES = sorted(TWO_LEVEL)


@pytest.mark.parametrize("name", GATES)
def test_builder_matches_pennylane(name):
    theta = torch.tensor([0.0, 0.37, -2.1, np.pi], dtype=torch.float64)
    got = excitation_matrix(name, [theta], torch.complex128, "cpu")
    want = np.stack([getattr(qml, name).compute_matrix(t) for t in theta.numpy()])
    assert np.abs(got.numpy() - want).max() < 1e-14


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts two-level applications and walks back (the tests must reach the kernel)."""
    calls = {"apply": 0, "unapply": 0}
    for what in calls:
        real = getattr(excitations, what)

        def spy(*args, _real=real, _what=what):
            calls[_what] += 1
            return _real(*args)

        monkeypatch.setattr(excitations, what, spy)
    return calls


@pytest.mark.parametrize("name", GATES)
def test_gate_value_and_gradient(name, kernel_calls):
    n = 6
    k = 4 if TWO_LEVEL[name][0] == 16 else 2
    wires = [4, 1, 5, 2][:k]  # scattered and out of order
    H = qml.dot([0.4, -0.3, 0.25, 0.7], [qml.X(1) @ qml.Y(4), qml.Z(5), qml.Y(2) @ qml.Y(5), qml.X(0) @ qml.X(1) @ qml.Z(4)])

    def circuit(x):
        qml.BasisState(np.array([1, 1, 0, 1, 0, 0]), wires=range(n))
        for w in range(n):
            qml.RY(x[w], wires=w)
        getattr(qml, name)(x[n], wires=wires)
        qml.CNOT(wires=[2, 3])
        getattr(qml, name)(x[n + 1], wires=wires[::-1])
        return qml.expval(H)

    x0 = torch.tensor(np.random.default_rng(3).normal(size=n + 2), dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    out = []
    for f in (ours, ref):
        x = x0.clone().requires_grad_()
        v = f(x)
        v.backward()
        out.append((v.detach(), x.grad))
    assert abs(float(out[0][0] - out[1][0])) < 1e-10
    assert torch.allclose(out[0][1], out[1][1], atol=1e-10, rtol=0)
    assert kernel_calls["apply"] >= 2 and kernel_calls["unapply"] >= 2


def test_second_derivatives_through_the_kernel():
    def circuit(x):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(4))
        qml.DoubleExcitationPlus(x[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(x[1], wires=[1, 3])
        return qml.expval(qml.X(0) @ qml.X(2) + 0.5 * qml.Z(3))

    x = torch.tensor([0.3, -0.8], dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=4))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch", diff_method="backprop")
    h1 = torch.autograd.functional.hessian(ours, x)
    h2 = torch.autograd.functional.hessian(ref, x)
    assert torch.allclose(h1, h2, atol=1e-10, rtol=0)


def test_basis_state_runs_on_the_state_vector_program(monkeypatch):
    built = []
    real = _simulate.build_program

    def spy(*args):
        program = real(*args)
        built.append(type(program).__name__)
        return program

    monkeypatch.setattr(_simulate, "build_program", spy)

    @qhybrid.qnode(qhybrid.device("tensornet", wires=3))
    def f(x):
        qml.BasisState(np.array([0, 1, 1]), wires=[0, 1, 2])
        qml.SingleExcitation(x, wires=[0, 2])
        return qml.expval(qml.X(0) @ qml.X(2))

    assert abs(float(f(torch.tensor(0.4, dtype=torch.float64))) - np.sin(0.4)) < 1e-12
    assert built == ["VectorProgram"]


def _hamiltonian(n, seed):
    rng = np.random.default_rng(seed)
    words = [qml.Identity(0)] + [
        qml.prod(*[getattr(qml, L)(w) for w, L in enumerate(rng.choice(list("IXYZ"), size=n)) if L != "I"] or [qml.Z(0)])
        for _ in range(40)
    ]
    return qml.dot(rng.normal(size=len(words)), words)


def _templates(n, electrons):
    hf = qml.qchem.hf_state(electrons, n)
    singles, doubles = qml.qchem.excitations(electrons, n)
    s_wires, d_wires = qml.qchem.excitations_to_wires(singles, doubles)
    return {
        "AllSinglesDoubles": (len(singles) + len(doubles), lambda p: qml.AllSinglesDoubles(
            p, wires=range(n), hf_state=hf, singles=singles, doubles=doubles)),
        "UCCSD": (len(singles) + len(doubles), lambda p: qml.UCCSD(
            p, wires=range(n), s_wires=s_wires, d_wires=d_wires, init_state=hf)),
        "kUpCCGSD": (qml.kUpCCGSD.shape(k=1, n_wires=n, delta_sz=0), lambda p: qml.kUpCCGSD(
            p, wires=range(n), k=1, delta_sz=0, init_state=hf)),
        "GateFabric": (qml.GateFabric.shape(n_layers=1, n_wires=n), lambda p: qml.GateFabric(
            p, wires=range(n), init_state=hf, include_pi=True)),
        "ParticleConservingU1": (qml.ParticleConservingU1.shape(n_layers=1, n_wires=n), lambda p: qml.ParticleConservingU1(
            p, wires=range(n), init_state=hf)),
        "ParticleConservingU2": (qml.ParticleConservingU2.shape(n_layers=1, n_wires=n), lambda p: qml.ParticleConservingU2(
            p, wires=range(n), init_state=hf)),
    }


@pytest.mark.parametrize("template", ["AllSinglesDoubles", "UCCSD", "kUpCCGSD", "GateFabric", "ParticleConservingU1",
                                      "ParticleConservingU2"])
def test_chemistry_templates(template):
    n = 6
    H = _hamiltonian(n, 5)
    shape, ansatz = _templates(n, 2)[template]

    def circuit(p):
        ansatz(p)
        return qml.expval(H)

    p0 = torch.tensor(np.random.default_rng(1).normal(size=shape), dtype=torch.float64)
    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    for step in range(2):
        out = []
        for f in (ours, ref):
            p = (p0 * (1 + step)).clone().requires_grad_()
            v = f(p)
            v.backward()
            out.append((v.detach(), p.grad))
        assert abs(float(out[0][0] - out[1][0])) < 1e-10
        assert torch.allclose(out[0][1], out[1][1], atol=1e-10, rtol=0)


def test_sparse_hamiltonian_adjoint_gradient():
    n = 4
    H = _hamiltonian(n, 9)
    S = qml.SparseHamiltonian(H.sparse_matrix(wire_order=range(n)), wires=range(n))

    def circuit(x):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(n))
        qml.DoubleExcitation(x[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(x[1], wires=[1, 2])
        return qml.expval(S)

    out = []
    for f in (qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(circuit),
              qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")):
        x = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)
        v = f(x)
        v.backward()
        out.append((v.detach(), x.grad))
    assert abs(float(out[0][0] - out[1][0])) < 1e-10
    assert torch.allclose(out[0][1], out[1][1], atol=1e-10, rtol=0)


def test_kernel_matches_dense_matrix():
    n, wires = 5, (3, 0, 4, 1)
    psi = torch.randn(1 << n, 2, 1, dtype=torch.complex128)
    m = excitation_matrix("DoubleExcitationMinus", [torch.tensor(0.9, dtype=torch.float64)], torch.complex128, "cpu")
    info = excitations.TwoLevel("DoubleExcitationMinus", wires, n)
    got = excitations.apply(psi, m, info)
    want = kernels.apply_scattered(psi, m, wires, n, False)
    assert torch.allclose(got, want, atol=1e-13)


@pytest.mark.parametrize("name", GATES)
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_kernel_and_walk_back_on_random_states(name, dtype):
    """The kernel against the gate's dense matrix on a random stacked state, and its walk back against
    torch autograd through the dense product (state before, cotangent before, matrix cotangent)."""
    rng = np.random.default_rng(11)
    n, k = 6, 4 if TWO_LEVEL[name][0] == 16 else 2
    wires = [5, 2, 0, 3][:k]
    tol = 1e-12 if dtype == torch.complex128 else 1e-5
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    psi = torch.tensor(rng.normal(size=(1 << n, 2, 3)) + 1j * rng.normal(size=(1 << n, 2, 3)), dtype=dtype)
    m = excitation_matrix(name, [torch.tensor(rng.normal(), dtype=real)], dtype, "cpu").detach()
    info = excitations.TwoLevel(name, wires, n)
    out = excitations.apply(psi, m, info)
    assert torch.allclose(out, kernels.apply_scattered(psi, m, wires, n, False), atol=tol)
    h = torch.tensor(rng.normal(size=psi.shape) + 1j * rng.normal(size=psi.shape), dtype=dtype)  # conj cotangent
    before, h_before, (g_m,) = excitations.unapply(out, h, m, info, [True], True)
    assert torch.allclose(before, psi, atol=tol * 10)
    p, mm = psi.clone().requires_grad_(), m.clone().requires_grad_()
    ref = kernels.apply_scattered(p, mm, wires, n, False)
    gp, gmm = torch.autograd.grad(ref, (p, mm), h.conj())
    assert torch.allclose(h_before.conj(), gp, atol=tol * 10)
    mask = g_m != 0  # the kernel gives the entries that can depend on the angle; the rest are structural zeros
    assert torch.allclose(g_m[mask], gmm[mask], atol=tol * 10)
    assert int(mask.sum()) >= (256 if name == "OrbitalRotation" else 4)


@pytest.mark.parametrize("name", GATES)
def test_broadcast_angles_and_float32(name):
    n = 5
    k = 4 if TWO_LEVEL[name][0] == 16 else 2
    wires = [3, 0, 4, 1][:k]
    H = qml.dot([0.4, -0.3, 0.25], [qml.X(0) @ qml.Y(3), qml.Z(4), qml.Y(1) @ qml.Y(4) @ qml.X(0)])

    def circuit(x):
        qml.BasisState(np.array([1, 0, 1, 1, 0]), wires=range(n))
        qml.RY(x[..., 0], wires=2)
        getattr(qml, name)(x[..., 1], wires=wires)
        qml.CNOT(wires=[2, 4])
        getattr(qml, name)(x[..., 2], wires=wires[::-1])
        return qml.expval(H)

    x0 = torch.tensor(np.random.default_rng(5).normal(size=(3, 3)), dtype=torch.float64)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")
    xb = x0.clone().requires_grad_()
    vb = ref(xb)
    vb.sum().backward()
    for dtype, cdtype, tol in ((torch.float64, torch.complex128, 1e-10), (torch.float32, torch.complex64, 2e-5)):
        ours = qhybrid.qnode(qhybrid.device("tensornet", wires=n, dtype=cdtype))(circuit)
        xa = x0.to(dtype).clone().requires_grad_()
        va = ours(xa)
        va.sum().backward()
        assert torch.allclose(va.double(), vb.detach(), atol=tol, rtol=0)
        assert torch.allclose(xa.grad.double(), xb.grad, atol=tol, rtol=0)
        for row in range(3):  # and each angle set alone (no broadcast: the kernel itself)
            xr = x0[row].to(dtype).clone().requires_grad_()
            v = ours(xr)
            v.backward()
            xr2 = x0[row].clone().requires_grad_()
            r = ref(xr2)
            r.backward()
            assert abs(float(v.detach()) - float(r.detach())) < tol and torch.allclose(xr.grad.double(), xr2.grad, atol=tol, rtol=0)

"""The mixed-state engine against PennyLane ``default.mixed`` (torch backprop) on random noisy circuits: every
measurement, Jacobians in gate and channel parameters (backprop, adjoint, qhybrid.qnode), data batches, float32,
a Hessian, parameter-shift where channels have a rule, the memory guard, and shots."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import ContractionTooLargeError, GradientError

from _noisy import apply_spec, first_params, random_spec

TOL = 1e-10
N = 3


def _measurements(n):
    h = qml.Hamiltonian([0.3, -0.7, 0.5], [qml.Z(0) @ qml.X(1), qml.Y(n - 1), qml.X(0) @ qml.Y(1) @ qml.Z(2)])
    return [
        qml.expval(h),
        qml.expval(qml.Z(1)),
        qml.var(qml.X(0) @ qml.Z(2)),
        qml.probs(wires=[2, 0]),
        qml.probs(op=qml.X(1)),
        qml.density_matrix(wires=[1, 2]),
        qml.purity(wires=[0]),
        qml.expval(qml.Hermitian(np.array([[1.0, 2j], [-2j, -0.5]]), wires=1)),
    ]


def _qnodes(ops, n, measure, **kwargs):
    def circuit(params, x=None):
        apply_spec(ops, params, x)
        return measure(n)

    ref = qml.QNode(circuit, qml.device("default.mixed", wires=n), interface="torch", diff_method="backprop")
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=n), interface="torch", **kwargs)
    return ref, ours


def _close(a, b, tol=TOL):
    for x, y in zip(a, b):
        torch.testing.assert_close(torch.as_tensor(x), torch.as_tensor(y).to(torch.as_tensor(x).dtype), atol=tol, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_results_match_default_mixed(seed):
    ops = random_spec(seed, N)
    ref, ours = _qnodes(ops, N, _measurements)
    _close(ours(None), ref(None))


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
@pytest.mark.parametrize("seed", [4, 8])
def test_jacobian_in_gate_and_noise_parameters(seed, diff_method):
    ops = random_spec(seed, N)
    params = first_params(ops)
    leaves = [p for p in params if p is not None]
    measure = lambda n: [qml.expval(qml.Z(0) @ qml.Z(1)), qml.probs(wires=[2])]  # noqa: E731
    ref, ours = _qnodes(ops, N, measure, diff_method=diff_method)
    a = torch.cat([r.reshape(-1) for r in ours(params)])
    b = torch.cat([r.reshape(-1) for r in ref(params)])
    torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    jac_ours = torch.autograd.functional.jacobian(lambda *ls: _flat(ours, ops, ls), tuple(leaves))
    jac_ref = torch.autograd.functional.jacobian(lambda *ls: _flat(ref, ops, ls), tuple(leaves))
    compared = 0
    for x, y in zip(jac_ours, jac_ref):
        finite = ~torch.isnan(y)  # default.mixed differentiates sqrt(0) (nan) where the derivative is 0
        compared += int(finite.sum())
        torch.testing.assert_close(x[finite], y[finite], atol=TOL, rtol=0)
        assert not torch.isnan(x).any()
    assert compared >= 6


def _flat(qnode, ops, leaves):
    it = iter(leaves)
    params = [next(it) if p is not None else None for p in first_params(ops)]
    return torch.cat([r.reshape(-1) for r in qnode(params)])


def test_batched_data_and_qhybrid_qnode():
    ops = random_spec(6, N)
    params = first_params(ops)
    leaves = [p for p in params if p is not None]
    x = torch.rand(5, N, dtype=torch.float64, requires_grad=True)
    measure = lambda n: [qml.expval(qml.Z(i)) for i in range(n)]  # noqa: E731
    ref, _ = _qnodes(ops, N, measure)

    @qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint")
    def ours(params, x):
        apply_spec(ops, params, x)
        return measure(N)

    a, b = torch.stack(ours(params, x), -1), torch.stack(ref(params, x), -1)
    assert a.shape == (5, N)
    torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    ga = torch.autograd.grad(a.sin().sum(), [x, *leaves])
    gb = torch.autograd.grad(b.sin().sum(), [x, *leaves])
    for g, h in zip(ga, gb):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_float32():
    ops = random_spec(7, N)
    measure = lambda n: [qml.expval(qml.Z(0)), qml.probs(wires=[1, 2])]  # noqa: E731

    def circuit(params):
        apply_spec(ops, params)
        return measure(N)

    ref = qml.QNode(circuit, qml.device("default.mixed", wires=N), interface="torch")(None)
    dev = qhybrid.device("tensornet", wires=N, dtype=torch.complex64)
    ours = qml.QNode(circuit, dev, interface="torch")(None)
    assert np.asarray(ours[0]).dtype == np.float32
    _close(ours, ref, tol=1e-5)


def test_hessian_through_backprop():
    ops = [("RX", [0], [0.3]), ("DepolarizingChannel", [0], [0.2]), ("CNOT", [0, 1], []),
           ("AmplitudeDamping", [1], [0.3]), ("RY", [1], [0.5])]

    def f(device):
        def circuit(a, p, g):
            apply_spec(ops, [a, p, None, g, None])
            return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(1))
        qnode = qml.QNode(circuit, device, interface="torch", diff_method="backprop", max_diff=2)
        return lambda v: qnode(v[0], v[1], v[2])

    v = torch.tensor([0.3, 0.2, 0.3], dtype=torch.float64)
    h_ours = torch.autograd.functional.hessian(f(qml.device("qhybrid.tensornet", wires=2)), v)
    h_ref = torch.autograd.functional.hessian(f(qml.device("default.mixed", wires=2)), v)
    torch.testing.assert_close(h_ours, h_ref, atol=TOL, rtol=0)
    assert h_ours[1, 2].abs() > 1e-3  # the noise strengths' mixed derivative is exercised


def test_parameter_shift_where_channels_have_a_rule():
    def circuit(a, p):
        qml.RX(a, 0)
        qml.BitFlip(p, 0)
        qml.DepolarizingChannel(p, 0)
        return qml.expval(qml.Z(0))

    a = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    p = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=1), interface="torch", diff_method="parameter-shift")
    ref = qml.QNode(circuit, qml.device("default.mixed", wires=1), interface="torch")
    for g, h in zip(torch.autograd.grad(ours(a, p), [a, p]), torch.autograd.grad(ref(a, p), [a, p])):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_parameter_shift_refuses_a_channel_without_a_rule():
    dev = qhybrid.device("tensornet", wires=1)

    @qhybrid.qnode(dev, diff_method="parameter-shift")
    def circuit(g):
        qml.Hadamard(0)
        qml.AmplitudeDamping(g, 0)
        return qml.expval(qml.X(0))

    g = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradientError, match="AmplitudeDamping"):
        circuit(g).backward()


def test_too_large_density_matrix_is_refused_with_its_size():
    dev = qhybrid.device("tensornet", wires=13, max_memory=1e8)
    tape = qml.tape.QuantumScript([qml.DepolarizingChannel(0.1, 0)] + [qml.CNOT([i, i + 1]) for i in range(12)],
                                  [qml.expval(qml.Z(12))])
    with pytest.raises(ContractionTooLargeError, match=r"4\*\*13"):
        dev.execute(tape)


def test_shots_sample_the_density_matrix_like_default_mixed():
    def circuit(x):
        qml.RY(x, 0)
        qml.CNOT([0, 1])
        qml.DepolarizingChannel(0.3, 1)
        qml.AmplitudeDamping(0.4, 0)
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.counts(wires=[0, 1]), qml.probs(wires=[1])

    x = np.array([0.5, 1.2])
    a = qml.set_shots(qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2, seed=3)), 2000)(x)
    b = qml.set_shots(qml.QNode(circuit, qml.device("default.mixed", wires=2, seed=3)), 2000)(x)
    np.testing.assert_allclose(a[0], b[0])
    assert a[1] == b[1]


@pytest.mark.parametrize("n", [12])
def test_twelve_wires_in_float64(n):
    """The issue's floor: a 12-wire noisy circuit runs (one density matrix of 4**12 entries)."""
    dev = qhybrid.device("tensornet", wires=n)
    ops = [qml.Hadamard(0)] + [qml.CNOT([i, i + 1]) for i in range(n - 1)] + [qml.DepolarizingChannel(0.1, w) for w in (0, n - 1)]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0) @ qml.Z(n - 1))])
    assert float(dev.execute(tape)) == pytest.approx((1 - 0.1 * 4 / 3) ** 2, abs=1e-12)


def test_twelve_wire_batch_density_matrix_is_refused_before_it_is_built(monkeypatch):
    """A 12-wire batch of 64 density matrices (16 GiB) asked for through probs (no walk back): refused with its
    size before the product state is allocated."""
    from qhybrid.devices.tensornet.engines.mixed import program

    monkeypatch.setattr(program, "product_density", lambda *a: pytest.fail("the density matrix was allocated"))
    n = 12
    dev = qhybrid.device("tensornet", wires=n, max_memory=2**30)
    x = torch.rand(64, n, dtype=torch.float64)
    ops = [qml.RY(x[:, q], q) for q in range(n)] + [qml.CNOT([i, i + 1]) for i in range(n - 1)]
    tape = qml.tape.QuantumScript(ops + [qml.DepolarizingChannel(0.1, 0)], [qml.probs(wires=[0])])
    with pytest.raises(ContractionTooLargeError, match=r"96.0 GiB at its peak \(6 matrices of 4\*\*12 x 64 lead"):
        dev.execute(tape)


def test_the_memory_guard_counts_the_density_matrix_run_at_its_peak():
    """The guard compared one density matrix with max_memory, where a run holds about five (a helper's 14-wire circuit,
    admitted by the default max_memory, was killed by the kernel at 19 GB): a 10-wire noisy circuit (16 MiB a
    matrix) under 40 MB is refused with its peak, before anything is allocated."""
    from qhybrid.devices.tensornet.engines.mixed.program import DENSITY_PEAK_MATRICES
    from qhybrid.errors import ContractionTooLargeError

    n = 10

    def circuit(x):
        for i in range(n):
            qml.RY(x * (i + 1), i)
            qml.DepolarizingChannel(0.1, i)
        for i in range(n - 1):
            qml.CNOT([i, i + 1])
        return qml.probs(wires=[0, 1])

    dev = qhybrid.device("tensornet", wires=n, max_memory=40e6)
    with pytest.raises(ContractionTooLargeError, match=rf"at its peak \({DENSITY_PEAK_MATRICES} matrices of 4\*\*10"):
        qhybrid.qnode(dev)(circuit)(torch.tensor(0.3, dtype=torch.float64))

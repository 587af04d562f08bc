"""Found by fuzzing qhybrid as a plain PennyLane device against default.qubit (2026-11-28): with
``interface="torch"`` and backprop (or "best"), a circuit with nothing trainable returned a numpy array where
default.qubit returns a torch tensor (then ``torch.autograd.functional.jacobian`` refused the output)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid


@pytest.mark.parametrize("diff_method", ["backprop", "best", "adjoint", "parameter-shift"])
@pytest.mark.parametrize("body", ["hamiltonian", "constant angle"])
def test_constant_circuits_return_torch_tensors(diff_method, body):
    def circuit(p):
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        if body == "constant angle":
            qml.RX(0.3, 0)
            return qml.expval(qml.Z(0))
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(0))

    p = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method)(p)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method=diff_method)(p)
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)
    jac = torch.autograd.functional.jacobian(
        qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method), p
    )
    assert torch.equal(jac, torch.zeros(2, dtype=torch.float64))


OBSERVABLES = {
    "SProd": lambda c: qml.s_prod(c[0], qml.Z(1)),
    "Sum": lambda c: qml.dot([c[0], c[1]], [qml.Z(0) @ qml.Z(1), qml.X(1)]),
    "Hamiltonian": lambda c: qml.Hamiltonian([c[0], 0.4, c[1]], [qml.Z(1), qml.Y(0), qml.X(0) @ qml.X(1)]),
}


@pytest.mark.parametrize("device_vjp", [True, False])
@pytest.mark.parametrize("kind", sorted(OBSERVABLES))
def test_trainable_observable_coefficients_through_the_device_adjoint(kind, device_vjp):
    """PennyLane hands the device NumPy data, so a trainable coefficient was read as a constant of the readout
    and its derivative was 0 (found by a fuzzing helper, 2026-11-29): [0.0, -0.207] for [0.955, -0.207]."""

    def circuit(x, c):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        qml.RY(x[1], 1)
        return qml.expval(OBSERVABLES[kind](c))

    def grads(dev, **kw):
        x = torch.tensor([0.3, -0.8], dtype=torch.float64, requires_grad=True)
        c = torch.tensor([0.7, -1.2], dtype=torch.float64, requires_grad=True)
        value = qml.QNode(circuit, dev, interface="torch", **kw)(x, c)
        return (value, *torch.autograd.grad(value, (x, c)))

    ours = grads(qml.device("qhybrid.tensornet", wires=2), diff_method="adjoint", device_vjp=device_vjp)
    ref = grads(qml.device("default.qubit", wires=2), diff_method="backprop")
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


def test_autograd_backprop_of_a_complex_result_after_a_real_one_of_odd_size():
    """The autograd interface's flat result read a complex one as a real view: its backward viewed the cotangent's
    slice as complex, which fails at an odd offset ("storage_offset divisible by 2"; 13 of 300 fuzzed cases)."""
    from pennylane import numpy as pnp

    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0)), qml.density_matrix(wires=[0])

    def loss(device):
        node = qml.QNode(circuit, device, interface="autograd", diff_method="backprop")
        return lambda x: (lambda r: r[0] + pnp.real(r[1][1, 1]))(node(x))

    x = pnp.array(0.4, requires_grad=True)
    ours = qml.grad(loss(qml.device("qhybrid.tensornet", wires=1)))(x)
    assert abs(float(ours) - float(qml.grad(loss(qml.device("default.qubit", wires=1)))(x))) < 1e-10


def test_autograd_backprop_through_a_sparse_hamiltonian():
    """A ``SparseHamiltonian``'s scipy matrix crossed the autograd boundary as an array (numpy made it an object
    array, which torch refused: TypeError). It crosses as it is now; values and first and second derivatives are
    default.qubit's (parameter-shift there: its backprop refuses sparse Hamiltonians)."""
    import scipy.sparse
    from pennylane import numpy as pnp

    dense = qml.matrix(qml.Z(0) @ qml.X(1) + 0.5 * qml.Y(0), wire_order=[0, 1])
    hamiltonian = qml.SparseHamiltonian(scipy.sparse.csr_matrix(dense), wires=[0, 1])

    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(hamiltonian)

    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="autograd", diff_method="backprop")
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="autograd", diff_method="parameter-shift", max_diff=2)
    x = pnp.array([0.3, 0.7], requires_grad=True)
    for transform in (lambda f: f, qml.grad, lambda f: qml.jacobian(qml.grad(f))):
        np.testing.assert_allclose(transform(ours)(x), transform(ref)(x), atol=1e-10, rtol=0)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])  # (PennyLane's parameter-shift takes no state)
def test_the_adjoint_of_a_global_phase(diff_method):
    """``adjoint(GlobalPhase(x))`` on no wires was run as a one-wire gate (IndexError); it is GlobalPhase(-x)."""

    def circuit(x):
        qml.Hadamard(0)
        qml.Hadamard(1)
        qml.ctrl(qml.adjoint(qml.GlobalPhase(x)), 0)
        qml.adjoint(qml.GlobalPhase(2 * x))
        return qml.state()

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    ours = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch", diff_method=diff_method)(x)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")(x)
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)
    g = torch.autograd.grad(ours.real.sum() + ours.imag.sum(), x)[0]
    h = torch.autograd.grad(ref.real.sum() + ref.imag.sum(), x)[0]
    torch.testing.assert_close(g, h, atol=1e-10, rtol=0)


class _FiniteDifferenceRY(qml.operation.Operation):
    """An RY that PennyLane's parameter-shift differentiates by finite differences (``grad_method = "F"``)."""

    num_wires, num_params, grad_method = 1, 1, "F"

    @staticmethod
    def compute_matrix(t):
        c, s = qml.math.cos(t / 2), qml.math.sin(t / 2)
        return qml.math.stack([qml.math.stack([c, -s]), qml.math.stack([s, c])])


@pytest.mark.parametrize("kind", ["finite-difference operator", "mid-circuit measurement"])
def test_parameter_shift_with_a_finite_difference_fallback(kind):
    """PennyLane's parameter-shift joins its shift-rule and finite-difference results with numpy's ``+``, which failed
    on the torch results the device handed a gradient transform ("Concatenation operation is not implemented for NumPy
    arrays"): a custom operator with ``grad_method="F"``, or a ``qml.cond`` (found by a fuzzing helper)."""

    def circuit(x):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        if kind == "mid-circuit measurement":
            qml.cond(qml.measure(1), qml.RY)(x[1], 2)
        else:
            _FiniteDifferenceRY(x[1], wires=2)
        return qml.expval(qml.Z(2)), qml.probs(wires=[0])

    def grad(name):
        x = torch.tensor([0.3, -0.8], dtype=torch.float64, requires_grad=True)
        out = qml.QNode(circuit, qml.device(name, wires=3), interface="torch", diff_method="parameter-shift")(x)
        return torch.autograd.grad(out[0] + out[1][0], x)[0]

    # (both through PennyLane's finite differences, step 1e-7: rounding near 1e-9)
    torch.testing.assert_close(grad("qhybrid.tensornet"), grad("default.qubit"), atol=1e-7, rtol=0)


@pytest.mark.parametrize("obs", ["Z", "sum"])
def test_adjoint_vjp_of_a_matrix_built_from_angles_after_a_cnot(obs):
    """PennyLane's QNode with the device's adjoint VJPs: a ``QubitUnitary`` made from trainable angles after a CNOT
    crashed handing its VJP to PennyLane ("Can't call numpy() on Tensor that has conjugate bit set"; found by a
    fuzzing helper)."""

    def circuit(x):
        qml.Hadamard(2)
        qml.CNOT([2, 0])
        qml.QubitUnitary(qml.RY.compute_matrix(2 * x[1]) @ qml.RZ.compute_matrix(-0.5 * x[0]), 0)
        return qml.expval(qml.Z(0) if obs == "Z" else 0.1 * qml.Y(0) + qml.Z(0))

    def grad(name, **options):
        x = torch.tensor([0.3, -0.8], dtype=torch.float64, requires_grad=True)
        node = qml.QNode(circuit, qml.device(name, wires=3), interface="torch", **options)
        return torch.autograd.grad(node(x), x)[0]

    want = grad("default.qubit", diff_method="backprop")
    got = grad("qhybrid.tensornet", diff_method="adjoint", device_vjp=True)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("entry", ["qhybrid.qnode", "plugin"])
def test_broadcast_expand_of_a_broadcast_multirz(entry):
    """PennyLane's ``broadcast_expand`` splits a broadcast ``MultiRZ`` into copies that keep their batch size of 3 (a
    PennyLane bug: default.qubit raises an IndexError): each scalar result came back three times, shape (3, 3)
    (found by a fuzzing helper). The stale batch size is read off the parameters."""

    def circuit(x):
        qml.Hadamard(0)
        qml.RY(0.4, 1)
        qml.MultiRZ(x, wires=[0, 1])
        return qml.expval(qml.X(0) @ qml.Y(1))

    x = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, requires_grad=True)
    if entry == "plugin":
        node = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch")
    else:
        node = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    got = qml.transforms.broadcast_expand(node)(x)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(x)
    assert got.shape == (3,)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    (g_got,), (g_want,) = torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(g_got, g_want, atol=1e-10, rtol=0)

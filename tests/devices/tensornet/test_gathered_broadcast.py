"""Same-kind gates whose matrices are built in one call from columns gathered off the inputs (``_values.prefetch``),
with a broadcast angle beside scalar ones: each scalar column meets the broadcast one along the broadcast axis.
With as many gates as broadcast entries a scalar column used to align with the gates' axis instead, silently
(two ``Rot`` with a broadcast theta of 2 gave <Z> = 0.936 where default.qubit gives 0.762)."""

import pennylane as qml
import pytest
import torch

import qhybrid

TOL = 1e-10


def _tape(params, n_gates, batch):
    ops = [qml.Hadamard(1), qml.CNOT([1, 0])]
    for g in range(n_gates):
        phi, theta, omega = params[3 * g : 3 * g + 3]
        ops.append(qml.Rot(phi, theta, omega, wires=0))
        ops.append(qml.CRY(params[-1], wires=[0, 1]))
    return qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0)), qml.expval(qml.X(0) @ qml.Y(1))])


@pytest.mark.parametrize("n_gates, batch", [(2, 2), (3, 3), (2, 3), (3, 1)])
def test_broadcast_and_scalar_angles_of_same_kind_gates_match_default_qubit(n_gates, batch):
    g = torch.Generator().manual_seed(10 * n_gates + batch)
    params = []
    for _ in range(n_gates):
        params += [torch.rand((), generator=g, dtype=torch.float64) * 6, torch.rand(batch, generator=g, dtype=torch.float64) * 6,
                   torch.rand((), generator=g, dtype=torch.float64) * 6]  # fmt: skip
    params.append(torch.rand((), generator=g, dtype=torch.float64) * 6)
    ours = [p.clone().requires_grad_() for p in params]
    theirs = [p.clone().requires_grad_() for p in params]
    (got,) = qhybrid.execute([_tape(ours, n_gates, batch)], qhybrid.device("tensornet", wires=2), diff_method="adjoint")
    (want,) = qml.execute([_tape(theirs, n_gates, batch)], qml.device("default.qubit", wires=2), diff_method="backprop")
    got, want = torch.stack(list(got)), torch.stack(list(want))
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    w = torch.linspace(0.5, 1.5, got.numel(), dtype=torch.float64).reshape(got.shape)
    for a, b in zip(torch.autograd.grad((got * w).sum(), ours), torch.autograd.grad((want * w).sum(), theirs)):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)

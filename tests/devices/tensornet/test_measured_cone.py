"""Density matrices, entropies and shots of a few wires: the circuit cut to the light cone of the measured wires
(``plugin/measured_cone.py``).

The cut is made only where the whole state does not fit ``max_memory``: the 16-wire tests give the device one too small
for their state, and the device reports the cut (its engine choice names the cut circuit's wires); the reference is
default.qubit on the whole circuit. On 60 wires nothing fits but the cut. Every test here was refused by the
state-vector memory guard before the cut."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import ContractionTooLargeError
from qhybrid.devices.tensornet.plugin.measured_cone import measured_cone

N = 16
SMALL = 2**21  # bytes: a 16-wire state (1 MiB) with its readout and adjoint walk does not fit; a cone of ~12 wires does


def _layers(theta, u, n=N, pairs=(qml.CNOT, qml.IsingXY, qml.CRX)):
    """Three brick layers of varied gates (parameters ``theta [3, n, 3]``, a 4x4 unitary ``u``)."""
    for layer in range(3):
        for w in range(n):
            qml.Rot(*theta[layer, w], wires=w)
        for w in range(layer % 2, n - 1, 2):
            gate = pairs[(w // 2 + layer) % 3]
            if gate is qml.CNOT:
                gate(wires=[w, w + 1])
            else:
                gate(theta[layer, w, 0] * 0.7, wires=[w, w + 1])
    qml.QubitUnitary(u, wires=[6, 7])


def _unitary(seed):
    a = np.random.default_rng(seed).normal(size=(4, 4)) + 1j * np.random.default_rng(seed + 1).normal(size=(4, 4))
    q, r = np.linalg.qr(a)
    return torch.tensor(q * (np.diag(r) / abs(np.diag(r))), dtype=torch.complex128)


def _inputs(seed, batch=None):
    gen = torch.Generator().manual_seed(seed)
    shape = (3, N, 3) if batch is None else (3, N, 3, batch)
    theta = (torch.rand(shape, generator=gen, dtype=torch.float64) * 3).requires_grad_()
    return theta, _unitary(seed)


MEASUREMENTS = {
    "density_matrix": lambda: [qml.density_matrix(wires=[6, 8])],
    "entropies": lambda: [qml.purity(wires=[5]), qml.vn_entropy(wires=[6, 7]), qml.mutual_info(wires0=[6], wires1=[8])],
    "beside expval and probs": lambda: [qml.density_matrix(wires=[7]), qml.expval(qml.X(5) @ qml.Y(6)), qml.probs(wires=[8])],
}


def _reference(kind, circuit_of, theta):
    """default.qubit's results; its entropies from its density matrices (its own ``purity`` of a 16-wire state
    asks for a 2^32-element matrix)."""
    if kind != "entropies":
        return qml.QNode(circuit_of(MEASUREMENTS[kind]), qml.device("default.qubit", wires=N), interface="torch")(theta)
    dms = lambda: [qml.density_matrix(wires=[5]), qml.density_matrix(wires=[6, 7]), qml.density_matrix(wires=[6, 8])]  # noqa: E731
    r5, r67, r68 = qml.QNode(circuit_of(dms), qml.device("default.qubit", wires=N), interface="torch")(theta)
    return [
        qml.math.purity(r5, indices=[0]),
        qml.math.vn_entropy(r67, indices=[0, 1]),
        qml.math.mutual_info(r68, indices0=[0], indices1=[1]),
    ]


@pytest.mark.parametrize("kind", list(MEASUREMENTS))
def test_density_matrices_and_entropies_match_default_qubit(kind):
    theta, u = _inputs(1)

    def circuit_of(measure):
        def circuit(t):
            _layers(t, u)
            return measure()

        return circuit

    dev = qhybrid.device("tensornet", wires=N, max_memory=SMALL)
    mine = qhybrid.qnode(dev, diff_method="adjoint")
    got, want = mine(circuit_of(MEASUREMENTS[kind]))(theta), _reference(kind, circuit_of, theta)
    assert _cut_widths(dev) and max(_cut_widths(dev)) < N
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)
    loss = lambda res: sum(torch.view_as_real(r.to(torch.complex128)).sum(-1).sum() for r in res)  # noqa: E731
    (g_mine,) = torch.autograd.grad(loss(got), theta)
    (g_ref,) = torch.autograd.grad(loss(want), theta)
    torch.testing.assert_close(g_mine, g_ref, atol=1e-10, rtol=0)


def _cut_widths(dev):
    """Wires of every whole circuit the device ran (its engine choices' "whole circuit, k wires")."""
    return [int(c.what.split(", ")[1].split()[0]) for c in dev.plan_cache_info().engines if c.what.startswith("whole circuit")]


def test_a_batch_of_parameters_and_the_plugin_match_default_qubit():
    theta, u = _inputs(2, batch=3)

    def circuit(t):  # (default.qubit's batched IsingXY builds its matrix in numpy: IsingZZ here)
        _layers(t, u, pairs=(qml.CNOT, qml.IsingZZ, qml.CRX))
        return qml.density_matrix(wires=[3, 4])

    mine = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=N, max_memory=SMALL), interface="torch")
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    got, want = mine(theta), ref(theta)
    assert got.shape == want.shape == (3, 4, 4)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    (g_mine,) = torch.autograd.grad(torch.real(got[:, 0, 1]).sum(), theta)
    (g_ref,) = torch.autograd.grad(torch.real(want[:, 0, 1]).sum(), theta)
    torch.testing.assert_close(g_mine, g_ref, atol=1e-10, rtol=0)


def test_shots_of_a_few_wires_follow_default_qubits_distribution():
    theta, u = _inputs(3)
    shots = 40_000

    def circuit(t):
        _layers(t, u)
        return qml.expval(qml.Z(6) @ qml.X(7)), qml.var(qml.Y(5)), qml.probs(wires=[6, 8]), qml.sample(qml.Z(7))

    def exact_circuit(t):
        _layers(t, u)
        return qml.expval(qml.Z(6) @ qml.X(7)), qml.var(qml.Y(5)), qml.probs(wires=[6, 8]), qml.expval(qml.Z(7))

    exact = qml.QNode(exact_circuit, qml.device("default.qubit", wires=N), interface="torch")(theta.detach())
    dev = qhybrid.device("tensornet", wires=N, max_memory=SMALL, shots=shots, seed=11)
    ev, var, probs, sample = qhybrid.qnode(dev, diff_method="parameter-shift")(circuit)(theta.detach())
    p_plus = (1 + exact[0]) / 2  # a +-1 outcome: its mean's standard deviation
    assert abs(ev - exact[0]) < 5 * 2 * torch.sqrt(p_plus * (1 - p_plus) / shots)
    assert abs(var - exact[1]) < 5 * 2 / np.sqrt(shots)  # (var of a +-1 outcome: 1 - mean^2, mean's error < 1/sqrt)
    sigma = torch.sqrt(exact[2] * (1 - exact[2]) / shots)
    assert torch.all(abs(probs - exact[2]) <= 5 * sigma + 1e-12)
    assert sample.shape == (shots,) and set(sample.tolist()) <= {-1.0, 1.0}
    assert abs(sample.mean() - exact[3]) < 5 / np.sqrt(shots)
    assert max(_cut_widths(dev)) < N
    # the same seed draws the same samples
    again = qhybrid.qnode(qhybrid.device("tensornet", wires=N, max_memory=SMALL, shots=shots, seed=11))(circuit)
    assert torch.equal(again(theta.detach())[3], sample)


def _wide_layers(t, wires):
    for layer in range(3):
        for w in wires:
            qml.Rot(*t[layer, w], wires=w)
        for w in range(wires[0] + layer % 2, wires[-1], 2):
            qml.CNOT(wires=[w, w + 1])


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_a_wide_circuits_reduced_state_and_samples(diff_method):
    """60 wires (no state vector anywhere): the reduced state of two middle wires equals that of the same gates on
    the 14 wires around them (the rest is outside their light cone after three brick layers)."""
    big = (torch.rand(3, 60, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 3).requires_grad_()

    def wide(t):
        _wide_layers(t, range(60))
        return qml.density_matrix(wires=[30, 31])

    @qml.qnode(qml.device("default.qubit", wires=range(24, 38)), interface="torch")
    def window(t):
        _wide_layers(t, range(24, 38))
        return qml.density_matrix(wires=[30, 31])

    got, want = qhybrid.qnode(qhybrid.device("tensornet", wires=60), diff_method=diff_method)(wide)(big), window(big)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    (g_mine,) = torch.autograd.grad(torch.real(got[1, 2] + got[0, 0]), big)
    (g_ref,) = torch.autograd.grad(torch.real(want[1, 2] + want[0, 0]), big)
    torch.testing.assert_close(g_mine, g_ref, atol=1e-10, rtol=0)

    def counted(t):
        _wide_layers(t, range(60))
        return qml.counts(wires=[30])

    counts = qhybrid.qnode(qhybrid.device("tensornet", wires=60, shots=4000, seed=1))(counted)(big.detach())
    assert sum(counts.values()) == 4000
    p0 = torch.real(want[0, 0] + want[1, 1]).item()  # wire 30 in |0>
    assert abs(counts.get("0", 0) / 4000 - p0) < 5 * np.sqrt(p0 * (1 - p0) / 4000)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_a_reduced_state_beside_local_expectations_of_a_wide_circuit(diff_method):
    """A density matrix beside expectations on wires across the circuit: the cone of every measured wire together is
    the whole 60-wire circuit, and it was refused as a state vector of many TiB (found by a fuzzing helper). The
    density matrix is cut apart to its own cone, the expectations go to the light cones; each equals default.qubit's
    on the 14 wires around its wires."""
    big = (torch.rand(3, 60, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64) * 3).requires_grad_()
    far = [0, 9, 17, 29, 44, 59]

    def wide(t):
        _wide_layers(t, range(60))
        return [qml.expval(qml.Z(0)), qml.density_matrix(wires=[30, 31])] + [qml.expval(qml.X(w)) for w in far[1:]]

    def window(lo, hi, measure):
        @qml.qnode(qml.device("default.qubit", wires=range(lo, hi)), interface="torch")
        def circuit(t):
            _wide_layers(t, range(lo, hi))
            return measure()

        return circuit(big)

    got = qhybrid.qnode(qhybrid.device("tensornet", wires=60), diff_method=diff_method)(wide)(big)
    want = [window(0, 8, lambda: qml.expval(qml.Z(0))), window(24, 38, lambda: qml.density_matrix(wires=[30, 31]))]
    # (windows from an even wire: the brick layers pair wires by the first wire's parity)
    want += [window(max(w - 8, 0) // 2 * 2, min(w + 8, 60), lambda w=w: qml.expval(qml.X(w))) for w in far[1:]]
    assert len(got) == len(want) == 7
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)
    loss = lambda res: torch.real(res[1][1, 0]) + sum(r for k, r in enumerate(res) if k != 1)  # noqa: E731
    (g_mine,) = torch.autograd.grad(loss(got), big)
    (g_ref,) = torch.autograd.grad(loss(want), big)
    torch.testing.assert_close(g_mine, g_ref, atol=1e-10, rtol=0)


def test_a_tape_whose_state_fits_is_kept_as_it_is():
    tape = qml.tape.QuantumScript([qml.RY(0.3, 0), qml.RY(0.2, 5)], [qml.density_matrix([0])], shots=100)
    (kept,), _ = measured_cone(tape, device_wires=None, max_memory=lambda: 1e9, itemsize=16)
    assert kept is tape


def test_a_cut_that_drops_the_batched_gates_keeps_the_batch():
    """The batched gate lies outside the measured wires' cone: exact results repeat along the batch (the cut tape
    has none), as default.qubit's; with shots the tape is not cut (the batch's draws are independent)."""
    theta, u = _inputs(6)
    phi = torch.tensor([0.1, 0.7, 1.9], dtype=torch.float64)

    def circuit(t):
        _layers(t, u)
        qml.RX(phi, wires=15)
        return qml.density_matrix(wires=[2]), qml.expval(qml.Z(3))

    dev = qhybrid.device("tensornet", wires=N, max_memory=SMALL)
    got = qhybrid.qnode(dev)(circuit)(theta)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=N), interface="torch")(theta)
    assert max(_cut_widths(dev)) < N
    assert got[0].shape == want[0].shape == (3, 2, 2) and got[1].shape == want[1].shape == (3,)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)
    tape = qml.tape.QuantumScript([qml.RX(phi, 0), qml.RY(0.3, 1)], [qml.expval(qml.Z(1))], shots=10)
    (kept,), _ = measured_cone(tape, device_wires=None, max_memory=lambda: 10.0, itemsize=16)
    assert kept is tape


def test_measurements_of_every_wire_are_still_refused_by_size():
    dev = qhybrid.device("tensornet", wires=50, shots=10)

    @qhybrid.qnode(dev)
    def every_wire(t):
        for w in range(50):
            qml.RY(t, wires=w)
        return qml.sample()

    with pytest.raises(ContractionTooLargeError, match="Finite shots"):
        every_wire(torch.tensor(0.3, dtype=torch.float64))


def test_measured_wires_no_gate_touches_keep_the_batch():
    """The measured wires' cone held no gate and the batched gate lay outside it: the empty cut still answered its
    original's batch size, so its results came back unbatched ((2, 2) for (3, 2, 2)); found by a fuzzing helper."""
    phi = torch.tensor([0.1, 0.7, 1.9], dtype=torch.float64)

    def circuit():
        qml.RX(phi, wires=0)
        qml.CNOT([0, 2])
        return qml.density_matrix(wires=[1]), qml.vn_entropy(wires=[1, 3])

    got = qhybrid.qnode(qhybrid.device("tensornet", wires=4, max_memory=256))(circuit)()
    want = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch")()
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, atol=1e-10, rtol=0)


@pytest.mark.parametrize("max_memory", [2**16, 2**17, 2**18, 2**19])
def test_a_budget_between_the_cut_and_the_engines_own_need(max_memory):
    """The cut judged the whole state by its least need (no state kept for the adjoint walk), where the engine counts
    the states its walk keeps: at 128 and 256 KiB a 10-wire Rot circuit was neither cut nor run (found by a fuzzing
    helper)."""
    n = 10

    def circuit(t):
        for w in range(n):
            qml.Rot(t[w], 0.2, 0.3, w)
        for w in range(0, n - 1, 2):
            qml.CNOT([w, w + 1])
        for w in range(n):
            qml.RX(t[n + w], w)
        return qml.density_matrix([0, 1])

    t = torch.linspace(0.1, 2.0, 2 * n, dtype=torch.float64).requires_grad_()
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=max_memory), diff_method="adjoint")(circuit)(t)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(t)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def _noisy_wide(theta, far: bool, measure):
    """20 wires: a noisy two-wire block on wires 2, 3 (the measured ones) and, elsewhere, a ``QubitUnitary`` and a
    ``QubitChannel``; with ``far`` False only the block (default.mixed's reference)."""
    k = [np.sqrt(0.85) * np.eye(2), np.sqrt(0.15) * np.array([[0.0, 1.0], [1.0, 0.0]])]
    if far:
        for w in range(4, 20):
            qml.RX(0.1 * w, wires=w)
        qml.QubitUnitary(np.array([[0.0, 1.0], [1.0, 0.0]]), wires=15)
        qml.QubitChannel(k, wires=[16])
        qml.CNOT([16, 17])
    qml.RY(theta[0], wires=2)
    qml.RX(theta[1], wires=3)
    qml.CNOT([2, 3])
    qml.DepolarizingChannel(0.1, wires=2)
    qml.QubitChannel(k, wires=[3])
    qml.CRY(theta[2], wires=[3, 2])
    return measure()


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
@pytest.mark.parametrize("kind", ["expval", "density_matrix"])
def test_noisy_wide_circuits_with_matrices_outside_the_cone(kind, diff_method):
    """A ``QubitUnitary`` or a ``QubitChannel`` anywhere in a wide noisy circuit disabled its light cones (they take
    scalar angles alone) and the whole density matrix was refused (24 GiB at 14 wires; found by a fuzzing helper).
    Outside the measured wires' cone they are now left out; values and gradients are default.mixed's on the cone."""
    measure = {"expval": lambda: qml.expval(qml.Z(2) @ qml.X(3)), "density_matrix": lambda: qml.density_matrix([2, 3])}[kind]
    theta = torch.tensor([0.4, 1.1, -0.7], dtype=torch.float64)
    dev = qhybrid.device("tensornet", wires=20, max_memory=2**30)
    a = theta.clone().requires_grad_()
    ours = qhybrid.qnode(dev, diff_method=diff_method)(lambda t: _noisy_wide(t, True, measure))(a)
    b = theta.clone().requires_grad_()
    want = qml.QNode(lambda t: _noisy_wide(t, False, measure), qml.device("default.mixed", wires=[2, 3]), interface="torch")(b)
    torch.testing.assert_close(ours, want, atol=1e-10, rtol=0)
    (ga,) = torch.autograd.grad(ours.real.sum() + (ours.imag.sum() if ours.is_complex() else 0), a)
    (gb,) = torch.autograd.grad(want.real.sum() + (want.imag.sum() if want.is_complex() else 0), b)
    torch.testing.assert_close(ga, gb, atol=1e-10, rtol=0)

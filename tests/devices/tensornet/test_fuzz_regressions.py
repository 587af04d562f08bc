"""Bugs the fuzzing against PennyLane found in the engines, each pinned: an adjoint walk's conjugated cotangent met
the real-GEMM path of a large state (crash); a cone class whose value does not depend on its shared rows (crash);
backprop where no output depends on a trainable parameter (no gradient at all); finite-shot sums next to another
measurement (a measurement dropped, silently when batched). Against default.qubit to 1e-10 (shots: statistically)."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate

TOL = 1e-10


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_a_conjugated_cotangent_on_a_large_state_takes_the_complex_gemm(diff_method):
    """16 wires (2^16 amplitudes: real blocks multiply the real view), an IsingXX on non-adjacent wires (its
    un-apply hands back a lazily conjugated cotangent), then real RY blocks."""
    n = 16

    def circuit(x):
        for w in range(n):
            qml.RY(0.1 * (w + 1), wires=w)
        for w in range(n - 1):
            qml.CZ([w, w + 1])
        qml.RY(x[0], wires=12)
        qml.IsingXX(x[1], wires=[12, 8])
        for w in range(n):
            qml.RY(0.05 * w, wires=w)
        return qml.expval(qml.X(12) @ qml.Z(8) + 0.5 * qml.Z(3))

    x, y = (torch.tensor([0.3, 0.5], dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method)(circuit)(x)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(y)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (g,), (h,) = torch.autograd.grad(got, x), torch.autograd.grad(want, y)
    assert h.abs().max() > 1e-3
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
def test_a_cone_class_that_does_not_depend_on_its_rows_gives_them_zero(diff_method):
    """CRX gates controlled by |0>: every ZZ word's value is 1 whatever the angles, on 32 wires (light cones, one
    class with shared rows)."""
    n = 32

    def circuit(theta):
        for k in range(n // 4):
            qml.CRX(theta[k], wires=[4 * k, 4 * k + 2])
        return qml.expval(qml.sum(*[qml.Z(i) @ qml.Z(i + 1) for i in range(n - 1)]))

    theta = torch.linspace(0.1, 0.8, n // 4, dtype=torch.float64, requires_grad=True)
    value = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method)(circuit)(theta)
    (g,) = torch.autograd.grad(value, theta)
    assert abs(float(value) - (n - 1)) < TOL and float(g.abs().max()) == 0.0


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
def test_an_output_that_depends_on_no_trainable_parameter_has_a_zero_gradient(diff_method, monkeypatch):
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # light cones: the measured cone holds no parameter

    def circuit(x):
        qml.RX(x, wires=0)
        qml.Hadamard(wires=1)
        return qml.expval(qml.X(1))

    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=diff_method)(circuit)(x)
    y.backward()
    assert abs(float(y) - 1.0) < TOL and float(x.grad) == 0.0


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize(
    "hamiltonian",
    [lambda: qml.Hamiltonian([0.5, 2.0], [qml.Z(0), qml.Z(0)]), lambda: qml.Hamiltonian([1.0], [qml.X(0)])],
    ids=["repeated word", "one term"],
)
def test_a_sampled_sum_beside_another_measurement_keeps_both(hamiltonian, batched):
    def circuit(x):
        qml.RY(x, wires=0)
        qml.RX(0.4, wires=1)
        return qml.expval(hamiltonian()), qml.var(qml.Y(1))

    x0 = torch.tensor([0.3, 0.7] if batched else 0.3, dtype=torch.float64)
    sampled = qhybrid.qnode(qhybrid.device("tensornet", wires=2, shots=40000, seed=7), diff_method="parameter-shift")
    got = sampled(circuit)(x0.clone().requires_grad_())
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(x0)
    assert len(got) == 2
    for a, b in zip(got, want):
        assert a.shape == b.shape
        assert float((a - b).abs().max()) < 0.05  # 40,000 shots: standard errors below 0.01


@pytest.mark.parametrize("static", [False, True])
def test_counts_beside_a_differentiated_expectation_with_device_shots(static):
    """Counts have no cotangent (the backward met None); a static qnode on a device with shots is traced per call
    (its trace was checked as analytic and refused counts)."""
    dev = qhybrid.device("tensornet", wires=1, seed=1, shots=20000)

    def circuit(x):
        qml.RX(x, 0)
        return qml.counts(wires=[0]), qml.expval(qml.Z(0))

    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    counts, value = qhybrid.qnode(dev, diff_method="parameter-shift", static_structure=static)(circuit)(x)
    value.backward()
    assert sum(int(v) for v in counts.values()) == 20000
    assert abs(float(value) - float(torch.cos(x.detach()))) < 0.03
    assert abs(float(x.grad) + float(torch.sin(x.detach()))) < 0.03


def test_a_measured_value_does_not_make_its_observable_trainable():
    """expval of a mid-circuit measurement becomes a Hermitian of its wire; the copy kept every parameter trainable,
    its matrix too."""
    from qhybrid.devices.tensornet.readout import measurement_values_as_observables

    x = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    with qml.queuing.AnnotatedQueue() as q:
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.expval(m)
    tape = qml.defer_measurements(qml.tape.QuantumScript.from_queue(q))[0][0]
    tape.trainable_params = [0]
    (new,), _ = measurement_values_as_observables(tape)
    assert new.trainable_params == [0]


@pytest.mark.parametrize("method", ["adjoint", "parameter-shift", "backprop"])
def test_a_controlled_evolution_with_a_trainable_time(method):
    """``qml.ctrl(qml.evolve(X0 @ Z2, t), 1)``: PennyLane's binding deep-copies the base, which its tensor refuses,
    so the device decomposed it, and PennyLane's decomposition of the exponential failed on torch (autoray's
    ``real_if_close``): an ImportError on every method. The base is rebound and controlled again."""

    def circuit(t):
        qml.Hadamard(1)
        qml.ctrl(qml.evolve(qml.X(0) @ qml.Z(2), t), control=1)
        return qml.expval(qml.Z(0))

    ours = qhybrid.qnode(qhybrid.device("tensornet", wires=3), diff_method=method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch", diff_method="backprop")
    a = torch.tensor(0.37, dtype=torch.float64, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    got, want = ours(a), ref(b)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    got.backward()
    want.backward()
    torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=0)


class _AxisRotation(qml.operation.Operation):
    """RX or RY by an attribute of its own, outside ``hyperparameters`` (a user's class)."""

    num_wires = 1
    num_params = 1
    grad_method = "A"
    parameter_frequencies = [(1,)]

    def __init__(self, theta, wires, axis="X", id=None):
        self.axis = axis
        super().__init__(theta, wires=wires, id=id)

    def matrix(self, wire_order=None):
        m = (qml.RX if self.axis == "X" else qml.RY).compute_matrix(self.data[0])
        return m if wire_order is None else qml.math.expand_matrix(m, self.wires, wire_order)

    @property
    def has_matrix(self):
        return True

    def generator(self):
        return -0.5 * (qml.X(self.wires) if self.axis == "X" else qml.Y(self.wires))

    def decomposition(self):
        return [(qml.RX if self.axis == "X" else qml.RY)(self.data[0], self.wires)]


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
def test_a_users_operator_with_a_setting_of_its_own(diff_method):
    """Found by a helper (also before plain replays): PennyLane's ``bind_new_parameters`` remakes an operator from its
    data and hyperparameters, so a class keeping ``self.axis`` ran its default axis (0 for 0.2955), and the caches'
    structure keys missed the attribute (a changed axis ran the old circuit)."""
    axis = ["Y"]

    def circuit(x):
        qml.RY(x[0], 0)
        _AxisRotation(x[1], 1, axis=axis[0])
        qml.CNOT([0, 1])
        return qml.expval(qml.X(1))

    mine = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method)(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch", diff_method="backprop")
    for a in ("Y", "Y", "X", "X", "Y"):
        axis[0] = a
        x = torch.tensor([0.7, 0.3], dtype=torch.float64, requires_grad=True)
        y = torch.tensor([0.7, 0.3], dtype=torch.float64, requires_grad=True)
        got, want = mine(x), ref(y)
        assert abs(float(got - want)) < 1e-10
        got.backward()
        want.backward()
        assert torch.allclose(x.grad, y.grad, atol=1e-10, rtol=0)


CONSTANT_OBSERVABLES = {
    "identity": (lambda: qml.expval(qml.Identity(0)), 1.0),
    "a word times itself": (lambda: qml.expval(qml.prod(qml.Z(0), qml.Z(0))), 1.0),
    "scaled identity": (lambda: qml.expval(2.5 * qml.Identity(3)), 2.5),
    "sum of identities": (lambda: qml.expval(qml.Identity(0) + 0.5 * qml.Identity(7)), 1.5),
    "variance of the identity": (lambda: qml.var(qml.Identity(2)), 0.0),
}


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("name", sorted(CONSTANT_OBSERVABLES))
def test_a_constant_observable_on_a_wide_circuit(name, batched, diff_method):
    """A measurement whose observable is a constant, alone, on 30 wires (light cones): no word reaches a cone,
    and the sentences' sum indexed an empty list (IndexError). Its value is the constant, its gradient zero."""
    measure, want = CONSTANT_OBSERVABLES[name]
    n = 30

    def circuit(x):
        for i in range(n):
            qml.RY(x[..., i], wires=i)
        for i in range(n - 1):
            qml.CNOT([i, i + 1])
        return measure()

    x = torch.linspace(0.1, 1.0, n, dtype=torch.float64)
    x = (x.expand(3, n) if batched else x).clone().requires_grad_()
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method=diff_method)(circuit)(x)
    assert got.shape == ((3,) if batched else ())
    torch.testing.assert_close(got, torch.full_like(got, want), atol=TOL, rtol=0)
    (g,) = torch.autograd.grad(got.sum(), x, allow_unused=True)
    assert g is None or g.abs().max() == 0


def test_the_variance_of_a_word_by_light_cones_under_parameter_shift(monkeypatch):
    """The variance's shifted runs measure the word's square (an identity) by light cones: the same empty sum."""
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # light cones even on two wires

    def circuit(x):
        qml.RY(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        return qml.var(qml.Z(0) @ qml.X(1))

    x, y = (torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method="parameter-shift")(circuit)(x)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(y)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    (g,), (h,) = torch.autograd.grad(got, x), torch.autograd.grad(want, y)
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


@pytest.mark.parametrize("wires", [0, [], None])
@pytest.mark.parametrize("measure", ["state", "probs", "phase"])
def test_a_device_without_wires(wires, measure):
    """A circuit on no wire (``wires=0``, ``[]``, or none and an empty circuit): the state's reshape and the
    probabilities' permutation were called with no dimension (a TypeError); default.qubit's ``[1]``."""

    def circuit(x):
        if measure == "phase":
            qml.GlobalPhase(x)
            return qml.state()
        return qml.state() if measure == "state" else qml.probs()

    x, y = (torch.tensor(0.3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=wires))(circuit)(x)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch")(y)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)


def test_shots_on_a_circuit_whose_state_does_not_fit_name_the_shots():
    """Finite shots of every wire are drawn from the whole state: on 40 wires the refusal spoke of a ``qml.state()``
    nobody asked for and suggested sampling with shots, which was what was done; it names the shots and what to do.
    (Shots of named wires are drawn from their light cone: ``tests/devices/tensornet/test_measured_cone.py``.)"""
    from qhybrid.errors import ContractionTooLargeError

    n = 40

    def circuit(x):
        for i in range(0, n, 2):
            qml.RY(x, i)
            qml.CNOT([i, i + 1])
        return qml.counts()

    with pytest.raises(ContractionTooLargeError, match=r"Finite shots are drawn from a state vector, here of 2\*\*40"):
        qhybrid.qnode(qhybrid.device("tensornet", wires=n, shots=100, seed=1))(circuit)(torch.tensor(1.3))


@pytest.mark.parametrize("plugin", [False, True])
def test_a_deferred_measurement_without_a_spare_wire_says_so(plugin):
    """A measured wire used again takes a spare wire once deferred; on a device of exactly the circuit's wires
    PennyLane's refusal named a wire nobody wrote (``{2}``): the refusal says what is missing and what to do."""

    def circuit(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.PauliX)(1)
        qml.RY(0.4, 0)
        return qml.expval(qml.Z(1))

    if plugin:
        node = qml.QNode(circuit, qml.device("qhybrid.tensornet", wires=2), interface="torch")
    else:
        node = qhybrid.qnode(qhybrid.device("tensornet", wires=2))(circuit)
    with pytest.raises(qml.wires.WireError, match="Create the device with 3 wires, or with wires=None"):
        node(torch.tensor(0.9, dtype=torch.float64))
    x, y = (torch.tensor(0.9, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=3))(circuit)(x)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=3), interface="torch")(y)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop", "parameter-shift"])
def test_a_batch_of_one_beside_a_batch_of_three_broadcasts(diff_method, static):
    """``x`` of shape (3, 2) beside ``w`` of (1, 2): default.qubit broadcasts the batch of one as numpy does, and
    PennyLane's ``tape.batch_size`` refused the circuit here ("they include 3 and 1"). Values and gradients of both
    against default.qubit with ``w`` expanded; batches of 3 and 2 stay refused."""

    def circuit(x, w):
        qml.RY(x[..., 0], 0)
        qml.RX(w[..., 0], 1)
        qml.CNOT([0, 1])
        qml.RZ(x[..., 1] * w[..., 1], 1)
        qml.RY(w[..., 1], 1)
        return qml.expval(qml.Z(1) + qml.X(0) @ qml.Y(1))

    gen = torch.Generator().manual_seed(4)
    x0, w0 = torch.rand(3, 2, generator=gen, dtype=torch.float64), torch.rand(1, 2, generator=gen, dtype=torch.float64)
    x, w, rx, rw = (t.clone().requires_grad_() for t in (x0, w0, x0, w0))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(circuit)
    got = node(x, w)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=2), interface="torch")(rx, rw.expand(3, 2))
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got.sum(), (x, w)), torch.autograd.grad(want.sum(), (rx, rw))):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)

    def apart(x, w):  # (no product of the two: torch itself refuses 3 against 2 there)
        qml.RY(x[..., 0], 0)
        qml.RX(w[..., 0], 1)
        return qml.expval(qml.Z(1))

    other = qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=diff_method, static_structure=static)(apart)
    # (PennyLane's refusal named the sizes alone: the gates now, found by a fuzzing helper)
    disagree = r"RY on wires \[0\] has a batch of 3; RX on wires \[1\] has a batch of 2"
    with pytest.raises(qhybrid.errors.BroadcastError, match=disagree):
        other(x0, torch.rand(2, 2, dtype=torch.float64))


@pytest.mark.parametrize("networks", [False, True])
@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_a_cone_class_without_parameters_beside_shared_ones(diff_method, networks, monkeypatch):
    """``X`` on a wire whose gates are a Hadamard and RXs (which commute with it: its cone keeps the Hadamard
    alone, a class of no parameter) beside ZZ words whose gates share ``gamma[l]``: grouping that class's empty
    parameter rows called ``torch.unique`` on a ``[1, 0]`` table, and its stacked state had no gate (crashes).
    30 wires; the reference is default.qubit on 8 (the same cones)."""
    from qhybrid.devices.tensornet.engines.lightcone import program as cone_program

    if networks:  # the classes as closed networks
        monkeypatch.setattr(cone_program, "CONE_STATE_MAX_WIRES", 0)

    def make(n):
        def circuit(gamma, beta):  # a chain's QAOA whose last wire has no edge
            for w in range(n):
                qml.Hadamard(w)
            for g, b in zip(gamma, beta):
                for w in range(n - 2):
                    qml.IsingZZ(g, wires=[w, w + 1])
                for w in range(n):
                    qml.RX(b, wires=w)
            return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(n - 1) + qml.Y(n - 1))

        return circuit

    args, ref_args = ([torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in ([0.4, 0.3], [0.7, 0.2])] for _ in range(2))
    got = qhybrid.qnode(qhybrid.device("tensornet", wires=30), diff_method=diff_method)(make(30))(*args)
    want = qml.QNode(make(8), qml.device("default.qubit"), interface="torch")(*ref_args)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g, h in zip(torch.autograd.grad(got, args), torch.autograd.grad(want, ref_args)):
        torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_a_closed_cone_class_whose_value_needs_no_parameter_differentiates(monkeypatch):
    """``<X>`` on wires whose gates all commute with X (IsingXX and RX after H): one closed class of two members
    sharing a row, whose value depends on none; its backward asked autograd for the gradient of a value that has
    none (a crash). default.qubit: 2 and zero gradients."""
    from qhybrid.devices.tensornet.engines.lightcone import whole

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # light cones on 4 wires
    monkeypatch.setattr(whole, "WHOLE_NETWORK_MAX_ELEMENTS", 0)

    def circuit(gamma, beta):
        for w in range(4):
            qml.Hadamard(w)
        for u, v in [(0, 1), (2, 3)]:
            qml.IsingXX(gamma[0], wires=[u, v])
        for w in range(4):
            qml.RX(beta[0], wires=w)
        return qml.expval(qml.X(0) + qml.X(2))

    dev = qhybrid.device("tensornet", wires=4, path_cache=False)
    args = [torch.tensor([v], dtype=torch.float64, requires_grad=True) for v in (0.4, 0.7)]
    got = qhybrid.qnode(dev, diff_method="adjoint")(circuit)(*args)
    assert any(c.engine == "closed network" for c in dev.plan_cache_info().engines)
    want = qml.QNode(circuit, qml.device("default.qubit", wires=4), interface="torch")(*args)
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    for g in torch.autograd.grad(got, args):
        assert g.abs().max() < TOL


@pytest.mark.parametrize("shape", [(2, 1), (1, 2)])
@pytest.mark.parametrize("beside_a_batch", [True, False])
def test_an_angle_with_a_dimension_too_many_is_refused(shape, beside_a_batch):
    """``RX(x)`` with ``x`` of shape ``(2, 1)`` (what ``nn.Linear(n, 1)`` gives) beside a gate broadcast over 2 ran as
    a wrong matrix: <Z> came back [0.0389, -0.0389] for cos x = [0.955, 0.878], and 1.907 for ``(1, 2)``.
    PennyLane's dimension check raises once and leaves the operator's batch size None, so a second read (after a
    ``try``) took the angle as unbatched. default.qubit refuses it; so does qhybrid, naming the gate."""
    from qhybrid.errors import BroadcastError

    x = torch.tensor([[0.3, 0.5]], dtype=torch.float64).reshape(shape)

    def circuit(x):
        qml.RX(x, 0)
        if beside_a_batch:
            qml.RY(torch.tensor([0.1, 0.2], dtype=torch.float64), 1)
        return qml.expval(qml.Z(0))

    for method in ("adjoint", "parameter-shift", "backprop"):
        with pytest.raises(BroadcastError, match=r"RX on wires \[0\].*dimensions"):
            qhybrid.qnode(qhybrid.device("tensornet", wires=2), diff_method=method)(circuit)(x)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])
    with pytest.raises(BroadcastError, match="dimensions"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))


def _diagonal_before_z(n, w):
    for i in range(n):
        qml.RZ(w[0], wires=i)
    for i in range(0, n - 1, 2):
        qml.CRZ(w[1], wires=[i, i + 1])
    for i in range(1, n - 1, 2):
        qml.SingleExcitation(w[2], wires=[i, i + 1])


def test_closed_cone_classes_beside_a_cone_without_gates():
    """Cone classes run as closed networks beside cones with no gate left (diagonal gates before Z words) crashed
    under a tight max_memory: a 0-d operand's positions were a numpy scalar ("Cannot set flags on array scalars");
    found by a fuzzing helper."""
    n = 14

    def circuit(w):
        _diagonal_before_z(n, w)
        h = qml.dot([0.7] * (n - 1) + [0.3] * n, [qml.Z(i) @ qml.Z(i + 1) for i in range(n - 1)] + [qml.Z(i) for i in range(n)])
        return [qml.expval(h)] + [qml.expval(qml.Z(i)) for i in range(n)]

    w = torch.tensor([0.3, 0.2, 0.5], dtype=torch.float64, requires_grad=True)
    dev = qhybrid.device("tensornet", wires=n, max_memory=1e4)
    got = torch.stack(qhybrid.qnode(dev, diff_method="adjoint")(circuit)(w))
    want = torch.stack(qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")(w))
    assert "closed network" in [e.engine for e in dev.plan_cache_info().engines]
    torch.testing.assert_close(got, want, atol=TOL, rtol=0)
    weights = torch.linspace(0.5, 1.5, n + 1, dtype=torch.float64)
    (g,), (h,) = torch.autograd.grad(got @ weights, w), torch.autograd.grad(want @ weights, w)
    torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_second_derivatives_through_a_cone_class_without_gates():
    """Two ZZ words only diagonal gates reach form a cone class with no gate; its second derivative asked autograd for
    the gradient of a value that has none (a crash under ``hessian``); found by a fuzzing helper."""
    n = 12

    def circuit(w):
        for i in range(n):
            qml.RZ(w[0], wires=i)
        qml.RY(w[1], wires=0)
        qml.CNOT([0, 1])
        qml.RY(w[1], wires=10)
        qml.CNOT([10, 11])
        words = [qml.Z(3) @ qml.Z(4), qml.Z(7) @ qml.Z(8), qml.Z(1) @ qml.X(0), qml.X(10) @ qml.Z(11)]
        return qml.expval(qml.dot([0.5, 0.5, 0.2, 0.3], words))

    w = torch.tensor([0.3, 0.2], dtype=torch.float64)
    mine = qhybrid.qnode(qhybrid.device("tensornet", wires=n, max_memory=1e4), diff_method="adjoint")(circuit)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch")
    torch.testing.assert_close(torch.autograd.functional.hessian(mine, w), torch.autograd.functional.hessian(ref, w), atol=TOL, rtol=0)


def test_shadow_expval_on_a_device_whose_wires_are_not_sorted():
    """PennyLane's ``map_wires`` of a ``shadow_expval`` maps its wires but not its observables, which then read state
    positions by their labels: on device wires [2, 0, 1] the estimate was 0.0103 for 0.6965 (found by a fuzzing
    helper). Within six times a generous bound of the estimator's spread (3 per shot for a two-letter word)."""
    wires = [2, 0, 1]
    h = qml.Z(2) @ qml.X(0) + 0.5 * qml.Y(1)

    def body(x):
        qml.RY(x, 2)
        qml.RX(0.4, 1)
        qml.CNOT([2, 0])
        qml.RY(1.1, 0)

    def shadow(x):
        body(x)
        return qml.shadow_expval(h)

    def exact(x):
        body(x)
        return qml.expval(h)

    x, shots = torch.tensor(0.9, dtype=torch.float64), 20_000
    want = qml.QNode(exact, qml.device("default.qubit", wires=wires), interface="torch")(x)
    mine = qhybrid.qnode(qhybrid.device("tensornet", wires=wires, shots=shots, seed=4))(shadow)(x)
    plugin = qml.QNode(shadow, qml.device("qhybrid.tensornet", wires=wires, shots=shots, seed=5))(x)
    for got in (mine, plugin):
        assert abs(float(got) - float(want)) < 6 * 3 * 1.5 / shots**0.5


@pytest.mark.parametrize("noise", ["exact", "trajectories"])
def test_a_qubit_channel_of_one_numpy_kraus_operator_on_a_second_call(noise):
    """The cached preprocessing rebuilt the channel with PennyLane's ``bind_new_parameters``, which reads a
    ``QubitChannel`` of one Kraus operator as that matrix's rows: every call after the first raised IndexError
    (found by a fuzzing helper)."""
    import numpy as np

    u = np.array([[0, 1], [1, 0]], dtype=complex)

    def circuit(x):
        qml.RX(x, 0)
        qml.QubitChannel([u], wires=0)
        return qml.expval(qml.Z(0))

    want = qml.QNode(circuit, qml.device("default.mixed", wires=1), interface="torch")(torch.tensor(0.4, dtype=torch.float64))
    node = qhybrid.qnode(qhybrid.device("tensornet", wires=1, noise=noise, seed=1))(circuit)
    for _ in range(3):
        got = node(torch.tensor(0.4, dtype=torch.float64, requires_grad=True))
        torch.testing.assert_close(got, torch.as_tensor(want, dtype=torch.float64), atol=1e-10, rtol=0)

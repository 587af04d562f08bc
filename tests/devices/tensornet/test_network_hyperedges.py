"""Diagonal gates and Z / I caps as hyperedges in closed networks (engines/network/network.py): against the
dense networks (every gate a [out, in] tensor) and default.qubit, values and gradients, batched, in
float64 and float32."""

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet import _simulate
from qhybrid.devices.tensornet._structure import tape_structure
from qhybrid.devices.tensornet.engines.network import network
from qhybrid.devices.tensornet.engines.network.network import closed_network, diagonal_slots

N_WIRES = 5

_DIAGONAL = ["RZ", "PhaseShift", "CZ", "CRZ", "ControlledPhaseShift", "IsingZZ", "MultiRZ", "PauliRotZ",
             "DiagonalQubitUnitary", "S", "T", "Z"]  # fmt: skip
_MIXERS = ["RX", "RY", "H", "CNOT"]


def _gate(name, rng, x):
    """One gate on random wires; angle gates read the broadcast input ``x`` (shape [B]) or a scalar."""
    wires = [int(w) for w in rng.choice(N_WIRES, size=3, replace=False)]
    angle = x * float(rng.uniform(0.5, 2.0)) + float(rng.uniform(-1, 1))
    if name == "PauliRotZ":
        return qml.PauliRot(angle, "ZIZ", wires=wires)
    if name == "DiagonalQubitUnitary":
        phases = torch.tensor(rng.uniform(-3, 3, 4), dtype=torch.float64)
        return qml.DiagonalQubitUnitary(torch.exp(1j * phases), wires=wires[:2])
    if name == "H":
        return qml.Hadamard(wires[0])
    op = getattr(qml, name)
    k = op.num_wires if isinstance(op.num_wires, int) else 3
    if op.num_params == 0:
        return op(wires=wires[:k])
    return op(angle, wires=wires[:k])


def _circuit(seed, x):
    rng = np.random.default_rng(seed)
    ops = [qml.Hadamard(w) for w in range(N_WIRES)]
    for _ in range(14):
        names = _DIAGONAL if rng.random() < 0.65 else _MIXERS
        ops.append(_gate(names[rng.integers(len(names))], rng, x))
    return ops


def _measurements():
    H = qml.Hamiltonian([0.7, -0.4, 1.1, 0.3], [qml.Z(0) @ qml.Z(3), qml.Z(1), qml.X(2) @ qml.Z(4), qml.Y(0)])
    return [qml.expval(H), qml.expval(qml.Z(2) @ qml.Z(4)), qml.probs(wires=[1, 3])]


def _run(device, seed, x):
    def circuit(x):
        for op in _circuit(seed, x):
            qml.apply(op)
        return _measurements()  # built inside the function: they queue themselves

    return device(circuit)(x)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_hyperedge_networks_match_dense_networks_and_default_qubit(seed, dtype, monkeypatch):
    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # closed networks, small enough to check
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    tol = 1e-10 if dtype == torch.complex128 else 2e-5
    x0 = torch.tensor([0.3, -1.2, 2.1], dtype=real)

    def grads_of(results, x):
        loss = sum(r.sum() for r in results)
        return torch.autograd.grad(loss, x)[0]

    outs = {}
    for hyper in (True, False):
        monkeypatch.setattr(network, "DIAGONAL_HYPEREDGES", hyper)
        dev = qhybrid.device("tensornet", wires=N_WIRES, dtype=dtype)
        x = x0.clone().requires_grad_()
        res = _run(lambda f: qhybrid.qnode(dev, diff_method="adjoint")(f), seed, x)
        outs[hyper] = ([r.detach() for r in res], grads_of(res, x))
    x = x0.to(torch.float64).clone().requires_grad_()
    ref_dev = qml.device("default.qubit", wires=N_WIRES)
    ref = _run(lambda f: qml.QNode(f, ref_dev, interface="torch", diff_method="backprop"), seed, x)
    ref_vals, ref_grad = [r.detach() for r in ref], grads_of(ref, x)
    for hyper in (True, False):
        vals, g = outs[hyper]
        for a, b in zip(vals, ref_vals):
            torch.testing.assert_close(a.to(torch.float64), b, atol=tol, rtol=0)
        torch.testing.assert_close(g.to(torch.float64), ref_grad, atol=tol * 10, rtol=0)


def _qaoa_tape(edges, n, p=2):
    ops = [qml.Hadamard(i) for i in range(n)]
    for _ in range(p):
        ops += [qml.IsingZZ(0.4, wires=e) for e in edges] + [qml.RX(0.3, wires=i) for i in range(n)]
    return qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0) @ qml.Z(1))])


def test_diagonal_gates_add_no_index(monkeypatch):
    """A QAOA cone's cost layers add no index as hyperedges: ket and bra together have as many indices as
    RX gates and wires (plus one tie per wire); dense, each IsingZZ adds two per half."""
    n = 8
    edges = [(i, (i + 1) % n) for i in range(n)]
    tape = _qaoa_tape(edges, n)
    s = tape_structure(tape, None)
    diag = diagonal_slots(s, tape)
    assert {s.slots[k].name for k in diag} == {"IsingZZ"}
    hyper = closed_network(s, frozenset(), 0, "pauli", (0, 1), "ZZ", diagonal=diag)
    monkeypatch.setattr(network, "DIAGONAL_HYPEREDGES", False)
    dense = closed_network(s, frozenset(), 0, "pauli", (0, 1), "ZZ", diagonal=diag)
    n_zz = sum(1 for o in dense.operands if o.kind == "slot" and s.slots[o.slot].name == "IsingZZ")
    indices = lambda net: {i for ix in net.inputs for i in ix}  # noqa: E731
    assert len(indices(dense)) - len(indices(hyper)) == 2 * n_zz + 2  # two per gate, one per Z cap wire
    assert all(len(ix) == 2 for o, ix in zip(hyper.operands, hyper.inputs) if o.diagonal and o.kind == "slot")


def test_z_word_pauli_rot_is_diagonal_only_with_its_word():
    tape = qml.tape.QuantumScript(
        [qml.PauliRot(0.1, "ZZ", wires=[0, 1]), qml.PauliRot(0.2, "XZ", wires=[0, 1])], [qml.expval(qml.Z(0))]
    )
    s = tape_structure(tape, None)
    assert diagonal_slots(s, tape) == {0}
    assert diagonal_slots(s) == frozenset()  # without the tape the word is unknown: dense

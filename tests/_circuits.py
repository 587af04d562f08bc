"""Random circuits for the reference comparisons: a gate table, a hypothesis strategy, and helpers that
run the same circuit on qhybrid and on PennyLane default.qubit (torch backprop)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pennylane as qml
import torch
from hypothesis import strategies as st
from scipy.stats import unitary_group

# name -> (number of wires (None = any >= 1), number of parameters)
FIXED_GATES = {
    "Hadamard": 1, "PauliX": 1, "PauliY": 1, "PauliZ": 1, "S": 1, "T": 1, "SX": 1,
    "CNOT": 2, "CZ": 2, "CY": 2, "SWAP": 2, "ISWAP": 2, "ECR": 2, "SISWAP": 2,
    "Toffoli": 3, "CSWAP": 3,
}
PARAM_GATES = {
    "RX": (1, 1), "RY": (1, 1), "RZ": (1, 1), "PhaseShift": (1, 1), "U1": (1, 1), "Rot": (1, 3),
    "U2": (1, 2), "U3": (1, 3), "CRX": (2, 1), "CRY": (2, 1), "CRZ": (2, 1), "CRot": (2, 3),
    "ControlledPhaseShift": (2, 1), "IsingXX": (2, 1), "IsingYY": (2, 1), "IsingZZ": (2, 1),
    "IsingXY": (2, 1), "SingleExcitation": (2, 1), "PSWAP": (2, 1), "MultiRZ": (None, 1),
    "PauliRot": (None, 1),
}
MATRIX_GATES = ("QubitUnitary", "MultiControlledX")
NO_TORCH_BROADCAST = {"IsingXY"}  # PennyLane's own matrix fails to broadcast torch parameters (the reference)
GATE_NAMES = sorted(FIXED_GATES) + sorted(PARAM_GATES) + list(MATRIX_GATES)


@dataclass
class GateSpec:
    name: str
    wires: list
    params: list = field(default_factory=list)  # numpy values (float or arrays)
    extra: dict = field(default_factory=dict)

    @property
    def trainable(self) -> bool:
        return self.name in PARAM_GATES


@dataclass
class CircuitSpec:
    n_wires: int
    prep: GateSpec | None
    gates: list
    measurements: list  # (kind, args)
    batch: int | None


@st.composite
def circuits(draw, max_wires=4, max_gates=12, broadcast=None, measurement_kinds=None, gate_names=None):
    n = draw(st.integers(2, max_wires))
    batch = draw(st.sampled_from([None, 2, 3])) if broadcast is None else broadcast
    names = gate_names or GATE_NAMES
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    prep = None
    if draw(st.booleans()) and draw(st.booleans()):
        k = draw(st.integers(1, n))
        wires = draw(st.permutations(range(n)))[:k]
        if draw(st.booleans()):
            vec = rng.normal(size=2**k) + 1j * rng.normal(size=2**k)
            prep = GateSpec("StatePrep", wires, [vec / np.linalg.norm(vec)])
        else:
            prep = GateSpec("BasisState", wires, [rng.integers(0, 2, size=k)])
    gates = []
    for _ in range(draw(st.integers(1, max_gates))):
        name = draw(st.sampled_from(names))
        if name in FIXED_GATES:
            k, n_params = FIXED_GATES[name], 0
        elif name in PARAM_GATES:
            k, n_params = PARAM_GATES[name]
        elif name == "QubitUnitary":
            k, n_params = draw(st.integers(1, 2)), 0
        else:  # MultiControlledX
            k, n_params = 3, 0
        k = draw(st.integers(1, n)) if k is None else k
        if k > n:
            continue
        wires = draw(st.permutations(range(n)))[:k]
        spec = GateSpec(name, wires)
        if name == "QubitUnitary":
            spec.params = [unitary_group.rvs(2**k, random_state=rng)]
        elif name == "MultiControlledX":
            spec.extra = {"control_values": [int(b) for b in rng.integers(0, 2, size=k - 1)]}
        elif name == "PauliRot":
            spec.extra = {"pauli_word": "".join(rng.choice(list("XYZ"), size=k))}
        for _ in range(n_params):
            if batch is not None and name not in NO_TORCH_BROADCAST and draw(st.booleans()):
                spec.params.append(rng.uniform(-np.pi, np.pi, size=batch))
            else:
                spec.params.append(float(rng.uniform(-np.pi, np.pi)))
        gates.append(spec)
    kinds = measurement_kinds or ["expval_z", "expval_word", "expval_ham", "expval_herm", "expval_sum",
                                  "var_word", "var_herm", "probs", "probs_all", "state", "density"]
    n_meas = draw(st.integers(1, 3))
    measurements = []
    for _ in range(n_meas):
        kind = draw(st.sampled_from(kinds))
        wires = draw(st.permutations(range(n)))
        measurements.append((kind, wires, int(rng.integers(0, 2**31))))
    if not any(np.ndim(p) == 1 and g.trainable for g in gates for p in g.params):
        batch = None
    return CircuitSpec(n, prep, gates, measurements, batch)


def _measurement(kind, wires, seed):
    rng = np.random.default_rng(seed)
    letters = {"X": qml.X, "Y": qml.Y, "Z": qml.Z}

    def word(ws):
        ops = [letters[rng.choice(list("XYZ"))](w) for w in ws]
        return ops[0] if len(ops) == 1 else qml.prod(*ops)

    def herm(ws):
        a = rng.normal(size=(2 ** len(ws),) * 2) + 1j * rng.normal(size=(2 ** len(ws),) * 2)
        return qml.Hermitian(a + a.conj().T, wires=ws)

    if kind == "expval_z":
        return qml.expval(qml.Z(wires[0]))
    if kind == "expval_word":
        return qml.expval(word(wires[:2]))
    if kind == "expval_ham":
        coeffs = rng.normal(size=3).tolist()
        return qml.expval(qml.Hamiltonian(coeffs, [word(wires[:1]), word(wires[:2]), qml.Identity(wires[0])]))
    if kind == "expval_herm":
        return qml.expval(herm(wires[: 1 + int(rng.integers(0, 2))]))
    if kind == "expval_sum":
        return qml.expval(qml.sum(qml.s_prod(float(rng.normal()), word(wires[:1])), herm(wires[1:2])))
    if kind == "var_word":
        return qml.var(word(wires[:2]))
    if kind == "var_herm":
        return qml.var(herm(wires[:1]))
    if kind == "probs":
        return qml.probs(wires=wires[: 1 + int(rng.integers(0, 2))])
    if kind == "probs_all":
        return qml.probs()
    if kind == "state":
        return qml.state()
    if kind == "density":
        return qml.density_matrix(wires=wires[:1])
    raise ValueError(kind)


def build_tape(spec: CircuitSpec, dtype=torch.float64, requires_grad=True):
    """The circuit as a QuantumScript with fresh torch leaves for every trainable parameter."""
    leaves, ops = [], []
    if spec.prep is not None:
        cls = getattr(qml, spec.prep.name)
        ops.append(cls(spec.prep.params[0], wires=spec.prep.wires))
    for g in spec.gates:
        if g.name == "QubitUnitary":
            ops.append(qml.QubitUnitary(g.params[0], wires=g.wires))
            continue
        if g.name == "MultiControlledX":
            ops.append(qml.MultiControlledX(wires=g.wires, control_values=g.extra["control_values"]))
            continue
        params = []
        for p in g.params:
            t = torch.tensor(p, dtype=dtype, requires_grad=requires_grad)
            leaves.append(t)
            params.append(t)
        cls = getattr(qml, g.name)
        if g.name == "PauliRot":
            ops.append(cls(*params, g.extra["pauli_word"], wires=g.wires))
        else:
            ops.append(cls(*params, wires=g.wires))
    mps = [_measurement(*m) for m in spec.measurements]
    return qml.tape.QuantumScript(ops, mps), leaves


def flat(result) -> list[torch.Tensor]:
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in flat(r)]
    return [result]


def reference(spec: CircuitSpec, wires):
    """default.qubit (torch backprop) results and the leaves they depend on."""
    tape, leaves = build_tape(spec)
    (res,) = qml.execute([tape], qml.device("default.qubit", wires=wires), diff_method="backprop")
    return _torch(res), leaves


def _torch(r):
    if isinstance(r, (tuple, list)):
        return type(r)(_torch(x) for x in r)
    return r if isinstance(r, torch.Tensor) else torch.as_tensor(np.asarray(r))


def loss_of(results, seed=7):
    """A fixed random real functional of every output, so gradients see every result entry."""
    g = torch.Generator().manual_seed(seed)
    total = 0
    for r in flat(results):
        w = torch.randn(r.shape, generator=g, dtype=torch.float64)
        total = total + (w * (r.real if r.is_complex() else r)).sum()
        if r.is_complex():
            total = total + (torch.randn(r.shape, generator=g, dtype=torch.float64) * r.imag).sum()
    return total


def grads(loss, leaves):
    if not leaves:
        return []
    gs = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(gs, leaves)]


def check_untrained_constants(ours, ref, x0, constants, tol=1e-10):
    """``ours(x, c)`` against ``ref(x, c)`` for each ``c`` of ``constants`` (tensors that need no gradient, new values
    each call): values, and gradients in ``x`` (``x0``, trainable)."""
    for values in constants:
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        c = torch.tensor(values, dtype=torch.float64)
        got, want = ours(x, c), ref(x, c)
        torch.testing.assert_close(got, want, atol=tol, rtol=0)
        torch.testing.assert_close(torch.autograd.grad(got, x)[0], torch.autograd.grad(want, x)[0], atol=tol, rtol=0)

"""Random circuits for the MPS tests, run on qhybrid (method="mps") and on default.qubit (torch backprop)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

ONE_WIRE = ["PauliX", "PauliY", "PauliZ", "Hadamard", "S", "T", "SX", "RX", "RY", "RZ", "PhaseShift", "Rot", "U2", "U3"]
TWO_WIRE = [
    "CNOT", "CY", "CZ", "CH", "SWAP", "ISWAP", "SISWAP", "ECR", "CRX", "CRY", "CRZ", "CRot",
    "ControlledPhaseShift", "IsingXX", "IsingYY", "IsingZZ", "IsingXY", "QubitUnitary",
]
THREE_WIRE = ["Toffoli", "CSWAP", "CCZ", "MultiRZ"]


def random_ops(n: int, depth: int, rng: np.random.Generator, angle, kinds=None):
    """``depth`` random gates on ``n`` wires (distant wire pairs included); ``angle()`` gives each angle."""
    kinds = kinds or ONE_WIRE + TWO_WIRE + THREE_WIRE
    ops = []
    for _ in range(depth):
        name = kinds[rng.integers(len(kinds))]
        cls = getattr(qml, name)
        if name in THREE_WIRE:
            wires = [int(w) for w in rng.choice(n, 3, replace=False)]
        elif name in TWO_WIRE:
            wires = [int(w) for w in rng.choice(n, 2, replace=False)]
        else:
            wires = [int(rng.integers(n))]
        if name == "QubitUnitary":
            q, _ = np.linalg.qr(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4)))
            ops.append(qml.QubitUnitary(q, wires=wires))
            continue
        n_params = cls.num_params if isinstance(cls.num_params, int) else 1
        ops.append(cls(*[angle() for _ in range(n_params)], wires=wires))
    return ops


def run_both(circuit, n: int, *args, mps_options=None, dtype=torch.complex128):
    """``circuit(*args)`` on qhybrid's MPS (backprop) and on default.qubit, as lists of tensors."""
    dev = __import__("qhybrid").device("tensornet", wires=n, method="mps", dtype=dtype, **(mps_options or {}))
    ours = __import__("qhybrid").qnode(dev, diff_method="backprop")(circuit)(*args)
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=n), interface="torch", diff_method="backprop")(*args)
    as_list = lambda r: list(r) if isinstance(r, (list, tuple)) else [r]
    return as_list(ours), as_list(ref), dev


def brickwork(n: int, depth: int, seed: int = 0, measure=None):
    """RY layers and CNOT brickwork: ``depth // 2`` CNOTs on each cut, so every Schmidt rank is at most
    2**(depth // 2) (a CNOT doubles it at most). ``measure(n)`` gives the return value (default ``<Z_{n//2}>``)."""
    angles = np.random.default_rng(seed).uniform(0, 3, size=(depth, n))

    def body():
        for d in range(depth):
            for w in range(n):
                qml.RY(float(angles[d, w]), w)
            for w in range(d % 2, n - 1, 2):
                qml.CNOT([w, w + 1])
        return measure(n) if measure else qml.expval(qml.Z(n // 2))

    return body

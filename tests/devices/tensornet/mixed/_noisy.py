"""Random noisy circuits for the mixed-state engine's comparisons with PennyLane ``default.mixed``."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

GATES_1 = ("RX", "RY", "RZ", "Rot", "Hadamard", "S", "T")
GATES_2 = ("CNOT", "CZ", "CRX", "IsingXX", "SWAP")
CHANNELS = {  # name -> (wires, parameter sampler)
    "AmplitudeDamping": (1, lambda r: [r.uniform(0, 0.5)]),
    "GeneralizedAmplitudeDamping": (1, lambda r: [r.uniform(0, 0.5), r.uniform(0, 1)]),
    "PhaseDamping": (1, lambda r: [r.uniform(0, 0.5)]),
    "DepolarizingChannel": (1, lambda r: [r.uniform(0, 0.5)]),
    "BitFlip": (1, lambda r: [r.uniform(0, 0.5)]),
    "PhaseFlip": (1, lambda r: [r.uniform(0, 0.5)]),
    "ResetError": (1, lambda r: [r.uniform(0, 0.3), r.uniform(0, 0.3)]),
    "ThermalRelaxationError": (1, lambda r: [r.uniform(0, 1), 100.0, r.choice([80.0, 150.0]), r.uniform(5, 30)]),
    "PauliError": (2, lambda r: [r.uniform(0, 0.5)]),
}


def random_spec(seed: int, n: int, depth: int = 10):
    """``(name, wires, params)`` triples: random gates with a random channel after every few."""
    r = np.random.default_rng(seed)
    ops = []
    for _ in range(depth):
        if r.random() < 0.5:
            name = r.choice(GATES_1)
            wires = [int(r.integers(n))]
        else:
            name = r.choice(GATES_2)
            wires = [int(w) for w in r.choice(n, 2, replace=False)]
        n_params = qml.ops.__dict__[name].num_params
        ops.append((name, wires, list(r.uniform(-np.pi, np.pi, n_params))))
        if r.random() < 0.6:
            cname = r.choice(sorted(CHANNELS))
            k, sample = CHANNELS[cname]
            ops.append((cname, [int(w) for w in r.choice(n, k, replace=False)], sample(r)))
    return ops


def apply_spec(ops, params, x=None):
    """Queue the spec with ``params[i]`` (a tensor or None) replacing op ``i``'s first parameter; ``x`` (data)
    feeds an RY embedding first."""
    if x is not None:
        for w in range(x.shape[-1]):
            qml.RY(x[..., w], wires=w)
    for i, (name, wires, ps) in enumerate(ops):
        ps = list(ps)
        if params is not None and params[i] is not None:
            ps[0] = params[i]
        if name == "PauliError":
            qml.PauliError("XY", ps[0], wires=wires)
        else:
            getattr(qml, name)(*ps, wires=wires)


def first_params(ops, dtype=torch.float64):
    """One trainable tensor per op's first parameter (gates and channels alike; None for parameter-free ops)."""
    out = []
    for name, _, ps in ops:
        out.append(torch.tensor(ps[0], dtype=dtype, requires_grad=True) if ps and name != "ThermalRelaxationError" else None)
    return out

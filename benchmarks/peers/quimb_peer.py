"""quimb: ``Circuit.local_expectation`` per measured term (reverse light cones, ``full_simplify``), gates
built from torch tensors so ``loss.backward()`` gives the gradients, one cotengra
``ReusableHyperOptimizer`` kept across terms and steps (a term's path is searched once)."""

from __future__ import annotations

import cotengra as ctg
import numpy as np
import quimb.tensor as qtn
import torch

from ..workloads import Workload, qaoa_edges

SIMPLIFY = "ADCR"
"""quimb's default "ADCRS" ends with split-simplify, an SVD whose complex gradient torch rejects as
phase-ill-defined; without it the networks are the same up to that splitting."""

CTG_REPEATS = 32
"""cotengra trials per distinct simplified network (cached by the reusable optimiser after the first step)."""

_C = torch.complex128
_H = torch.tensor([[1, 1], [1, -1]], dtype=_C) / np.sqrt(2)
_Z = torch.tensor([[1, 0], [0, -1]], dtype=_C)
_ZZ = torch.kron(_Z, _Z)
_CNOT = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=_C)
_ZZ_SIGNS = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)


def _rx(theta):
    c, s = torch.cos(theta / 2).to(_C), torch.sin(theta / 2).to(_C)
    return torch.stack([torch.stack([c, -1j * s]), torch.stack([-1j * s, c])])


def _ry(theta):
    c, s = torch.cos(theta / 2).to(_C), torch.sin(theta / 2).to(_C)
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


def _qaoa(n: int, edges, gamma, beta) -> qtn.Circuit:
    circ = qtn.Circuit(n)
    for i in range(n):
        circ.apply_gate_raw(_H, (i,))
    for layer in range(gamma.shape[0]):
        zz = torch.diag(torch.exp(-1j * gamma[layer] * _ZZ_SIGNS))  # IsingZZ(2 gamma)
        for u, v in edges:
            circ.apply_gate_raw(zz, (u, v))
        rx = _rx(2 * beta[layer])
        for i in range(n):
            circ.apply_gate_raw(rx, (i,))
    return circ


def _hea(n: int, layers: int, theta) -> qtn.Circuit:
    circ = qtn.Circuit(n)
    for layer in range(layers):
        for i in range(n):
            circ.apply_gate_raw(_ry(theta[layer, i]), (i,))
        for start in (0, 1):
            for i in range(start, n - 1, 2):
                circ.apply_gate_raw(_CNOT, (i, i + 1))
    return circ


def build(system: str, wl: Workload, data):
    if wl.kind == "sel":
        raise NotImplementedError(f"{system} runs the structured workloads (G16, Q100pP, HEA50)")
    opt = ctg.ReusableHyperOptimizer(methods=["greedy"], max_repeats=CTG_REPEATS, parallel=False, progbar=False)
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in data.values()]
    if wl.kind == "qaoa":
        edges = qaoa_edges(wl)
        terms = [(_ZZ, e) for e in edges]
        make = lambda: _qaoa(wl.n_qubits, edges, *params)  # noqa: E731
    else:
        terms = [(_Z, (i,)) for i in range(wl.n_qubits)]
        make = lambda: _hea(wl.n_qubits, wl.layers, *params)  # noqa: E731

    def step():
        circ = make()
        loss = sum(circ.local_expectation(g, where, optimize=opt, simplify_sequence=SIMPLIFY).real for g, where in terms)
        loss.backward()
        grads = tuple(p.grad.numpy().copy() for p in params)
        for p in params:
            p.grad = None
        return float(loss.detach()), grads

    return step

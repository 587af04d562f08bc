"""Shared set-up of the JAX-based peers: float64 on, numpy results out."""

from __future__ import annotations

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

STATE_VECTOR_MAX_WIRES = 20
"""The JAX state-vector peers refuse wider workloads (a 2^n complex128 state and its cotangents)."""


def require_state_vector(system: str, wl) -> None:
    if wl.n_qubits > STATE_VECTOR_MAX_WIRES:
        raise NotImplementedError(f"{system} is a state vector: {wl.n_qubits} qubits do not fit")


def numpy_step(fn, args):
    """``step()`` calling the compiled ``fn(*args) -> (value, grads)``; the numpy conversion waits for the result."""

    def step():
        value, grads = fn(*args)
        grads = grads if isinstance(grads, (tuple, list)) else (grads,)
        return float(value), tuple(np.asarray(g) for g in grads)

    return step

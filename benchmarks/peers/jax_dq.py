"""PennyLane default.qubit with ``interface="jax"``, backprop; ``value_and_grad`` under ``jax.jit``, the batch
by ``jax.vmap`` (what a PennyLane user who wants speed writes)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pennylane as qml

from ..workloads import Workload, qaoa_edges, qaoa_function, sel_function
from ._jax import numpy_step, require_state_vector


def build(system: str, wl: Workload, data):
    require_state_vector(system, wl)
    dev = qml.device("default.qubit", wires=wl.n_qubits)
    args = [jnp.asarray(v) for v in data.values()]
    if wl.kind == "sel":
        node = qml.QNode(sel_function(wl.n_qubits), dev, interface="jax", diff_method="backprop")

        def single(x, w):
            return jnp.sum(jnp.stack(node(x, w)))

        def loss(x, w):
            return jnp.sum(jax.vmap(single, in_axes=(0, None))(x, w))

    elif wl.kind == "qaoa":
        loss = qml.QNode(qaoa_function(qaoa_edges(wl), wl.n_qubits), dev, interface="jax", diff_method="backprop")
    else:
        raise NotImplementedError(f"{system} runs W1/W2/W5 and G16")
    fn = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(args)))))
    return numpy_step(fn, args)

"""PennyLane Catalyst: ``qml.qjit`` of ``catalyst.value_and_grad`` over lightning.qubit (adjoint inside the
compiled program). The batch: ``catalyst.vmap`` of the per-sample ``value_and_grad``, weight gradients summed
(Catalyst 0.15 fails to compile a gradient taken through ``catalyst.vmap`` or ``catalyst.for_loop``:
an MLIR liveness assertion, "Use leaves the current parent region")."""

from __future__ import annotations

import catalyst
import jax.numpy as jnp
import pennylane as qml

from ..workloads import Workload, qaoa_edges, qaoa_function, sel_function
from ._jax import numpy_step, require_state_vector


def build(system: str, wl: Workload, data):
    require_state_vector(system, wl)
    dev = qml.device("lightning.qubit", wires=wl.n_qubits)
    args = [jnp.asarray(v) for v in data.values()]
    if wl.kind == "sel":
        node = qml.QNode(sel_function(wl.n_qubits), dev, diff_method="adjoint")

        def single(x, w):
            return jnp.sum(jnp.stack(node(x, w)))

        per_sample = catalyst.value_and_grad(single, argnums=(0, 1))

        @qml.qjit
        def batched(x, w):
            v, (gx, gw) = catalyst.vmap(per_sample, in_axes=(0, None))(x, w)
            return jnp.sum(v), (gx, jnp.sum(gw, axis=0))

        return numpy_step(batched, args)
    elif wl.kind == "qaoa":
        loss = qml.QNode(qaoa_function(qaoa_edges(wl), wl.n_qubits), dev, diff_method="adjoint")
    else:
        raise NotImplementedError(f"{system} runs W1/W2/W5 and G16")
    fn = qml.qjit(catalyst.value_and_grad(loss, argnums=tuple(range(len(args)))))
    return numpy_step(fn, args)

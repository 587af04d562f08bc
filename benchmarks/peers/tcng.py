"""TensorCircuit-NG on its jax backend with the cotengra contractor: the step under ``jit`` (``vmap`` over
the batch), each <Z...> an ``expectation_ps`` as its documentation writes it. The contractor is a cotengra
``ReusableHyperOptimizer`` (TensorCircuit's documented "custom" set-up): ``set_contractor("cotengra")``
alone searches a fresh path with a progress bar for every expectation and took 136 s to compile W1 here."""

from __future__ import annotations

import cotengra as ctg
import jax
import jax.numpy as jnp
import tensorcircuit as tc

from ..workloads import Workload, qaoa_edges
from ._jax import numpy_step

K = tc.set_backend("jax")
tc.set_dtype("complex128")
CTG_REPEATS = 32
"""cotengra trials per distinct network (paths are cached by the reusable optimiser, so repeats cost
compile time only)."""

tc.set_contractor(
    "custom",
    optimizer=ctg.ReusableHyperOptimizer(
        methods=["greedy"], max_repeats=CTG_REPEATS, minimize="flops", parallel=False, progbar=False
    ),
    preprocessing=True,
)


def _sel_loss(n: int, layers: int):
    def single(x, w):
        c = tc.Circuit(n)
        for i in range(n):
            c.ry(i, theta=x[i])
        for layer in range(layers):
            for i in range(n):
                c.rz(i, theta=w[layer, i, 0])
                c.ry(i, theta=w[layer, i, 1])
                c.rz(i, theta=w[layer, i, 2])
            r = layer % (n - 1) + 1
            for i in range(n):
                c.cnot(i, (i + r) % n)
        return sum(jnp.real(c.expectation_ps(z=[i])) for i in range(n))

    def loss(x, w):
        return jnp.sum(jax.vmap(single, in_axes=(0, None))(x, w))

    return loss


def _qaoa_loss(n: int, edges):
    def loss(gamma, beta):
        c = tc.Circuit(n)
        for i in range(n):
            c.h(i)
        for layer in range(gamma.shape[0]):
            for u, v in edges:
                c.rzz(u, v, theta=2 * gamma[layer])
            for i in range(n):
                c.rx(i, theta=2 * beta[layer])
        return sum(jnp.real(c.expectation_ps(z=[u, v])) for u, v in edges)

    return loss


def _hea_loss(n: int, layers: int):
    def loss(theta):
        c = tc.Circuit(n)
        for layer in range(layers):
            for i in range(n):
                c.ry(i, theta=theta[layer, i])
            for start in (0, 1):
                for i in range(start, n - 1, 2):
                    c.cnot(i, i + 1)
        return sum(jnp.real(c.expectation_ps(z=[i])) for i in range(n))

    return loss


def build(system: str, wl: Workload, data):
    if wl.kind == "sel":
        loss = _sel_loss(wl.n_qubits, wl.layers)
    elif wl.kind == "qaoa":
        loss = _qaoa_loss(wl.n_qubits, qaoa_edges(wl))
    else:
        loss = _hea_loss(wl.n_qubits, wl.layers)
    args = [jnp.asarray(v) for v in data.values()]
    return numpy_step(jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(args))))), args)

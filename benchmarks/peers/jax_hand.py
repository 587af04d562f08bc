"""A hand-written state vector in ``jax.numpy`` under ``jax.jit`` (``jax.vmap`` over the batch): the lower
bound of what XLA makes of these circuits without a framework. The QAOA cost layer is one element-wise
phase (the cost's diagonal), as a hand-coder would write it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..workloads import Workload, qaoa_edges
from ._jax import numpy_step, require_state_vector


def _apply(psi, u, wire):
    return jnp.moveaxis(jnp.tensordot(u, psi, axes=((1,), (wire,))), 0, wire)


def _cnot(psi, c, t):
    idx = [slice(None)] * psi.ndim
    idx[c] = 1
    idx = tuple(idx)
    return psi.at[idx].set(jnp.flip(psi[idx], axis=t if t < c else t - 1))


def _ry(a):
    c, s = jnp.cos(a / 2), jnp.sin(a / 2)
    return jnp.array([[c, -s], [s, c]], dtype=jnp.complex128)


def _rot(phi, theta, omega):
    c, s = jnp.cos(theta / 2), jnp.sin(theta / 2)
    p, m = jnp.exp(-0.5j * (phi + omega)), jnp.exp(0.5j * (phi - omega))
    return jnp.array([[p * c, -m * s], [jnp.conj(m) * s, jnp.conj(p) * c]])


def _z_signs(n: int) -> list[np.ndarray]:
    """z[i]: +1/-1 of wire i, broadcastable over the (2,)*n state (wire 0 = axis 0, PennyLane's order)."""
    out = []
    for i in range(n):
        shape = [1] * n
        shape[i] = 2
        out.append(np.array([1.0, -1.0]).reshape(shape))
    return out


def _sel_loss(n: int, layers: int):
    z_sum = sum(_z_signs(n))

    def single(x, w):
        psi = jnp.zeros((2,) * n, dtype=jnp.complex128).at[(0,) * n].set(1.0)
        for i in range(n):
            psi = _apply(psi, _ry(x[i]), i)
        for layer in range(layers):
            for i in range(n):
                psi = _apply(psi, _rot(w[layer, i, 0], w[layer, i, 1], w[layer, i, 2]), i)
            r = layer % (n - 1) + 1
            for i in range(n):
                psi = _cnot(psi, i, (i + r) % n)
        return jnp.sum(jnp.abs(psi) ** 2 * z_sum)

    def loss(x, w):
        return jnp.sum(jax.vmap(single, in_axes=(0, None))(x, w))

    return loss


def _qaoa_loss(n: int, edges):
    z = _z_signs(n)
    cost = jnp.asarray(sum(z[u] * z[v] for u, v in edges) + np.zeros((2,) * n))

    def loss(gamma, beta):
        psi = jnp.full((2,) * n, 2 ** (-n / 2), dtype=jnp.complex128)
        for layer in range(gamma.shape[0]):
            psi = psi * jnp.exp(-1j * gamma[layer] * cost)
            c, s = jnp.cos(beta[layer]), jnp.sin(beta[layer])
            rx = jnp.array([[c, -1j * s], [-1j * s, c]])
            for i in range(n):
                psi = _apply(psi, rx, i)
        return jnp.sum(jnp.abs(psi) ** 2 * cost)

    return loss


def build(system: str, wl: Workload, data):
    require_state_vector(system, wl)
    if wl.kind == "sel":
        loss = _sel_loss(wl.n_qubits, wl.layers)
    elif wl.kind == "qaoa":
        loss = _qaoa_loss(wl.n_qubits, qaoa_edges(wl))
    else:
        raise NotImplementedError(f"{system} runs W1/W2/W5 and G16")
    args = [jnp.asarray(v) for v in data.values()]
    return numpy_step(jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(args))))), args)

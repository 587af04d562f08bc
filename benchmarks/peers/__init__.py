"""qhybrid and its peers behind one interface: ``build(workload, data) -> step``, ``step() -> (loss, grads)``.

``loss`` is a float and ``grads`` a tuple of numpy arrays in the order of ``GRAD_NAMES[workload.kind]``:
W1/W2/W5 (``sel``): d loss / d x, d loss / d w with loss = the sum of every <Z_i> over the batch;
QAOA (G16, Q100pP): d <C> / d gamma, d <C> / d beta; HEA50: d (sum_i <Z_i>) / d theta. Every system gets the
same inputs (``inputs``) so the runner can check each row against qhybrid's numbers.

Each system lives in its own module, imported only when asked for, so a missing peer package is an
``ImportError`` the runner reports as "not installed" instead of a crash.
"""

from __future__ import annotations

import importlib
from typing import Callable

import numpy as np

from ..workloads import Workload

GRAD_NAMES = {"sel": ("x", "w"), "qaoa": ("gamma", "beta"), "hea": ("theta",)}

DATA_SEED = 7

# system -> (module in this package, what the row is)
SYSTEMS: dict[str, tuple[str, str]] = {
    "qhybrid": ("torch_rows", "qhybrid.qnode on qhybrid.device('tensornet'), adjoint"),
    "qhybrid static": ("torch_rows", "the same qnode with static_structure=True (traced once per call signature)"),
    "qhybrid GraphQLayer": ("torch_rows", "qhybrid.GraphQLayer(output='cost'), adjoint"),
    "dq torch": ("torch_rows", "PennyLane default.qubit, torch, backprop"),
    "lightning adjoint": ("torch_rows", "PennyLane lightning.qubit, torch, adjoint"),
    "dq jax.jit": ("jax_dq", "PennyLane default.qubit, jax, backprop, value_and_grad under jax.jit (+ jax.vmap)"),
    "hand jax.jit": ("jax_hand", "hand-written state vector in jax.numpy under jax.jit (+ jax.vmap)"),
    "TC-NG": ("tcng", "TensorCircuit-NG, jax backend, cotengra contractor, jit (+ vmap)"),
    "Catalyst": ("catalyst_peer", "PennyLane Catalyst qml.qjit over lightning.qubit, catalyst.value_and_grad"),
    "quimb torch": ("quimb_peer", "quimb Circuit.local_expectation, torch arrays, one reused cotengra optimiser"),
}

Step = Callable[[], tuple[float, tuple[np.ndarray, ...]]]


def inputs(wl: Workload) -> dict[str, np.ndarray]:
    """The workload's float64 inputs, the same for every system."""
    rng = np.random.default_rng(DATA_SEED)
    if wl.kind == "sel":
        return {"x": rng.random((wl.batch, wl.n_qubits)) * 3, "w": rng.random((wl.layers, wl.n_qubits, 3)) * 3}
    if wl.kind == "qaoa":
        return {"gamma": rng.random(wl.layers) * 0.8, "beta": rng.random(wl.layers) * 0.8}
    if wl.kind == "hea":
        return {"theta": rng.random((wl.layers, wl.n_qubits)) * 3}
    raise ValueError(f"workload {wl.id} ({wl.kind}) has no peer inputs")


def build(system: str, wl: Workload, data: dict[str, np.ndarray]) -> Step:
    """The step of ``system`` on ``wl``. ImportError: the peer is not installed; NotImplementedError: the
    peer does not run this workload (the message says why)."""
    if system not in SYSTEMS:
        raise KeyError(f"unknown system {system!r}; choose from {sorted(SYSTEMS)}")
    module = importlib.import_module(f".{SYSTEMS[system][0]}", __name__)
    return module.build(system, wl, data)


def available(system: str) -> str | None:
    """None when ``system`` can be imported, else the reason it cannot (e.g. the missing module)."""
    try:
        importlib.import_module(f".{SYSTEMS[system][0]}", __name__)
    except ImportError as exc:
        return f"not installed ({exc})"
    return None

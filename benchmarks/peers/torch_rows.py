"""Torch rows: qhybrid (plain ``qhybrid.qnode``; ``GraphQLayer`` for QAOA) and PennyLane's torch peers."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

import qhybrid

from ..workloads import Workload, hea_function, qaoa_edges, qaoa_function, sel_function

_PEER_DEVICES = {"dq torch": ("default.qubit", "backprop"), "lightning adjoint": ("lightning.qubit", "adjoint")}


def _circuit(wl: Workload):
    if wl.kind == "sel":
        return sel_function(wl.n_qubits)
    if wl.kind == "qaoa":
        return qaoa_function(qaoa_edges(wl), wl.n_qubits)
    return hea_function(wl.n_qubits, wl.layers)


def _loss(out) -> torch.Tensor:
    return torch.stack(list(out)).sum() if isinstance(out, (list, tuple)) else out


def _graph_layer(wl: Workload, params: list[torch.Tensor]):
    if wl.kind != "qaoa":
        raise NotImplementedError("GraphQLayer runs the QAOA workloads only")
    dev = qhybrid.device("tensornet", wires=wl.n_qubits)
    layer = qhybrid.GraphQLayer(qaoa_edges(wl), wl.layers, output="cost", device=dev, diff_method="adjoint").double()
    with torch.no_grad():
        layer.gamma.copy_(params[0])
        layer.beta.copy_(params[1])

    def step():
        cost = layer()
        cost.backward()
        grads = (layer.gamma.grad.numpy().copy(), layer.beta.grad.numpy().copy())
        layer.zero_grad()
        return float(cost.detach()), grads

    return step


def build(system: str, wl: Workload, data: dict[str, np.ndarray]):
    params = [torch.tensor(v, dtype=torch.float64) for v in data.values()]
    if system == "qhybrid GraphQLayer":
        return _graph_layer(wl, params)
    for p in params:
        p.requires_grad_(True)
    if system in ("qhybrid", "qhybrid static"):
        node = qhybrid.qnode(
            qhybrid.device("tensornet", wires=wl.n_qubits),
            diff_method="adjoint",
            static_structure=system == "qhybrid static",  # the jax.jit contract: trace once per signature
        )(_circuit(wl))
    else:
        if wl.n_qubits > 20:
            raise NotImplementedError(f"{system} is a state vector: {wl.n_qubits} qubits do not fit")
        name, diff = _PEER_DEVICES[system]
        node = qml.QNode(_circuit(wl), qml.device(name, wires=wl.n_qubits), interface="torch", diff_method=diff)

    def step():
        loss = _loss(node(*params))
        loss.backward()
        grads = tuple(p.grad.numpy().copy() for p in params)
        for p in params:
            p.grad = None
        return float(loss.detach()), grads

    if system != "lightning adjoint":
        return step

    def float64_step():
        # PennyLane 0.45's torch wrapping of lightning's results follows torch's default dtype: float32
        # values (errors ~1e-8) unless it is float64 for the call.
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return step()
        finally:
            torch.set_default_dtype(old)

    return float64_step

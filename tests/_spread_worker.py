"""Wide circuits run by one rank of a gloo group for tests/devices/tensornet/test_spread_classes.py.

``python tests/_spread_worker.py RANK WORLD STORE OUT`` joins a gloo group through the file store ``STORE``,
runs every case of ``CASES`` on a tensornet device with ``spread_classes=True`` and saves, to
``OUT/rank{RANK}.pt``, each case's values, gradients and the class programs this rank executed (or the
error it raised). The test runs the same cases in one process (``run_cases(spread=False)``) to compare.
"""

from __future__ import annotations


import networkx as nx
import pennylane as qml
import torch

N_WIRES = 24
"""Wide enough (> 20) that the device measures by light cones."""

BATCH = 3


def qaoa_edges():
    return [(int(u), int(v)) for u, v in nx.random_regular_graph(3, N_WIRES, seed=3).edges()]


def hamiltonian():
    edges = qaoa_edges()
    coeffs = [0.5 + 0.1 * k for k in range(len(edges))] + [0.3, -0.7]
    ops = [qml.Z(u) @ qml.Z(v) for u, v in edges] + [qml.X(0), qml.Y(5) @ qml.Z(6)]
    return qml.Hamiltonian(coeffs, ops)


def qaoa_blocks(gamma, beta):
    """The QAOA circuit as blocks of commuting gates (the light-cone reference's input)."""
    edges = qaoa_edges()
    blocks = [[qml.Hadamard(i) for i in range(N_WIRES)]]
    for layer in range(len(gamma)):
        blocks.append([qml.IsingZZ(2 * gamma[layer], wires=e) for e in edges])
        blocks.append([qml.RX(2 * beta[layer], wires=i) for i in range(N_WIRES)])
    return blocks


def hea_blocks(theta, x=None):
    """RX(x) encoding (batched when ``x`` is ``[B, n]``), then per layer RY(theta) and a CNOT brickwork."""
    blocks = [] if x is None else [[qml.RX(x[..., i], wires=i) for i in range(N_WIRES)]]
    for layer in range(theta.shape[0]):
        blocks.append([qml.RY(theta[layer, i], wires=i) for i in range(N_WIRES)])
        for start in (0, 1):
            blocks.append([qml.CNOT(wires=[i, i + 1]) for i in range(start, N_WIRES - 1, 2)])
    return blocks


HEA_OBSERVABLES = [qml.Z(0), qml.Z(7), qml.X(12) @ qml.Z(13), qml.Y(N_WIRES - 1)]


def inputs():
    """Fresh trainable inputs of every case (the same numbers on every rank)."""
    gen = torch.Generator().manual_seed(11)
    real = lambda *shape: torch.rand(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    return {
        "gamma": real(1) * 0.8,
        "beta": real(1) * 0.8,
        "theta": real(2, N_WIRES) * 3,
        "x": real(BATCH, N_WIRES) * 3,
    }


def _circuits(dev, qnode):
    def qaoa(gamma, beta):
        qaoa_blocks(gamma, beta)  # the gates queue themselves
        return qml.expval(hamiltonian())

    def hea(theta, x=None):
        hea_blocks(theta, x)
        return [qml.expval(o) for o in HEA_OBSERVABLES]

    plain = lambda f: qml.QNode(f, dev, interface="torch", diff_method="adjoint", device_vjp=True)  # noqa: E731
    return {
        "qaoa_adjoint": (qnode(dev, diff_method="adjoint")(qaoa), ("gamma", "beta")),
        "qaoa_shift": (qnode(dev, diff_method="parameter-shift")(qaoa), ("gamma", "beta")),
        "qaoa_pennylane": (plain(qaoa), ("gamma", "beta")),  # device VJPs through PennyLane's torch interface
        "hea_backprop": (qnode(dev, diff_method="backprop")(hea), ("theta",)),
        "hea_batched": (qnode(dev, diff_method="adjoint")(hea), ("theta", "x")),
        "hea_jacobian": (qnode(dev, diff_method="adjoint")(hea), ("theta",)),
    }


CASES = ("qaoa_adjoint", "qaoa_shift", "qaoa_pennylane", "hea_backprop", "hea_batched", "hea_jacobian")


def _loss(out):
    """A fixed, non-uniform weighting of every output (a cotangent that is not all ones)."""
    flat = torch.cat([o.reshape(-1) for o in (out if isinstance(out, (list, tuple)) else [out])])
    return (flat * torch.linspace(0.5, 1.5, flat.numel(), dtype=flat.dtype)).sum(), flat


def executions(dev) -> int:
    """Class programs the device's cone programs have run."""
    from qhybrid.devices.tensornet.engines.lightcone.program import ConeProgram

    return sum(p.executions for p in dev._cache._programs.values() if isinstance(p, ConeProgram))


def run_cases(spread: bool) -> dict:
    """Per case: outputs, gradients of the weighted loss, and class executions on this process."""
    import qhybrid

    out = {}
    for name in CASES:
        dev = qhybrid.device("tensornet", wires=N_WIRES, spread_classes=spread)
        circuit, names = _circuits(dev, qhybrid.qnode)[name]
        args = {k: v.requires_grad_() for k, v in inputs().items() if k in names}
        if name == "hea_jacobian":  # one backward per output through the same forward (retain_graph)
            (theta,) = args.values()
            flat = torch.stack(circuit(theta)).detach()
            grads = [torch.autograd.functional.jacobian(lambda t: torch.stack(circuit(t)), theta)]
            out[name] = {"values": flat, "grads": grads, "executions": executions(dev)}
            continue
        loss, flat = _loss(circuit(**args))
        grads = torch.autograd.grad(loss, list(args.values()))
        out[name] = {"values": flat.detach(), "grads": [g.detach() for g in grads], "executions": executions(dev)}
    return out


def run_refusals(rank: int) -> dict:
    """Errors the spread must raise alike on every rank (never hang): ranks with other parameters, and a
    second derivative."""
    import qhybrid

    out = {}
    dev = qhybrid.device("tensornet", wires=N_WIRES, spread_classes=True)
    circuit, _ = _circuits(dev, qhybrid.qnode)["qaoa_adjoint"]
    try:
        circuit(torch.tensor([0.1 + rank], dtype=torch.float64), torch.tensor([0.2], dtype=torch.float64))
        out["mismatch"] = None
    except Exception as e:  # noqa: BLE001 - the test checks the type and message
        out["mismatch"] = (type(e).__name__, str(e))
    args = {k: v.requires_grad_() for k, v in inputs().items() if k in ("gamma", "beta")}
    try:
        value = circuit(**args)
        (g,) = torch.autograd.grad(value, [args["gamma"]], create_graph=True)
        torch.autograd.grad(g.sum(), [args["gamma"]])
        out["hessian"] = None
    except Exception as e:  # noqa: BLE001
        out["hessian"] = (type(e).__name__, str(e))
    return out


def _work(rank: int) -> dict:
    return {"cases": run_cases(spread=True), "refusals": run_refusals(rank)}


if __name__ == "__main__":
    from _gloo_ranks import serve

    serve(_work)

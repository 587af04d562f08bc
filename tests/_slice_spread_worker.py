"""Sliced contractions run by one rank of a gloo group for tests/devices/tensornet/test_slice_spread.py.

``python tests/_slice_spread_worker.py RANK WORLD STORE OUT`` joins a gloo group through the file store
``STORE``, runs every case of ``CASES`` on a tensornet device with ``spread_slices=True`` (circuits whose
closed networks must slice to fit ``MAX_MEMORY``) and the hand-made sliced plans of ``PLANS``, and saves
to ``OUT/rank{RANK}.pt`` each case's values, gradients and the slices this rank contracted (or the error
it raised). The test runs the same cases in one process (``run_cases(spread=False)``) to compare.
"""

from __future__ import annotations

import contextlib
import time

import pennylane as qml
import torch

N_WIRES = 6
LAYERS = 2
BATCH = 3
MAX_MEMORY = 256
"""Bytes: 16 complex128 elements, a two-qubit gate's tensor; these circuits' closed networks slice to fit
(batched ones within ``BATCH`` times this)."""


@contextlib.contextmanager
def forced_slicing():
    """Closed networks for every light cone (no state vectors), sliced at once (no rescue search)."""
    from qhybrid.devices.tensornet import _simulate
    from qhybrid.devices.tensornet.engines.lightcone import program
    from qhybrid.devices.tensornet.engines.network import pathfind, slicing

    saved = [
        (_simulate, "STATE_MODE_MAX_WIRES", 0),
        (program, "CONE_STATE_MAX_WIRES", 0),
        (pathfind, "RESCUE_TIME_S", 0.05),
        (slicing, "SLICE_RECONF_MIN_SLICES", 1 << 30),
    ]
    old = [getattr(m, name) for m, name, _ in saved]
    for m, name, value in saved:
        setattr(m, name, value)
    try:
        yield
    finally:
        for (m, name, _), value in zip(saved, old):
            setattr(m, name, value)


@contextlib.contextmanager
def counted_slices():
    """``[run, of]``: the slices of spread forward contractions run here (``contract_slices`` given a share,
    not recording: the backward recomputes its slices one by one, recording) and the slices those
    contractions have."""
    from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan

    count = [0, 0]
    plain = ContractionPlan.contract_slices

    def counting(self, operands, run, share=None):
        if share is not None and not torch.is_grad_enabled():
            count[0] += len(share)
            count[1] += self.slices
        return plain(self, operands, run, share)

    ContractionPlan.contract_slices = counting
    try:
        yield count
    finally:
        ContractionPlan.contract_slices = plain


def blocks(theta, x=None):
    """RX(x) encoding (batched when ``x`` is ``[B, n]``), then per layer RY(theta) and a CNOT chain."""
    if x is not None:
        for i in range(N_WIRES):
            qml.RX(x[..., i], wires=i)
    for layer in range(theta.shape[0]):
        for i in range(N_WIRES):
            qml.RY(theta[layer, i], wires=i)
        for i in range(N_WIRES - 1):
            qml.CNOT(wires=[i, i + 1])


OBSERVABLES = [qml.Z(0) @ qml.Z(N_WIRES - 1), qml.X(2)]


def inputs():
    """Fresh trainable inputs of every case (the same numbers on every rank)."""
    gen = torch.Generator().manual_seed(7)
    return {
        "theta": torch.rand(LAYERS, N_WIRES, generator=gen, dtype=torch.float64) * 3,
        "x": torch.rand(BATCH, N_WIRES, generator=gen, dtype=torch.float64) * 3,
    }


def circuit(dev, diff_method):
    def f(theta, x=None):
        blocks(theta, x)
        return [qml.expval(o) for o in OBSERVABLES]

    if dev.name == "default.qubit":
        return qml.QNode(f, dev, interface="torch", diff_method=diff_method)
    import qhybrid

    return qhybrid.qnode(dev, diff_method=diff_method)(f)


CASES = {
    "backprop": ("backprop", ("theta",)),
    "adjoint": ("adjoint", ("theta",)),
    "batched": ("adjoint", ("theta", "x")),
    "jacobian": ("adjoint", ("theta",)),
}
"""name: (diff_method, the inputs it takes)."""


def max_memory(name: str) -> int:
    return MAX_MEMORY * (BATCH if "x" in CASES[name][1] else 1)


def _loss(out):
    """A fixed, non-uniform weighting of every output (a cotangent that is not all ones)."""
    flat = torch.cat([o.reshape(-1) for o in out])
    return (flat * torch.linspace(0.5, 1.5, flat.numel(), dtype=flat.dtype)).sum(), flat


def run_case(dev, name, diff_method: str | None = None) -> dict:
    """Case ``name`` on ``dev`` (with its own diff_method, or ``diff_method``)."""
    own, names = CASES[name]
    f = circuit(dev, diff_method or own)
    args = {k: v.requires_grad_() for k, v in inputs().items() if k in names}
    if name == "jacobian":  # one backward per output through the same forward (retain_graph)
        (theta,) = args.values()
        values = torch.stack(f(theta)).detach()
        return {"values": values, "grads": [torch.autograd.functional.jacobian(lambda t: torch.stack(f(t)), theta)]}
    loss, flat = _loss(f(**args))
    grads = torch.autograd.grad(loss, list(args.values()))
    return {"values": flat.detach(), "grads": [g.detach() for g in grads]}


def run_cases(spread: bool) -> dict:
    """Per case: outputs, gradients of the weighted loss, and the slices this process contracted."""
    import qhybrid

    out = {}
    with forced_slicing():
        for name in CASES:
            dev = qhybrid.device(
                "tensornet", wires=N_WIRES, max_memory=max_memory(name), path_cache=False, spread_slices=spread
            )
            with counted_slices() as count:
                out[name] = run_case(dev, name)
            out[name]["slices"] = count
    return out


def plans():
    """Hand-made sliced plans: a triangle A[a,b] B[b,c] C[c,a] -> [a] sliced over ``b`` of extent 3 (an uneven
    share over two ranks) and over an index of extent 1 (fewer slices than ranks)."""
    from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan
    from qhybrid.devices.tensornet.engines.network.problem import Found

    inner = ((0, 1), (0, 1))
    out = {}
    for name, b in (("three_slices", 3), ("one_slice", 1)):
        sizes = {0: 2, 1: b, 2: 4}
        found = Found(inner, 0, 8, sliced=(1,))
        out[name] = ContractionPlan([(0, 1), (1, 2), (2, 0)], (0,), sizes, found=found)
    return out


def plan_operands(plan):
    gen = torch.Generator().manual_seed(5)
    sizes = {i: plan._sizes[i] for i in plan._sizes}
    return [
        torch.randn([sizes[i] for i in ix], dtype=torch.complex128, generator=gen).requires_grad_()
        for ix in plan.inputs
    ]


def run_plans(spread: bool) -> dict:
    """Per hand-made plan: its contraction, the operands' gradients of a weighted loss, the slices run here."""
    from qhybrid.devices.tensornet.backends import get_backend
    from qhybrid.devices.tensornet.engines.network.slice_spread import contract_spread

    out = {}
    for name, plan in plans().items():
        ops = plan_operands(plan)
        with counted_slices() as count:
            value = contract_spread(spread, plan, ops, get_backend("torch", "cpu"))
            weight = torch.linspace(0.5, 1.5, value.numel(), dtype=torch.float64).reshape(value.shape)
            grads = torch.autograd.grad((value * weight).sum().real, ops)
        out[name] = {"values": value.detach(), "grads": [g.detach() for g in grads], "slices": count}
    return out


def run_refusals(rank: int) -> dict:
    """Errors the spread must raise alike on every rank (never hang): ranks with other parameters, and a
    second derivative."""
    import qhybrid

    out = {}
    with forced_slicing():
        dev = qhybrid.device("tensornet", wires=N_WIRES, max_memory=MAX_MEMORY, path_cache=False, spread_slices=True)
        f = circuit(dev, "backprop")
        theta = inputs()["theta"]
        try:
            f(theta + rank)
            out["mismatch"] = None
        except Exception as e:  # noqa: BLE001 - the test checks the type and message
            out["mismatch"] = (type(e).__name__, str(e))
        theta.requires_grad_()
        try:
            value = f(theta)[0]
            (g,) = torch.autograd.grad(value, [theta], create_graph=True)
            torch.autograd.grad(g.sum(), [theta])
            out["hessian"] = None
        except Exception as e:  # noqa: BLE001
            out["hessian"] = (type(e).__name__, str(e))
    return out


def _work(rank: int) -> dict:
    started = time.perf_counter()
    result = {"cases": run_cases(spread=True), "plans": run_plans(spread=True), "refusals": run_refusals(rank)}
    print(f"rank {rank}: {time.perf_counter() - started:.1f} s", flush=True)
    return result


if __name__ == "__main__":
    from _gloo_ranks import serve

    serve(_work)

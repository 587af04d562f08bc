"""torch.compile (inductor) of a planned step, against the same step run eagerly (issue 39, item 3).

The step compiled is W1's bound state-vector program after its gate matrices are built: the planned run
(`statevector/planned.py`: one `mm` / `bmm` / `index_select` with `out=` per action into one workspace), the
Z-word readout, its cotangent and the adjoint walk back to the gate matrices' cotangents: the arithmetic of a
value + gradient step without PennyLane's recording or the gate builders. Both columns run the same Python in
one process, alternating; values and gradients must agree to 1e-12.

Dynamo does not trace two of qhybrid's caches (`WeakIdKeyDictionary` lookups of plan-time constants, which
it skips by design), so the trial reads those constants from plain dicts filled before tracing; nothing else
changes.

    python -m benchmarks.compiled_step                      # batches 32 and 128, one thread
    python -m benchmarks.compiled_step --batches 128 --repeats 40
    python -m benchmarks.compiled_step --device cuda --out $OUT/compiled_step_gpu.json   # the GPU row
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

import pennylane as qml
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.statevector import adjoint as bound_node
from qhybrid.devices.tensornet.engines.statevector import planned, product_stacked, zwords

from .workloads import sel_function

RESULTS = Path(__file__).parent / "results" / "compiled_step.json"


def _bound_program(n: int, layers: int, batch: int, device: str = "cpu"):
    """W1's bound program and the inputs its node received, caught from one qnode call."""
    caught: dict = {}
    forward = bound_node.BoundNode._forward

    def spy(ctx, bound, fallback, dtype, device, inputs):
        caught.update(bound=bound, dtype=dtype, device=device, inputs=[t.detach() for t in inputs])
        return forward(ctx, bound, fallback, dtype, device, inputs)

    bound_node.BoundNode._forward = staticmethod(spy)
    try:
        node = qhybrid.qnode(qhybrid.device("tensornet", wires=n), diff_method="adjoint")(sel_function(n))
        gen = torch.Generator().manual_seed(3)
        x = torch.rand(batch, n, generator=gen, dtype=torch.float64).to(device).requires_grad_()
        w = torch.rand(layers, n, 3, generator=gen, dtype=torch.float64).to(device).requires_grad_()
        torch.stack(list(node(x, w))).sum().backward()
    finally:
        bound_node.BoundNode._forward = staticmethod(forward)
    return caught


@contextlib.contextmanager
def _traceable_constants(actions, dtype):
    """Plan-time constants that qhybrid caches by tensor identity, read from plain dicts while the trial runs (see
    the module); qhybrid's own lookups are put back after it."""
    phases = [a.info[1] for a in actions[1:] if a.kind == "monomial" and a.info[1] is not None]
    columns = {id(p): p.to(dtype)[:, None] for p in phases}
    column, cached = planned._column, product_stacked.on_device
    copies: dict = {}

    def on_device(table, device, dtype=None):
        key = (id(table), str(device), dtype)
        if key not in copies:
            copies[key] = cached(table, device, dtype)
        return copies[key]

    planned._column = lambda phase, _dtype: columns[id(phase)]
    product_stacked.on_device = on_device
    try:
        yield
    finally:
        planned._column, product_stacked.on_device = column, cached


def step_core(batch: int, n: int = 8, layers: int = 4, device: str = "cpu"):
    """(core, its tensors, its actions, dtype): the planned run, readout and adjoint walk of W1 at ``batch`` as one
    function of the gate tensors, returning the expectation values and the tensors' cotangents."""
    caught = _bound_program(n, layers, batch, device)
    bound, dtype, device = caught["bound"], caught["dtype"], caught["device"]
    actions, tensors, record = bound.tensors(caught["inputs"], dtype, device, derivatives=True)
    if not (bound.signs is not None and planned.eligible(actions, bound.n, batch, tensors[0].element_size(), 1 << 40)):
        raise SystemExit(f"W1 at batch {batch} does not run as a planned program")
    signs = bound.signs.to(device=tensors[0].device, dtype=dtype.to_real())
    twice = (2 * signs).T.contiguous()
    origins = record[3]
    needed = [o is not None for o in origins]
    conj = [o is not None and o[0] == "kron" for o in origins]
    cotangent = torch.ones(signs.shape[0], batch, dtype=signs.dtype, device=signs.device)

    def core(*ts):
        psi, keep = planned.run(actions, list(ts), bound.n, batch, dtype, device)
        values = zwords.z_values(signs, psi)
        h = zwords.z_cotangent(twice, cotangent, psi)
        grads = planned.adjoint(actions, list(ts), keep, h, needed, conj)
        return values, [g for g in grads if g is not None]

    return core, tensors, actions, dtype


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _median_ms(fn, args, repeats: int, device: str = "cpu") -> float:
    times = []
    for _ in range(repeats):
        _sync(device)
        t = time.perf_counter()
        fn(*args)
        _sync(device)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def measure(batch: int, repeats: int, device: str = "cpu") -> dict:
    core, tensors, actions, dtype = step_core(batch, device=device)
    core(*tensors)  # qhybrid's own caches filled
    with _traceable_constants(actions, dtype):
        core(*tensors)  # and the plain dicts that stand for them while Dynamo traces
        t = time.perf_counter()
        compiled = torch.compile(core, dynamic=False, fullgraph=True)
        got = compiled(*tensors)
        first = time.perf_counter() - t
        want = core(*tensors)
        error = max(float((a - b).abs().max()) for a, b in zip([got[0], *got[1]], [want[0], *want[1]]))
        eager, inductor = [], []
        for _ in range(3):  # alternating rounds: the host's drift hits both alike
            eager.append(_median_ms(core, tensors, repeats, device))
            inductor.append(_median_ms(compiled, tensors, repeats, device))
    row = {
        "batch": batch,
        "eager_ms": statistics.median(eager),
        "inductor_ms": statistics.median(inductor),
        "first_call_s": first,
        "max_abs_difference": error,
    }
    row["inductor_over_eager"] = row["inductor_ms"] / row["eager_ms"]
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="torch device of the step (cpu, cuda)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        row = measure(batch, args.repeats, args.device)
        if row["max_abs_difference"] > 1e-12:
            raise SystemExit(f"compiled and eager differ by {row['max_abs_difference']:.3g} at batch {batch}")
        rows.append(row)
        print(
            f"W1 core, batch {batch}: eager {row['eager_ms']:.2f} ms, inductor {row['inductor_ms']:.2f} ms "
            f"({row['inductor_over_eager']:.2f}x; first call {row['first_call_s']:.1f} s)",
            flush=True,
        )
    meta = {"threads": args.threads, "torch": torch.__version__, "pennylane": qml.__version__}
    meta["machine"] = platform.machine()
    meta["device"] = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "cpu"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

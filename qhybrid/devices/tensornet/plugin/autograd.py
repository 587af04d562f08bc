"""``diff_method="backprop"`` for autograd (``pennylane.numpy``) parameters: torch autograd underneath.

The simulation is torch code, so autograd cannot trace through it. Instead a torch function of the
parameters becomes one autograd primitive whose vector-Jacobian product is another such primitive,
built from ``torch.autograd.grad(..., create_graph=True)``: every order of derivative autograd asks
for (``qml.jacobian(qml.grad(f))``) is answered by differentiating the torch graph once more.

Outputs cross the boundary as one flat real vector (complex results as real and imaginary parts),
so autograd only ever sees real arrays, and are put back into shape with autograd's own numpy.
"""

from __future__ import annotations

from typing import Callable, Sequence

import autograd.numpy as anp
import numpy as np
import scipy.sparse
import torch
from autograd.extend import defvjp_argnums, primitive
from autograd.tracer import Box, getval

TorchFn = Callable[..., torch.Tensor]
"""Torch tensors in (one per argument), a flat real torch tensor out."""


def is_traced(value) -> bool:
    """Whether autograd is tracing ``value`` (an ``ArrayBox``)."""
    return isinstance(value, Box)


def _to_torch(value, *, requires_grad: bool = False) -> torch.Tensor:
    if _opaque(value):
        return getval(value)
    arr = np.asarray(getval(value))
    if arr.dtype.kind in "biu":
        return torch.as_tensor(arr)
    t = torch.as_tensor(arr, dtype=torch.complex128 if arr.dtype.kind == "c" else torch.float64)
    return t.requires_grad_(requires_grad)


def autograd_primitive(fn: TorchFn) -> Callable:
    """``fn`` as a function of numpy arrays that autograd can differentiate to any order."""

    @primitive
    def apply(*args):
        with torch.no_grad():
            return fn(*(_to_torch(a) for a in args)).detach().cpu().numpy()

    def vjp_maker(argnums, ans, args, kwargs):
        sizes = [0 if _opaque(a) else int(np.size(getval(a))) for a in args]
        shapes = [() if _opaque(a) else np.shape(getval(a)) for a in args]
        vjp_primitive = autograd_primitive(_vjp_function(fn, len(args)))

        def vjp(g):
            flat = vjp_primitive(g, *args)
            pieces, start = [], 0
            for a, size, shape in zip(args, sizes, shapes):
                pieces.append(None if _opaque(a) else anp.reshape(flat[start : start + size], shape))
                start += size
            return tuple(pieces[i] for i in argnums)

        return vjp

    defvjp_argnums(apply, vjp_maker)
    return apply


def _vjp_function(fn: TorchFn, n_args: int) -> TorchFn:
    """The torch function ``(g, *args) -> concat(d<g, fn(args)>/d args)``, itself differentiable."""

    def vjp(g, *args):
        with torch.enable_grad():
            # inputs already on a graph (an outer vjp differentiating this one) keep it
            leaves = [a if _opaque(a) or a.requires_grad else a.detach().requires_grad_(_differentiable(a)) for a in args]
            out = fn(*leaves)
            wrt = [x for x in leaves if not _opaque(x) and x.requires_grad]
            grads = torch.autograd.grad(out, wrt, g.to(out.dtype), create_graph=True, allow_unused=True)
        by_id = {id(x): gr for x, gr in zip(wrt, grads)}
        flat = []
        for x in leaves:
            if _opaque(x):
                continue  # (no array: nothing autograd can trace; its share of the flat cotangent is empty)
            gr = by_id.get(id(x))
            gr = torch.zeros_like(x, dtype=torch.float64) if gr is None else gr
            flat.append(gr.real.reshape(-1) if gr.is_complex() else gr.reshape(-1))
        return torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)

    return vjp


def _opaque(value) -> bool:
    """Whether a parameter crosses as it is, not as an array: a ``SparseHamiltonian``'s scipy matrix (numpy reads it
    as an object array, which torch cannot take; it holds no trainable value)."""
    return scipy.sparse.issparse(getval(value))


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def flatten_results(results: Sequence[Sequence[torch.Tensor]]) -> tuple[torch.Tensor, list]:
    """One flat real vector of every tensor, and the spec ``unflatten_results`` needs."""
    flat, spec = [], []
    for per_tape in results:
        spec.append([])
        for r in per_tape:
            complex_ = r.is_complex()
            spec[-1].append((tuple(r.shape), complex_))
            # (not ``view_as_real``: its backward views the flat cotangent's slice as complex, which fails at an odd
            # offset, a complex result after a real one of odd size)
            part = torch.stack([r.real, r.imag], -1) if complex_ else r
            flat.append(part.reshape(-1).to(torch.float64))
    return (torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)), spec


def unflatten_results(flat, spec) -> list[tuple]:
    """Autograd arrays, one tuple per tape and one array per measurement, from ``flatten_results``."""
    out, start = [], 0
    for per_tape in spec:
        items = []
        for shape, complex_ in per_tape:
            size = int(np.prod(shape, dtype=int))
            if complex_:
                pair = anp.reshape(flat[start : start + 2 * size], shape + (2,))
                items.append(pair[..., 0] + 1j * pair[..., 1])
                start += 2 * size
            else:
                items.append(anp.reshape(flat[start : start + size], shape))
                start += size
        out.append(tuple(items))
    return out


def execute_traced(run: Callable[[list[torch.Tensor]], list], params: list) -> list[tuple]:
    """``run`` (torch parameters in, per-tape tuples of torch results out) on autograd parameters.

    ``params`` is the flat list of every parameter of every tape; the results are autograd arrays
    that carry the parameters' tape, shaped as ``run``'s.
    """
    spec_box: list = []

    def flat_run(*torch_params):
        flat, spec = flatten_results(run(list(torch_params)))
        spec_box[:] = [spec]
        return flat

    flat = autograd_primitive(flat_run)(*params)
    return unflatten_results(flat, spec_box[0])

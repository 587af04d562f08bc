"""A qnode call inside ``torch.func`` transforms (``grad``, ``vjp``, ``jacrev``, ``vmap``, ``functional_call``).

The simulator's device code cannot see through functorch's wrapper tensors, so a call made while a transform is
active runs as one custom autograd Function over the call's tensor arguments (``setup_context`` style, which
``torch.func`` needs): its forward is the ordinary qhybrid call on the plain values, its backward a second
Function, ``_Vjp``, that re-runs the call on fresh leaves and asks the qnode's own gradient method (adjoint,
parameter-shift, ...) for the vector-Jacobian product. Both have a ``vmap`` rule that runs one call per batch
element: a vmapped argument cannot be handed to qhybrid's broadcasting, since the quantum function may index
its arguments (``x[0]`` would pick a sample, not a feature), so per-element calls are the only correct reading.

Second derivatives (``grad`` of ``grad``, ``jacrev`` of ``jacrev``) come from ``_Vjp``'s own backward, ``_Vjp2``:
the gradient re-run with ``create_graph=True`` and differentiated once more. Forward mode (``jvp``, ``jacfwd``,
and ``hessian`` = ``jacfwd`` of ``jacrev``; ``torch.autograd.forward_ad``'s dual tensors run through the same
Function) is reverse mode twice: ``J t`` is the derivative of ``<J^T c, t>`` in the cotangents ``c``, again ``_Vjp2``. Refused by name (a :class:`~qhybrid.errors.GradientError` with the
fix): third order and forward over forward (``jacfwd`` of ``jacfwd``); ``torch.autograd.grad`` with
``create_graph=True`` serves every order.

>>> import torch, pennylane as qml, qhybrid
>>> f = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])
>>> torch.func.grad(f)(torch.tensor(0.3, dtype=torch.float64))
tensor(-0.2955, dtype=torch.float64)
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.autograd import forward_ad as _forward_ad
from torch.utils import _pytree as pytree

from ..errors import GradientError


def transforms_active() -> bool:
    """Whether a ``torch.func`` transform wraps the current call."""
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active is not None and active())


def dual_arguments(args: tuple, kwargs: dict) -> bool:
    """Whether some tensor among ``args`` and ``kwargs`` carries a forward-mode tangent (``torch.autograd.forward_ad``
    dual tensors, ``gradcheck(check_forward_ad=True)``): the call then runs as under ``torch.func``, whose forward
    mode the device code has (its own ops have none: ``mm`` with ``out=``, sparse tables)."""
    if _forward_ad._current_level < 0:  # (no dual level open: one attribute read per call)
        return False
    leaves = pytree.tree_leaves((args, kwargs))
    return any(isinstance(t, torch.Tensor) and _forward_ad.unpack_dual(t).tangent is not None for t in leaves)


def plain(t: torch.Tensor) -> torch.Tensor:
    """The values under any functorch wrappers of ``t`` (a vmapped tensor: all its elements, the batch axis
    where vmap keeps it), for checks that read values, which a wrapper refuses; ``t`` itself outside transforms.

    >>> plain(torch.ones(2)).shape
    torch.Size([2])
    """
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t


def call_under_transforms(call: Callable, args: tuple, kwargs: dict):
    """``call(*args, **kwargs)`` as one functorch-aware autograd Function over the tensors among ``args`` and
    ``kwargs``; the result has the structure ``call`` returns. ``call`` is the qnode itself: run at a level where
    a lower transform is still active (``vmap`` of ``grad``), it comes back here for that level."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    out_spec: list = []

    def run(tensors) -> tuple:
        filled = list(leaves)
        for i, t in zip(where, tensors):
            filled[i] = t
        a, k = pytree.tree_unflatten(filled, spec)
        flat, tree = pytree.tree_flatten(call(*a, **k))
        if not out_spec:
            out_spec.append(tree)
        bad = [type(o).__name__ for o in flat if not isinstance(o, torch.Tensor)]
        if bad:
            raise GradientError(
                f"Inside torch.func transforms a qnode must return tensors, got {bad}: return expectation values, "
                "probabilities or variances (samples and counts have no derivative), or call it outside the transform."
            )
        return tuple(flat)

    outs = _QnodeCall.apply(run, *(leaves[i] for i in where))
    return pytree.tree_unflatten(list(outs), out_spec[0])


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _loop(fn: Callable, size: int, in_dims, args) -> tuple:
    """``fn`` applied to each batch element of ``args`` (sliced along ``in_dims``), outputs stacked on axis 0."""
    per = []
    for b in range(size):
        sliced = [a if d is None else a.select(d, b) for a, d in zip(args, in_dims)]
        per.append(fn(*sliced))
    return tuple(torch.stack(col) for col in zip(*per))


class _QnodeCall(torch.autograd.Function):
    """The qnode call: forward on plain values, backward through ``_Vjp``, vmap one call per element."""

    @staticmethod
    def forward(run, *tensors):
        return run(tensors)

    @staticmethod
    def setup_context(ctx, inputs, output):
        run, *tensors = inputs
        ctx.run, ctx.n = run, len(tensors)
        ctx.which = tuple(i for i, t in enumerate(tensors) if _differentiable(t))
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors, *output)  # jvp: the outputs give the (zero) cotangents' shapes

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        vjps = _Vjp.apply(ctx.run, ctx.which, len(tensors), *tensors, *grads)
        out = [None] * len(tensors)
        for i, v in zip(ctx.which, vjps):
            out[i] = v
        return (None, *out)

    @staticmethod
    def jvp(ctx, _run, *tangents):
        # J t as the derivative of <J^T c, t> in the cotangents c (linear in c, so c = 0 will do): reverse
        # mode twice, by the qnode's own method (jvp, jacfwd)
        saved = ctx.saved_tensors
        tensors, outs = saved[: ctx.n], saved[ctx.n :]
        tx = [_tangent(tangents[i], tensors[i]) for i in ctx.which]
        got = _Vjp2.apply(ctx.run, ctx.which, ctx.n, len(outs), *tensors, *map(torch.zeros_like, outs), *tx)
        return tuple(got[len(ctx.which) :])

    @staticmethod
    def vmap(info, in_dims, run, *tensors):
        outs = _loop(lambda *t: _QnodeCall.apply(run, *t), info.batch_size, in_dims[1:], tensors)
        return outs, (0,) * len(outs)


class _Vjp(torch.autograd.Function):
    """The vector-Jacobian product of the call at ``tensors`` with the cotangents ``grads``: the call re-run on
    fresh leaves and differentiated by the qnode's own method. A batch of cotangents (``jacrev``) reuses that one
    forward for every row; a batch of inputs (per-sample gradients) runs one forward each."""

    @staticmethod
    def forward(run, which, n, *xs):
        tensors, grads = xs[:n], xs[n:]
        leaves = [t.detach().requires_grad_(i in which) for i, t in enumerate(tensors)]
        with torch.enable_grad():
            outs = run(leaves)
        return _products(outs, [leaves[i] for i in which], [grads])[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.run, ctx.which, ctx.n, *xs = inputs
        ctx.save_for_backward(*xs)
        ctx.save_for_forward(*xs)

    @staticmethod
    def backward(ctx, *ggs):
        # second order (grad of grad, jacrev of jacrev): the call's gradient re-run with create_graph=True and
        # differentiated once more, by the qnode's own method, in _Vjp2
        xs = ctx.saved_tensors
        got = _Vjp2.apply(ctx.run, ctx.which, ctx.n, len(xs) - ctx.n, *xs, *ggs)
        out = [None] * len(xs)
        for i, g in zip((*ctx.which, *range(ctx.n, len(xs))), got):
            out[i] = g
        return (None, None, None, *out)

    @staticmethod
    def jvp(ctx, _run, _which, _n, *tangents):
        # along (tx, tg): H[g] tx + J^T tg (torch.func.hessian = jacfwd of jacrev); H is symmetric, so H tx is
        # _Vjp2's derivative in the inputs along tx
        xs = ctx.saved_tensors
        tensors, grads = xs[: ctx.n], xs[ctx.n :]
        tx = [_tangent(tangents[i], tensors[i]) for i in ctx.which]
        tg = [_tangent(t, g) for t, g in zip(tangents[ctx.n :], grads)]
        hx = _Vjp2.apply(ctx.run, ctx.which, ctx.n, len(grads), *tensors, *grads, *tx)[: len(ctx.which)]
        jg = _Vjp.apply(ctx.run, ctx.which, ctx.n, *tensors, *tg)
        return tuple(a + b for a, b in zip(hx, jg))

    @staticmethod
    def vmap(info, in_dims, run, which, n, *xs):
        tensor_dims, grad_dims = in_dims[3 : 3 + n], in_dims[3 + n :]
        if all(d is None for d in tensor_dims) and not transforms_active():
            # only cotangents batched (jacrev): one forward, B products. With a transform still active below
            # (jacrev of jacrev, nested vmap) the per-element loop lets each level dispatch its own way.
            tensors, grads = xs[:n], xs[n:]
            leaves = [t.detach().requires_grad_(i in which) for i, t in enumerate(tensors)]
            with torch.enable_grad():
                outs = run(leaves)
            rows = [[g if d is None else g.select(d, b) for g, d in zip(grads, grad_dims)] for b in range(info.batch_size)]
            per = _products(outs, [leaves[i] for i in which], rows)
            stacked = tuple(torch.stack(col) for col in zip(*per))
            return stacked, (0,) * len(stacked)
        outs = _loop(lambda *x: _Vjp.apply(run, which, n, *x), info.batch_size, in_dims[3:], xs)
        return outs, (0,) * len(outs)


class _Vjp2(torch.autograd.Function):
    """The derivative of ``_Vjp`` (``x, g -> g . J(x)``) along ``ggs``: with respect to the call's inputs (a
    Hessian-vector product) and to its cotangents (a Jacobian-vector product), from one forward whose gradient is
    taken with ``create_graph=True``. Third order is refused by name."""

    @staticmethod
    def forward(run, which, n, m, *xs):
        tensors, grads, ggs = xs[:n], xs[n : n + m], xs[n + m :]
        leaves = [t.detach().requires_grad_(i in which) for i, t in enumerate(tensors)]
        cots = [g.detach().requires_grad_() for g in grads]
        diff = [leaves[i] for i in which]
        with torch.enable_grad():
            outs = run(leaves)
            pairs = [k for k, o in enumerate(outs) if o.requires_grad]
            first = torch.autograd.grad(
                [outs[k] for k in pairs], diff, [cots[k] for k in pairs], create_graph=True, allow_unused=True
            ) if pairs and diff else [None] * len(diff)
            terms = [(v, gg) for v, gg in zip(first, ggs) if v is not None and v.requires_grad]
            got = torch.autograd.grad(
                [v for v, _ in terms], diff + cots, [gg for _, gg in terms], allow_unused=True
            ) if terms else [None] * (len(diff) + len(cots))
        return tuple(torch.zeros_like(x) if g is None else g.detach() for x, g in zip(diff + cots, got))

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise _refuse_third_order()

    @staticmethod
    def jvp(ctx, *tangents):
        raise _refuse_third_order()

    @staticmethod
    def vmap(info, in_dims, run, which, n, m, *xs):
        outs = _loop(lambda *x: _Vjp2.apply(run, which, n, m, *x), info.batch_size, in_dims[4:], xs)
        return outs, (0,) * len(outs)


def _products(outs, leaves, rows) -> list:
    """``sum_k <rows[b][k], d outs[k] / d leaves>`` for each cotangent row ``b`` (zeros where nothing depends)."""
    pairs = [k for k, o in enumerate(outs) if o.requires_grad]
    result = []
    for b, grads in enumerate(rows):
        got = (
            torch.autograd.grad(
                [outs[k] for k in pairs],
                leaves,
                [grads[k] for k in pairs],
                allow_unused=True,
                retain_graph=b < len(rows) - 1,
            )
            if pairs and leaves
            else [None] * len(leaves)
        )
        result.append(tuple(torch.zeros_like(x) if g is None else g.detach() for x, g in zip(leaves, got)))
    return result


def _tangent(t, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if t is None else t


def _refuse_third_order() -> GradientError:
    return GradientError(
        "Third and higher derivatives through torch.func, reverse mode over forward mode (jacrev or grad of jacfwd "
        "or jvp) and forward mode over forward mode (jacfwd of jacfwd) are not supported for qhybrid qnodes; first "
        "and second derivatives are (grad, jacrev, jacfwd, hessian, which is jacfwd of jacrev, and jacrev of "
        "jacrev). Use torch.autograd.grad with create_graph=True for every order."
    )


__all__ = ["call_under_transforms", "plain", "transforms_active"]

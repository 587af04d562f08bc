"""A cone class's single parameter row as one bound state-vector node (``statevector.bound``).

Members of a class that read equal parameters run once (``shared.run_distinct``): a QAOA class runs one row.
Through the general path that row's step recorded the gate-building ops one by one (the columns' unbind, a
builder call per kind, the fused products, the Kronecker blocks) around the program's adjoint node, and the
shared node's backward walked them back op by op (Q100 p=2: ~900 ops of its ~4,000). Bound, the row is the
node's one input: its gates are built inside the node from one gather per gate kind and its backward is the
adjoint walk chained to the row by hand, as for a whole narrow circuit (``_bound``).

``bound_row(program, c, row, dtype, device)`` returns the ``[1]`` value, or None where the bound path does not
apply (a batch axis, operator matrices, stacked rows; ``BoundProgram.bind``).
"""

from __future__ import annotations

import torch

from ..statevector.adjoint import BoundNode
from ..statevector.bound import BoundProgram
from ..statevector.program import StateVectorProgram
from .values import ConeValues

ENABLED = True
"""Set False to run every class row through the general path (A/B measurements)."""

_UNBOUND = object()


def _bind(program, c):
    if not isinstance(program, StateVectorProgram):  # (a noisy class's density-matrix program: its own path)
        return _UNBOUND
    n = c.structure.n_op_params
    maps = tuple((0, torch.tensor(j)) for j in range(n))  # parameter j is the row's column j
    bound = BoundProgram.bind(program, c.structure, maps, c.tape)
    if bound is None or bound.signs is None or program.measure.shape[0] != 1:
        return _UNBOUND
    return bound


def bound_row(memo: dict, program, c, row: torch.Tensor, dtype, device) -> torch.Tensor | None:
    """``[1]``: the class's value for the one parameter row ``row`` (``[1, P]``), through one bound node;
    None where the general path must run. ``memo`` keeps each class's bound program."""
    if not ENABLED or c.structure.batch_size is not None or row.ndim != 2 or row.shape[0] != 1 or row.is_complex():
        return None
    key = (id(program), dtype, str(device))
    bound = memo.get(key)
    if bound is None:
        bound = memo[key] = _bind(program, c)
    if bound is _UNBOUND:
        return None

    def fallback(xs):  # the general path, differentiable by torch (higher derivatives)
        values = ConeValues(c.structure, c.tape, xs[0][0], False, dtype, device)
        values.prefetch(program.matrix_slots)
        return tuple(program.run_expvals(values).unbind(0))

    (value,) = BoundNode.apply(bound, fallback, dtype, device, row)
    return value.reshape(1)

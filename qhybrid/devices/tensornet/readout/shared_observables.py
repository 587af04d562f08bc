"""When variants of one circuit structure may run as one stacked program although their tapes measure
separate observable objects.

The stacked program reads the observables of its first variant's tape, so stacked variants must measure
the same observables. The native path passes the same parameter objects; tapes from PennyLane's own
transforms (parameter-shift through ``qml.qnode``) each carry their own numpy copy of a Hamiltonian:
equal values that need no gradient, which stack just as well.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pennylane as qml

from ...._variant import Variant


def observables_shared(n_op_params: int, group: Sequence[Variant]) -> bool:
    """Stacked variants must measure the same observables: the same parameter objects, or (tapes from
    PennyLane's own transforms, each with its own copy of a Hamiltonian) equal values needing no gradient."""
    n = n_op_params
    first = group[0].params[n:]
    return all(
        len(v.params) == len(group[0].params) and all(_same_value(x, y) for x, y in zip(v.params[n:], first))
        for v in group[1:]
    )


def _same_value(x, y) -> bool:
    if x is y:
        return True
    if getattr(x, "requires_grad", False) or getattr(y, "requires_grad", False):
        return False
    try:
        return bool(np.array_equal(qml.math.toarray(x), qml.math.toarray(y)))
    except (TypeError, ValueError):
        return False


def sharing_observables(group: list[Variant], n_op_params: int) -> list[Variant]:
    """The group with every variant measuring the first one's observable parameter objects (equal
    values, checked by ``observables_shared``), so the tape's observables are bound once, not per variant."""
    first = group[0].params[n_op_params:]
    if not first:
        return group
    return [
        v if all(a is b for a, b in zip(v.params[n_op_params:], first))
        else Variant(v.tape, list(v.params[:n_op_params]) + list(first), v.gather)
        for v in group
    ]

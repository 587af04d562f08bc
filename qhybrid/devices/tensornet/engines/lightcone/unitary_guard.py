"""Circuits with a projector or a user matrix that is not unitary run as one state vector, or are refused.

Light cones drop every gate outside an observable's cone (``U^dagger U = 1`` there), and a closed network of a
postselected circuit is no better, which holds for unitary gates only. A postselection's projector is not one, and
PennyLane does not check a ``QubitUnitary``'s matrix by default: default.qubit applies a non-unitary one as it is
(results are the unnormalised state's ``<psi|O|psi>``), as the state-vector engine does (its identity terms:
``readout/identity_terms.py``). So a circuit with a projector, or whose user matrices are not all unitary on the
values its plan is built with, runs as one state vector where that fits ``max_memory``, and is refused naming the
operator where it does not.

>>> import pennylane as qml, numpy as np
>>> tape = qml.tape.QuantumScript([qml.QubitUnitary(np.diag([1.0, 0.5]), 0)], [qml.expval(qml.Z(0))])
>>> non_unitary_matrix(tape)
'QubitUnitary on wires [0]'
"""

from __future__ import annotations

import pennylane as qml
import torch

from .....errors import ContractionTooLargeError
from ..._structure import may_be_non_unitary, wrapped_parts
from ..statevector.adjoint import is_unitary
from .choice import EngineChoice, state_side


def non_unitary_matrix(tape) -> str | None:
    """The first operator of ``tape`` that is not unitary, as "name on wires [...]": a postselection's projector,
    or a user matrix on its present values."""
    for op in tape.operations:
        if op.name == "Projector" or may_be_non_unitary(op) and not _unitary(op):
            return f"{op.name} on wires {op.wires.tolist()}"
    return None


def _unitary(op) -> bool:
    """Whether ``op`` is unitary on its present values: a wrapper (adjoint, power, control, product) where what it
    wraps is (its own matrix may span many more wires: a control on twenty), else its matrix."""
    parts = wrapped_parts(op)
    if parts is not None:
        return all(_unitary(p) for p in parts)
    if not may_be_non_unitary(op):
        return True
    with torch.no_grad():
        return is_unitary(torch.as_tensor(qml.matrix(op)).to(torch.complex128))


def state_vector_for(odd: str, what: str, structure, lead: int, opts, words: int) -> EngineChoice:
    """The state-vector choice for a circuit with the non-unitary operator ``odd``, or the refusal where its state
    does not fit ``max_memory``."""
    flops, peak = state_side(structure, lead, opts.dtype.itemsize, torch.is_grad_enabled(), words)
    if peak > opts.max_memory:
        raise ContractionTooLargeError(
            f"{odd} is not unitary: light cones and contraction networks hold for unitary gates only, so this "
            f"circuit must run as one state vector of {len(structure.sim_wires)} wires, which needs {peak / 2**30:.2f} "
            f"GiB, above max_memory={opts.max_memory / 2**30:.2f} GiB. Run it on fewer wires (postselection), or make "
            "the matrix unitary."
        )
    return EngineChoice(what, "state vector", f"{odd} is not unitary (light cones and networks need unitary gates)",
                        flops, peak, None, None)


__all__ = ["non_unitary_matrix", "state_vector_for"]

"""Circuits with a user matrix that is not unitary run as one state vector, or are refused.

Light cones drop every gate outside an observable's cone (``U^dagger U = 1`` there), which holds for unitary gates
only. PennyLane does not check a ``QubitUnitary``'s matrix by default, and default.qubit applies a non-unitary one
as it is (results are the unnormalised state's ``<psi|O|psi>``); the state-vector engine does the same (its identity
terms: ``readout/identity_terms.py``). So a circuit whose user matrices are not all unitary, on the values its plan
is built with, runs as one state vector where that fits ``max_memory``, and is refused naming the matrix where it
does not.

>>> import pennylane as qml, numpy as np
>>> tape = qml.tape.QuantumScript([qml.QubitUnitary(np.diag([1.0, 0.5]), 0)], [qml.expval(qml.Z(0))])
>>> non_unitary_matrix(tape)
'QubitUnitary on wires [0]'
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

from .....errors import ContractionTooLargeError
from ...readout.identity_terms import USER_MATRIX_OPS
from .choice import EngineChoice, state_side

UNITARY_ATOL = 1e-10


def non_unitary_matrix(tape) -> str | None:
    """The first user matrix of ``tape`` that is not unitary (on its present values), as "name on wires [...]"."""
    for op in tape.operations:
        if op.name not in USER_MATRIX_OPS:
            continue
        m = qml.matrix(op)
        m = m.detach().cpu().numpy() if isinstance(m, torch.Tensor) else np.asarray(m)
        m = m.reshape(-1, *m.shape[-2:])  # (broadcast: one matrix a row)
        if not np.allclose(m @ np.conj(np.swapaxes(m, -1, -2)), np.eye(m.shape[-1]), atol=UNITARY_ATOL, rtol=0):
            return f"{op.name} on wires {op.wires.tolist()}"
    return None


def state_vector_for(odd: str, what: str, structure, lead: int, opts, words: int) -> EngineChoice:
    """The state-vector choice for a circuit with the non-unitary matrix ``odd``, or the refusal where its state
    does not fit ``max_memory``."""
    flops, peak = state_side(structure, lead, opts.dtype.itemsize, torch.is_grad_enabled(), words)
    if peak > opts.max_memory:
        raise ContractionTooLargeError(
            f"{odd} is not unitary: light cones and contraction networks hold for unitary gates only, so this "
            f"circuit must run as one state vector of {len(structure.sim_wires)} wires, which needs {peak / 2**30:.2f} "
            f"GiB, above max_memory={opts.max_memory / 2**30:.2f} GiB. Make the matrix unitary (for postselection use "
            "qml.measure(w, postselect=b)), or run the circuit on fewer wires."
        )
    return EngineChoice(what, "state vector", f"{odd} is not unitary (light cones and networks need unitary gates)",
                        flops, peak, None, None)


__all__ = ["non_unitary_matrix", "state_vector_for"]

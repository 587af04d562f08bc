"""An expectation's identity term read as the state's norm where the state may not be normalised.

Every engine counts a Pauli sentence's identity term as its coefficient, ``<psi|psi> = 1``. A user's matrix
(``QubitUnitary``, ...) or a sum, scaled operator or exponential used as a gate need not be unitary, and a projector
is not (``_structure.may_be_non_unitary`` names them): PennyLane does not
check it by default, and default.qubit then returns the unnormalised state's ``<psi|O|psi>``, whose identity term
is its coefficient times the norm. In a tape with such an operator, each expectation's identity term is taken out
before the device, and added back times the norm, read from one more measurement (the probabilities of one wire).
For a unitary matrix the norm is 1 (to rounding). A postselection's ``Projector`` does the same; its
renormalisation (``postselect.py``) then divides the whole expectation by the norm.

>>> import numpy as np
>>> tape = qml.tape.QuantumScript([qml.QubitUnitary(np.diag([1.0, 0.5]), 0)], [qml.expval(qml.Z(0) + 2 * qml.I(0))])
>>> (new,), post = identity_terms_by_norm(tape)
>>> [type(m).__name__ for m in new.measurements]
['ExpectationMP', 'ProbabilityMP']
"""

from __future__ import annotations

import pennylane as qml
from pennylane.measurements import ExpectationMP
from pennylane.tape import QuantumScript

from .._structure import may_be_non_unitary

def without_identity(obs) -> tuple:
    """(``obs`` less its identity term, or None where nothing else is left; that term's real coefficient)."""
    ps = obs.pauli_rep
    identity = qml.pauli.PauliWord({})
    if ps is None or identity not in ps:
        return obs, 0.0
    constant = ps[identity]
    constant = qml.math.real(constant) if qml.math.iscomplex(constant) else constant
    rest = qml.pauli.PauliSentence({w: c for w, c in ps.items() if w != identity})
    return (rest.operation(wire_order=obs.wires) if rest else None), constant


class _AddedTimesNorm:
    """The postprocessing (module-level, so plans holding it pickle): per original measurement, its result, or
    its remaining terms' value plus its identity coefficient times the norm."""

    def __init__(self, reads: tuple, single: bool):
        self.reads, self.single = reads, single  # per measurement: (position or None, coefficient or None)

    def __call__(self, results):
        (res,) = results
        if not any(at is not None for at, _ in self.reads):  # the norm's probabilities alone: one result, no tuple
            res = (res,)
        *kept, probs = res
        norm = qml.math.sum(probs, axis=-1)
        out = tuple(kept[at] if constant is None else constant * norm + (0.0 if at is None else kept[at]) for at, constant in self.reads)
        return out[0] if self.single else out


def _first(results):
    return results[0]


@qml.transform
def identity_terms_by_norm(tape: QuantumScript):
    """``tape`` with its expectations' identity terms read as their coefficients times the state's norm, where a
    user's matrix may make the state unnormalised (exact tapes only)."""
    if tape.shots or not any(may_be_non_unitary(op) for op in tape.operations):
        return (tape,), _first
    measured, reads, changed = [], [], False
    for mp in tape.measurements:
        rest, constant = without_identity(mp.obs) if isinstance(mp, ExpectationMP) and mp.obs is not None else (mp, None)
        if constant is None or rest is mp.obs:
            reads.append((len(measured), None))
            measured.append(mp)
            continue
        changed = True
        reads.append((None if rest is None else len(measured), constant))
        if rest is not None:
            measured.append(qml.expval(rest))
    if not changed:
        return (tape,), _first
    new = tape.copy(measurements=[*measured, qml.probs(wires=tape.wires[:1])])
    return (new,), _AddedTimesNorm(tuple(reads), len(tape.measurements) == 1)


__all__ = ["identity_terms_by_norm", "without_identity"]

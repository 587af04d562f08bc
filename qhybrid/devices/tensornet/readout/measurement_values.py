"""Analytic statistics of mid-circuit measurement values as ordinary observables of the deferred wires.

After ``qml.defer_measurements`` a measurement value ``m`` is a classical function of the computational-basis
state of the wires that hold its deferred measurements, so ``expval(m)`` and ``var(m)`` are those of the
diagonal observable ``diag(m.eigvals())`` on ``m.wires``, and ``probs(op=m)`` is ``probs(wires=m.wires)``.
Rewritten so, every path of the device answers them (the contraction reads both kinds), where otherwise only
PennyLane's read-out from a full state could.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
from pennylane.measurements import ExpectationMP, ProbabilityMP, VarianceMP
from pennylane.tape import QuantumScript


def _as_observable(mp):
    if mp.mv is None or type(mp) not in (ExpectationMP, VarianceMP, ProbabilityMP):
        return mp
    if type(mp) is ProbabilityMP:
        return qml.probs(wires=mp.wires)
    eigvals = np.asarray(mp.eigvals(), dtype=float)
    obs = qml.Hermitian(np.diag(eigvals), wires=mp.wires)
    return type(mp)(obs=obs)


def _first(results):
    return results[0]


@qml.transform
def measurement_values_as_observables(tape: QuantumScript):
    """``tape`` with expval / var / probs of measurement values measured as observables of their wires
    (exact tapes only: a sampling device samples measurement values itself).

    >>> m = qml.measure(0)  # doctest: +SKIP
    """
    if tape.shots or not any(mp.mv is not None for mp in tape.measurements):
        return (tape,), _first  # module-level, so plans holding it pickle
    # the operations' trainable parameters stay the trainable ones (a copy with new measurements would make every
    # parameter trainable, the new observables' matrices too: PennyLane's parameter-shift then failed on them)
    measurements = [_as_observable(mp) for mp in tape.measurements]
    new = tape.copy(measurements=measurements, trainable_params=tape.trainable_params)
    return (new,), _first


__all__ = ["measurement_values_as_observables"]

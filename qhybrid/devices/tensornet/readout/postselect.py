"""Postselection on qhybrid.tensornet: results of a circuit with projectors, renormalised as default.qubit's.

``qml.measure(w, postselect=b)`` reaches the device as a ``Projector`` on the measured (deferred) wire, a
non-unitary operator the simulator applies like any other matrix (the state-vector adjoint sees it is not
unitary and differentiates through the contraction instead). The state it leaves has the squared norm
``n`` of the postselected branch; default.qubit divides the state by ``sqrt(n)`` after each projector,
which is the same as dividing the final results once, as done here: expectations and probabilities by
``n``, the state by ``sqrt(n)``. ``n`` is read from one more measurement, the probabilities of a projected
wire. A variance is measured as ``<O>`` and ``<O^2>`` and made from their renormalised values; identity terms
are read times the norm (``identity_terms.py``: a projector makes the state unnormalised). A branch of probability zero gives NaN (as on default.qubit).
"""

from __future__ import annotations

import pennylane as qml
from pennylane.measurements import DensityMatrixMP, ExpectationMP, ProbabilityMP, StateMP, VarianceMP
from pennylane.tape import QuantumScript

from ....errors import UnsupportedOperationError

_SCALED = (ExpectationMP, ProbabilityMP, StateMP)

DIFFERENCE_METHODS = frozenset({"finite_diff", "spsa_grad"})
"""Gradient transforms that difference the device's results at nearby points: the renormalised result is a
smooth function of the parameters like any other, so they differentiate it correctly (shift rules do not:
a ratio of trigonometric polynomials is not one)."""
_TRAILING_AXES = {ExpectationMP: 0, ProbabilityMP: 1, StateMP: 1, DensityMatrixMP: 2}


def _first(results):
    return results[0]


@qml.transform
def renormalise_postselection(tape: QuantumScript, name: str = "qhybrid.tensornet", outside_gradient=None):
    """Renormalise the results of a tape with ``Projector`` operations (postselection); others pass.

    ``outside_gradient``: a gradient method PennyLane applies to the device's (renormalised) runs one by one,
    such as "parameter-shift"; its shift rules do not hold for a ratio, so trainable tapes are refused
    (default.qubit gives wrong numbers there). Finite differences (``DIFFERENCE_METHODS``) are served.

    >>> tape = qml.tape.QuantumScript([qml.Hadamard(0), qml.Projector([1], 0)], [qml.expval(qml.Z(0))])
    >>> (new,), post = renormalise_postselection(tape)
    >>> new.measurements[-1]
    probs(wires=[0])
    """
    projectors = [op for op in tape.operations if isinstance(op, qml.Projector)]
    if not projectors:
        return (tape,), _first
    if tape.shots:
        raise UnsupportedOperationError(
            f"Postselection with finite shots ({tape.shots}) is not supported by {name}: run it with shots=None "
            "(exact postselected results, renormalised as on default.qubit), or on default.qubit for sampling."
        )
    if outside_gradient is not None and outside_gradient not in DIFFERENCE_METHODS and tape.trainable_params:
        raise UnsupportedOperationError(
            f"Postselection with diff_method={outside_gradient!r} through PennyLane is not supported by {name}: "
            "shift rules differentiate each renormalised run alone, which gives wrong gradients. Use "
            "diff_method='adjoint', 'backprop' or 'finite-diff', or qhybrid.qnode (its parameter-shift differentiates the "
            "runs before the renormalisation)."
        )
    refused = [mp for mp in tape.measurements if not isinstance(mp, (*_SCALED, VarianceMP)) or isinstance(mp, VarianceMP) and mp.obs is None]
    if refused:
        raise UnsupportedOperationError(
            f"{name} renormalises expval, var, probs, state and density_matrix after postselection; {refused[0]} is "
            "not one of them. Use default.qubit for it."
        )
    # a variance is <O^2> - <O>^2 of the renormalised branch: its two expectations are measured instead (their
    # identity terms, which the engines count as coefficients, are read times the norm: ``identity_terms``)
    measured, reads = [], []
    for mp in tape.measurements:
        if isinstance(mp, VarianceMP):
            reads.append(("var", len(measured), len(measured) + 1))
            measured += [qml.expval(mp.obs), qml.expval(_squared(mp.obs))]
        else:
            reads.append((type(mp), len(measured)))
            measured.append(mp)
    norm_wire = projectors[0].wires[:1]
    new = tape.copy(measurements=[*measured, qml.probs(wires=norm_wire)])

    def renormalise(results):
        *kept, probs = results[0]
        norm = qml.math.sum(probs, axis=-1)
        out = []
        for read in reads:
            if read[0] == "var":
                out.append(kept[read[2]] / norm - (kept[read[1]] / norm) ** 2)
                continue
            kind, r = read[0], kept[read[1]]
            scale = qml.math.sqrt(norm) if kind is StateMP else norm
            out.append(r / qml.math.reshape(scale, qml.math.shape(scale) + (1,) * _TRAILING_AXES.get(kind, 1)))
        return out[0] if len(out) == 1 else tuple(out)

    return (new,), renormalise


def _squared(obs):
    """``obs`` squared, as an observable: a Pauli sentence times itself, else the square of its matrix."""
    if obs.pauli_rep is not None:
        return (obs.pauli_rep @ obs.pauli_rep).operation(wire_order=obs.wires)
    m = qml.matrix(obs)
    return qml.Hermitian(m @ m, wires=obs.wires)


__all__ = ["renormalise_postselection"]

"""The frequencies of a one-parameter gate's shift rule: the gaps of its generator's eigenvalues, exact.

>>> import pennylane as qml
>>> distinct_frequencies(generator_frequencies(qml.RX(0.3, 0)))
(1.0,)
"""

from __future__ import annotations

import numpy as np
import pennylane as qml


def generator_frequencies(op) -> list[float] | None:
    """The differences of the eigenvalues of a one-parameter operator's generator, to full precision (PennyLane
    rounds them to six decimals: an ``Evolution``'s rule was then 4e-10 off), or None where there is no generator."""
    if op.num_params != 1:
        return None
    try:
        gen, prefactor = qml.generator(op, format="prefactor")
        matrix = qml.matrix(gen, wire_order=gen.wires)
        eig = np.linalg.eigvalsh(np.asarray(qml.math.unwrap(matrix), dtype=complex)) * complex(qml.math.unwrap(prefactor))
    except Exception:  # noqa: BLE001 - no generator (or none PennyLane can give): its parameter_frequencies
        return None
    if np.abs(eig.imag).max() > 1e-12:
        return None
    eig = eig.real
    return [float(a - b) for a in eig for b in eig if a > b]


def distinct_frequencies(freqs) -> tuple[float, ...]:
    """The distinct non-zero frequencies, as floats. PennyLane leaves them repeated, zeros included, where a
    generator's coefficients are tensors (``qml.evolve`` of a Hamiltonian made with ``qml.dot(torch.tensor(...),
    ...)``: six frequencies for one), and a rule over repeated frequencies is ill-conditioned (gradients 1e-10 off)."""
    out: list[float] = []
    for f in sorted(abs(float(f)) for f in freqs):
        if f > 1e-12 and (not out or f - out[-1] > 1e-10 * f):
            out.append(f)
    return tuple(out)


__all__ = ["generator_frequencies", "distinct_frequencies"]

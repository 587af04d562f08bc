"""How the Aer device's preprocessing splits and orders tapes: measurements that cannot share one set of samples run
on shots of their own (qubit-wise groups), and a device without wires reads each circuit in PennyLane's standard
wire order."""

from __future__ import annotations

from functools import partial

import pennylane as qml
from pennylane.measurements import ExpectationMP, Shots
from pennylane.tape import QuantumScript

from ..tensornet._structure import standard_wires
from ._measure_sampled import sampling_groups_conflict


@qml.transform
def split_for_sampling(tape: QuantumScript, default_shots: Shots = Shots(None), wires=None):
    """With shots, split measurements that cannot be read from one set of samples (qubit-wise groups)."""
    shots = tape.shots if tape.shots else default_shots
    wires = wires if wires is not None else standard_wires(tape)
    if not shots or not sampling_groups_conflict(tape, wires):
        return (tape,), _first
    if all(_splittable(mp) for mp in tape.measurements):
        return qml.transforms.split_non_commuting(tape, grouping_strategy="qwc")
    # samples, counts or a variance of a sum, which PennyLane's split refuses: each measurement on its own shots
    parts = [split_for_sampling(tape.copy(measurements=[mp]), default_shots, wires) for mp in tape.measurements]
    return [t for tapes, _ in parts for t in tapes], partial(_joined, parts=parts, copies=tape.shots.num_copies)


def _splittable(mp) -> bool:
    """Whether PennyLane's ``split_non_commuting`` reads ``mp`` right: an expectation of a Pauli sum, or a
    measurement of one word or one matrix observable that is not a sum (not of the identity alone, which it returns
    as the constant 1.0, whatever was asked: probabilities, samples, counts, or a variance)."""
    if mp.obs is None:
        return True
    ps = mp.obs.pauli_rep
    if ps is not None and len(ps) == 1 and not next(iter(ps)):  # the identity word alone
        return False
    if isinstance(mp, ExpectationMP):
        return True
    # (its split refuses any other measurement of a sum: one holding a Hermitian, or terms that merge into one word)
    return not isinstance(mp.obs, qml.ops.Sum) and len(ps or ()) <= 1


def _joined(results, parts, copies: int):
    out, k = [], 0
    for tapes, fn in parts:
        out.append(fn(results[k : k + len(tapes)]))
        k += len(tapes)
    if copies > 1:  # a shot vector: per setting, every measurement's result
        return tuple(tuple(r[c] for r in out) for c in range(copies))
    return tuple(out)


@qml.transform
def standard_wire_order(tape: QuantumScript):
    """``tape`` on wires ``0..n-1`` in PennyLane's standard order of its own wires (a device without wires reads the
    state in that order: taken from the decomposed tape, ``probs()`` came back with two wires swapped)."""
    return (tape.map_to_standard_wires(),), _first


def _first(results):
    return results[0]


__all__ = ["split_for_sampling", "standard_wire_order"]

"""A tape paired with the flat parameter list to run it with: the unit every launcher and JPC moves."""

from __future__ import annotations

from dataclasses import dataclass

import pennylane as qml


@dataclass
class Variant:
    """``tape`` run with ``params`` in place of its data (``tape_parameters`` order).

    Shifted copies of a tape for parameter-shift, or the detached leaves the adjoint method
    differentiates, are variants of one tape: no operator is copied.
    """

    tape: qml.tape.QuantumScript
    params: list

    @classmethod
    def of(cls, tape: qml.tape.QuantumScript) -> "Variant":
        return cls(tape, tape_parameters(tape))

    def bound_tape(self, *, detach: bool = False) -> qml.tape.QuantumScript:
        """The tape with ``params`` bound in, for devices that only take tapes (the tape itself if unchanged)."""
        params = [p.detach() if detach and hasattr(p, "detach") else p for p in self.params]
        if all(a is b for a, b in zip(params, tape_parameters(self.tape))):
            return self.tape
        return self.tape.bind_new_parameters(params, list(range(len(params))))


def tape_parameters(tape: qml.tape.QuantumScript) -> list:
    """Operator data in order, then each measured observable's data (PennyLane's own order)."""
    params = [p for op in tape.operations for p in op.data]
    for mp in tape.measurements:
        if mp.obs is not None:
            params.extend(mp.obs.data)
    return params


def parameter_owners(tape: qml.tape.QuantumScript) -> list[tuple[int, int]]:
    """For each flat parameter, (operator index, index within the operator); observables get (-1, k)."""
    owners = []
    for i, op in enumerate(tape.operations):
        owners.extend((i, k) for k in range(len(op.data)))
    for mp in tape.measurements:
        if mp.obs is not None:
            owners.extend((-1, k) for k in range(len(mp.obs.data)))
    return owners

"""A shot vector as one tape per setting, marked so that ``qml.Tracker`` still counts it once.

PennyLane returns a shot-vector tape's results as a tuple over its settings. qhybrid's own call path
(``qhybrid.execute``, ``qhybrid.qnode``) and qhybrid.aer's jobs run each setting as its own tape; the parts
carry :class:`ShotVectorPart` shots, so the run recorder (``_tracking.track_run``) counts the vector as one
execution with its total shots, as default.qubit does.
"""

from __future__ import annotations

import pennylane as qml
from pennylane.measurements import Shots
from pennylane.tape import QuantumScript


class ShotVectorPart(Shots):
    """The shots of one setting of a shot vector run as its own tape; ``setting`` is its position in the
    vector (0 stands for the whole vector's execution). A ``Shots`` in every other respect (equal to
    ``Shots(shots)``), and it survives ``tape.copy`` and the gradient transforms (``Shots(part)`` is ``part``).

    >>> ShotVectorPart(10, setting=1) == Shots(10)
    True
    """

    def __new__(cls, shots, setting: int = 0):  # Shots.__new__ takes no ``setting``
        return shots if isinstance(shots, cls) else object.__new__(cls)

    def __init__(self, shots, setting: int = 0):
        if shots is self:  # ``Shots(part)`` hands the part back and Python re-runs __init__ on it
            return
        super().__init__(shots)
        object.__setattr__(self, "setting", setting)  # Shots freezes itself in __init__


def vector_setting(tape: QuantumScript) -> int | None:
    """The setting a split shot vector's part runs (0 for the first), None for a tape that is no such part."""
    return tape.shots.setting if isinstance(tape.shots, ShotVectorPart) else None


@qml.transform
def split_shot_vectors(tape: QuantumScript):
    """One tape per setting of the tape's shot vector (copies included); its results come back as a tuple
    over settings, as PennyLane returns them. Other tapes pass as they are.

    >>> tape = QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))], shots=[10, (20, 2)])
    >>> parts, regroup = split_shot_vectors(tape)
    >>> [int(t.shots.total_shots) for t in parts]
    [10, 20, 20]
    """
    if not tape.shots.has_partitioned_shots:
        return (tape,), _first
    settings = [s.shots for s in tape.shots.shot_vector for _ in range(s.copies)]
    return tuple(tape.copy(shots=ShotVectorPart(s, setting=i)) for i, s in enumerate(settings)), tuple


def _first(results):
    return results[0]


__all__ = ["ShotVectorPart", "split_shot_vectors", "vector_setting"]

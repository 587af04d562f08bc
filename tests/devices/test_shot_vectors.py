"""split_shot_vectors: one tape per setting, marked with its setting, results regrouped as a tuple."""

from __future__ import annotations

import pennylane as qml
from pennylane.measurements import Shots

from qhybrid.devices._shot_vectors import ShotVectorPart, split_shot_vectors, vector_setting


def test_a_shot_vector_splits_into_marked_settings_and_regroups():
    tape = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))], shots=[10, (20, 2)])
    parts, regroup = split_shot_vectors(tape)
    assert [int(t.shots.total_shots) for t in parts] == [10, 20, 20]
    assert [vector_setting(t) for t in parts] == [0, 1, 2]
    assert regroup(["a", "b", "c"]) == ("a", "b", "c")


def test_other_tapes_pass_unmarked():
    for shots in (None, 10):
        tape = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))], shots=shots)
        (same,), first = split_shot_vectors(tape)
        assert same is tape and vector_setting(same) is None and first(["r"]) == "r"


def test_a_part_is_a_shots_that_survives_copies_and_gradient_tapes():
    part = ShotVectorPart(10, setting=1)
    assert part == Shots(10) and Shots(part) is part
    tape = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))], shots=part)
    shifted, _ = qml.gradients.param_shift(tape)
    assert all(vector_setting(t) == 1 for t in shifted) and vector_setting(tape.copy()) == 1

"""A state or density matrix too large to return is refused by its own size, naming what to measure instead, not
method="mps" (issue 41, finding 8: a 34-wire qml.state() refusal suggested method="mps", which refuses it too)."""

import pennylane as qml
import pytest

import qhybrid
from qhybrid.errors import ContractionTooLargeError


def _state():
    qml.Hadamard(0)
    qml.CNOT([0, 33])
    return qml.state()


def test_a_34_wire_state_is_refused_by_its_size():
    dev = qhybrid.device("tensornet", wires=34, max_memory=1e9)
    with pytest.raises(ContractionTooLargeError) as info:
        qml.QNode(_state, dev)()
    msg = str(info.value)
    assert "qml.state() of 34 wires (2**34 amplitudes) is 256.0 GiB (17179869184 elements x 16 bytes), above " \
           "max_memory=953.7 MiB" in msg
    assert "no method returns it" in msg and "sample with shots" in msg
    assert 'method="mps", max_bond_dim' not in msg


def test_mps_refuses_the_same_state_with_the_same_advice():
    dev = qhybrid.device("tensornet", wires=34, method="mps", max_memory=1e9)
    with pytest.raises(ContractionTooLargeError, match="Measure expectation values, probs of few wires or samples"):
        qml.QNode(_state, dev)()


def test_a_state_that_fits_but_whose_program_does_not_still_names_mps():
    """2**20 amplitudes (16 MiB) fit, the state-vector program's peak does not: method='mps' can write it out."""
    dev = qhybrid.device("tensornet", wires=20, max_memory=20 * 2**20)

    @qml.qnode(dev)
    def circuit():
        qml.Hadamard(0)
        return qml.state()

    with pytest.raises(ContractionTooLargeError, match='method="mps"'):
        circuit()
    out = qml.QNode(circuit.func, qhybrid.device("tensornet", wires=20, method="mps", max_memory=20 * 2**20))()
    assert out.shape == (2**20,)


def test_a_wide_density_matrix_is_refused_by_its_size():
    dev = qhybrid.device("tensornet", wires=20, max_memory=1e9)

    @qml.qnode(dev)
    def circuit():
        qml.Hadamard(0)
        return qml.density_matrix(wires=range(16))

    with pytest.raises(ContractionTooLargeError, match=r"qml.density_matrix of 16 wires \(4\*\*16 entries\) is 64.0 GiB"):
        circuit()

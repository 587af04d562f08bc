"""Structure keys of measured observables (``devices/_observable_key.py``): equal structures share a key, any
difference in kind, wires, words or constants makes another, whether or not the observable holds data."""

import pennylane as qml

from qhybrid.devices._observable_key import observable_key


def _ring(n, *, flip=None, coeffs=None):
    words = [qml.Z(u) @ qml.Z((u + 1) % n) for u in range(n)]
    if flip is not None:
        words[flip] = qml.X(flip) @ qml.Z((flip + 1) % n)
    return qml.sum(*words) if coeffs is None else qml.dot(coeffs, words)


def test_observables_without_data_are_keyed_by_their_trees():
    assert observable_key(qml.expval(_ring(12))) == observable_key(qml.expval(_ring(12)))  # other objects, equal
    others = [_ring(12, flip=5), _ring(11), _ring(12, coeffs=[2.0] * 12)]
    for other in others:
        assert observable_key(qml.expval(other)) != observable_key(qml.expval(_ring(12)))
    assert observable_key(qml.var(_ring(12))) != observable_key(qml.expval(_ring(12)))
    assert observable_key(qml.expval(qml.Z(0))) != observable_key(qml.expval(qml.Z(1)))


def test_observables_with_constants_are_keyed_by_their_values_too():
    c = [0.5] * 12
    assert observable_key(qml.expval(_ring(12, coeffs=c))) == observable_key(qml.expval(_ring(12, coeffs=list(c))))
    assert observable_key(qml.expval(_ring(12, coeffs=c))) != observable_key(qml.expval(_ring(12, coeffs=[0.25] + c[1:])))
    assert observable_key(qml.expval(_ring(12, coeffs=c))) != observable_key(qml.expval(_ring(12, flip=3, coeffs=c)))


def test_measurements_without_observables_keep_pennylanes_hash():
    assert observable_key(qml.probs(wires=[0, 1])) == qml.probs(wires=[0, 1]).hash
    assert observable_key(qml.probs(wires=[0, 1])) != observable_key(qml.probs(wires=[1, 0]))

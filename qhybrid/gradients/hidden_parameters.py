"""Trainable tensors an operator holds outside its own parameters, refused where the gradient method would drop them.

``qml.evolve(qml.dot(c, ops), t)`` keeps the generator ``qml.dot(c, ops)`` among its hyperparameters: its data are
``(t,)`` alone. Adjoint and parameter-shift differentiate the tape's parameters, so a trainable ``c`` got no gradient
(``c.grad`` stayed None after ``backward()``, silently). Backprop differentiates through the matrix, ``c`` included.

>>> import pennylane as qml, torch
>>> c = torch.tensor([0.3, 0.5], requires_grad=True)
>>> from qhybrid._variant import Variant
>>> tape = qml.tape.QuantumScript([qml.evolve(qml.dot(c, [qml.X(0), qml.Z(0)]), 0.4)], [qml.expval(qml.Z(0))])
>>> refuse_hidden_trainables([Variant.of(tape)], "adjoint")
Traceback (most recent call last):
...
qhybrid.errors.GradientError: Evolution holds trainable tensors outside its own parameters ...
"""

from __future__ import annotations

import pennylane as qml
import torch

from ..errors import GradientError


def refuse_hidden_trainables(variants, method: str) -> None:
    """``GradientError`` naming the first operator of the variants' tapes that holds, in an operator among its
    hyperparameters, a tensor that requires a gradient and is not one of its own parameters. A cached structure's
    tape (a variant with a gather, the same object every call) has the places of such operators found once; a tape
    made anew is read whole (~70 ns a gate)."""
    for v in variants:
        tape = v.tape
        if v.gather is None:
            places = range(len(tape.operations))
        else:
            hit = _HOLDERS.get(id(tape))
            if hit is None or hit[0] is not tape:
                hit = _HOLDERS[id(tape)] = (tape, [k for k, op in enumerate(tape.operations) if _holds_operators(op)])
                if len(_HOLDERS) > HOLDERS_KEPT:
                    _HOLDERS.pop(next(iter(_HOLDERS)))
            places = hit[1]
        for k in places:
            op = tape.operations[k]
            held = op.__dict__.get("_hyperparameters")  # (none kept by a plain gate: one lookup each)
            if not held:
                continue
            own = {id(d) for d in op.data}
            if any(id(t) not in own for t in _held_trainables(held.values())):
                raise GradientError(
                    f"{op.name} holds trainable tensors outside its own parameters (the coefficients of the generator "
                    f"of qml.evolve, say): diff_method={method!r} differentiates an operator's own parameters only "
                    "and would give them no gradient. Use diff_method='backprop', or make them the operator's own "
                    "(qml.evolve(P, c * t) for one term)."
                )


HOLDERS_KEPT = 256
"""Cached structures' tapes whose operators holding operators are remembered (the tape held: its id is not reused)."""
_HOLDERS: dict = {}


def _holds_operators(op) -> bool:
    held = op.__dict__.get("_hyperparameters")
    return bool(held) and any(isinstance(v, (qml.operation.Operator, list, tuple)) for v in held.values())


def _held_trainables(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _held_trainables(v)
        elif isinstance(v, qml.operation.Operator):
            yield from (d for d in v.data if isinstance(d, torch.Tensor) and d.requires_grad)
            yield from _held_trainables(v.hyperparameters.values())


__all__ = ["refuse_hidden_trainables"]

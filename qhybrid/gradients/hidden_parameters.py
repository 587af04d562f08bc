"""Trainable tensors an operator holds outside its own parameters, refused where the gradient method would drop them.

``qml.evolve(qml.dot(c, ops), t)`` keeps the generator ``qml.dot(c, ops)`` among its hyperparameters: its data are
``(t,)`` alone. Adjoint and parameter-shift differentiate the tape's parameters, so a trainable ``c`` got no gradient
(``c.grad`` stayed None after ``backward()``, silently). Backprop differentiates through the matrix, ``c`` included.

>>> import pennylane as qml, torch
>>> c = torch.tensor([0.3, 0.5], requires_grad=True)
>>> tape = qml.tape.QuantumScript([qml.evolve(qml.dot(c, [qml.X(0), qml.Z(0)]), 0.4)], [qml.expval(qml.Z(0))])
>>> refuse_hidden_trainables([tape], "adjoint")
Traceback (most recent call last):
...
qhybrid.errors.GradientError: Evolution holds trainable tensors outside its own parameters ...
"""

from __future__ import annotations

import pennylane as qml
import torch

from ..errors import GradientError


def refuse_hidden_trainables(tapes, method: str) -> None:
    """``GradientError`` naming the first operator of ``tapes`` that holds, in an operator among its hyperparameters, a
    tensor that requires a gradient and is not one of its own parameters."""
    for tape in tapes:
        for op in tape.operations:
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


def _held_trainables(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _held_trainables(v)
        elif isinstance(v, qml.operation.Operator):
            yield from (d for d in v.data if isinstance(d, torch.Tensor) and d.requires_grad)
            yield from _held_trainables(v.hyperparameters.values())


__all__ = ["refuse_hidden_trainables"]

"""The JacobianProductCalculator contract and lookup by name.

Each calculator registers itself under its ``name`` (:func:`register_jpc`) where it is defined, so this
module, which they all import for the base class, imports none of them: ``get_jpc`` reads the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence, TypeVar

import torch

from .._variant import Variant
from ..devices._protocol import supports_reverse_mode
from ..errors import GradientError

Results = list[tuple[torch.Tensor, ...]]
"""One tuple per variant, one tensor per measurement."""


class JacobianProductCalculator(ABC):
    """Computes vector-Jacobian products of device executions with respect to their parameters.

    Contract:
      * ``forward(variants, trainable)`` runs the variants once and returns ``(results, saved)``:
        results without any autograd history of their own, and ``saved``, whatever ``compute_vjp`` may
        reuse (e.g. the intermediates of the forward contraction).
      * ``compute_vjp(variants, trainable, dy, saved)`` returns, for each variant, one tensor per
        trainable position (``trainable[i]`` indexes ``variants[i].params``), shaped like that parameter.
        ``dy[i][m]`` is the cotangent of measurement ``m`` of variant ``i``. When torch's grad mode is on
        (``backward(create_graph=True)``) the products are themselves differentiable, so higher
        derivatives work.

    >>> import qhybrid
    >>> jpc = get_jpc("parameter-shift", qhybrid.device("tensornet", wires=1))
    >>> jpc.name
    'parameter-shift'
    """

    name: str = ""

    @classmethod
    def for_device(cls, device, gradient_device=None) -> "JacobianProductCalculator":
        """The calculator ``get_jpc`` builds for ``device`` (``gradient_device``: a second device for the
        gradient runs, where the method has any)."""
        return cls(device)

    @abstractmethod
    def forward(self, variants: Sequence[Variant], trainable: Sequence[Sequence[int]]) -> tuple[Results, Any]:
        ...

    @abstractmethod
    def compute_vjp(
        self,
        variants: Sequence[Variant],
        trainable: Sequence[Sequence[int]],
        dy: Sequence[Sequence[torch.Tensor]],
        saved: Any = None,
    ) -> list[tuple[torch.Tensor, ...]]:
        ...

    def compute_jacobian(self, variants: Sequence[Variant], trainable: Sequence[Sequence[int]]):
        """Full Jacobians, one VJP per output element (cheap only for few outputs).

        Returns, per variant, per measurement, per trainable position: d result / d parameter with shape
        ``result.shape + parameter.shape``.
        """
        results, saved = self.forward(variants, trainable)
        jacs = []
        for i, (v, res) in enumerate(zip(variants, results)):
            per_meas = []
            for m, r in enumerate(res):
                rows = []
                for e in range(max(r.numel(), 1)):
                    dy = [[torch.zeros_like(x) for x in results[k]] for k in range(len(variants))]
                    dy[i][m].view(-1)[e] = 1
                    rows.append(self.compute_vjp(variants, trainable, dy, saved)[i])
                per_meas.append(
                    tuple(
                        torch.stack([row[t] for row in rows]).reshape(tuple(r.shape) + tuple(v.params[j].shape))
                        for t, j in enumerate(trainable[i])
                    )
                )
            jacs.append(per_meas)
        return jacs


_J = TypeVar("_J", bound=type)


_REGISTRY: dict[str, type] = {}
"""Calculators by ``diff_method`` name (filled by :func:`register_jpc` as their modules are imported)."""


def register_jpc(cls: _J) -> _J:
    """Class decorator: ``get_jpc(cls.name, ...)`` builds ``cls.for_device(device, gradient_device)``."""
    _REGISTRY[cls.name] = cls
    return cls


def refuse_shots(diff_method: str, shots) -> None:
    """adjoint and backprop differentiate exact results: finite ``shots`` are refused, naming the method
    asked for and the one that serves sampled results."""
    if shots:
        raise GradientError(
            f"diff_method={diff_method!r} differentiates exact (analytic) results, but the circuit has finite "
            f"shots ({shots}). Use diff_method='parameter-shift' for gradients of sampled results, or drop the shots."
        )


def check_diff_method(diff_method) -> None:
    """Raise a ``ValueError`` naming the valid methods unless ``diff_method`` is one ``get_jpc`` answers.

    >>> check_diff_method("adjoint")  # a typo ("ajdoint") raises, naming the valid methods
    """
    if diff_method is None or diff_method == "best" or (isinstance(diff_method, str) and diff_method in _REGISTRY):
        return
    raise ValueError(
        f"Unknown diff_method {diff_method!r}; choose 'adjoint', 'parameter-shift', 'backprop', 'best' or None. "
        "PennyLane's other gradient transforms (e.g. 'finite-diff') run through qml.qnode(qml.device("
        "'qhybrid.tensornet', ...), interface='torch', diff_method=...)."
    )


def resolved_method(diff_method, device, gradient_device=None, shots=None):
    """``diff_method`` with "best" resolved: adjoint on an analytic device that differentiates in reverse mode
    (tensornet), parameter-shift otherwise."""
    if diff_method == "best":
        native = supports_reverse_mode(device)
        shots = shots or getattr(device, "shots", None)
        return "adjoint" if not shots and native and gradient_device is None else "parameter-shift"
    return diff_method


def get_jpc(diff_method: str, device, gradient_device=None, *, shots=None) -> JacobianProductCalculator | None:
    """The JPC for ``diff_method``: "adjoint", "parameter-shift", "backprop", "best" (adjoint on an analytic
    tensornet device, parameter-shift otherwise) or None (no gradients). ``shots``: the circuits' own finite
    shots, where they set them (the device's count too)."""
    if diff_method is None:
        return None
    shots = shots or getattr(device, "shots", None)
    diff_method = resolved_method(diff_method, device, gradient_device, shots)
    if diff_method in ("adjoint", "backprop"):
        refuse_shots(diff_method, shots)
        if gradient_device is not None:
            _note_unused_gradient_device(diff_method)
    check_diff_method(diff_method)
    return _REGISTRY[diff_method].for_device(device, gradient_device)


_NOTED: set = set()


def _note_unused_gradient_device(method: str) -> None:
    """Say once a process that ``gradient_device`` is not used by ``method`` (it was ignored silently)."""
    if method not in _NOTED:
        _NOTED.add(method)
        import warnings

        from ..errors import QhybridWarning

        warnings.warn(
            f"gradient_device is used by parameter-shift only (it runs the shifted circuits); with "
            f"diff_method={method!r} the derivatives come from the forward device and gradient_device is not used.",
            QhybridWarning,
            stacklevel=4,
        )

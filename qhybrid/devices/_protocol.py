"""What the gradient code may ask of a device, so that ``devices/`` never imports ``gradients/``.

The adjoint JPC needs a device whose ``simulate_variants`` returns torch results differentiable in the
variants' parameters (``reverse_mode = True``). A device that answers PennyLane's ``compute_vjp`` asks the
registered VJP calculator for one: the gradients package registers it when imported (``import qhybrid``
always does), so the device depends on this small protocol, not on the gradients package.
"""

from __future__ import annotations

from typing import Any, Callable

_VJP_FACTORY: list[Callable[[Any], Any]] = []


def supports_reverse_mode(device) -> bool:
    """Whether ``device.simulate_variants`` returns results torch can differentiate (qhybrid.tensornet).

    >>> supports_reverse_mode(object())
    False
    """
    return bool(getattr(device, "reverse_mode", False))


def register_vjp_calculator(factory: Callable[[Any], Any]) -> None:
    """Set ``factory(device) -> JacobianProductCalculator`` used by devices answering ``compute_vjp``."""
    _VJP_FACTORY[:] = [factory]


def vjp_calculator(device):
    """The registered VJP calculator for ``device``.

    >>> import qhybrid
    >>> type(vjp_calculator(qhybrid.device("tensornet", wires=1))).__name__
    'AdjointTN'
    """
    if not _VJP_FACTORY:  # `import qhybrid` registers it; reaching here means the package did not finish importing
        raise RuntimeError(
            f"{getattr(device, 'name', device)}: no VJP calculator is registered; import qhybrid (its gradients "
            "package registers the adjoint calculator) before asking the device for VJPs."
        )
    return _VJP_FACTORY[0](device)


def one_node_results(device, variants):
    """The device's results of ``variants`` with the whole circuit as one autograd node from the variants'
    gather inputs (gate matrices built and cotangents chained inside it), or None where the device has no
    such path for them (the adjoint JPC then records its ExecuteTapes node). A device offers it as
    ``simulate_one_node(variants)``.

    >>> one_node_results(object(), []) is None
    True
    """
    hook = getattr(device, "simulate_one_node", None)
    return None if hook is None else hook(variants)

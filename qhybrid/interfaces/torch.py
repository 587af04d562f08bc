"""The torch boundary: ``execute`` preprocesses PennyLane tapes (once per structure), sends the whole batch
to a device in one ExecuteTapes call and shapes the results as a PennyLane torch QNode would.

ExecuteTapes (in ``gradients/_execute.py``, re-exported here) asks a JacobianProductCalculator for the
vector-Jacobian products in backward. Everything stays a torch tensor on its own device (no
``.cpu().numpy()`` round trip).
"""

from __future__ import annotations

from typing import Sequence

import pennylane as qml
import torch

from ._compile import quantum_boundary
from ..devices._shot_vectors import split_shot_vectors
from ..devices.tensornet.plugin.imaginary_exponents import evolutions_from_exponentials
from ..devices.tensornet import TensorNetworkDevice
from ..devices.tensornet.plugin.preprocess import runs_whole
from ..gradients._execute import ExecuteTapes, execute_variants
from ..gradients.jpc import get_jpc, resolved_method
from ..gradients.hidden_parameters import refuse_hidden_trainables
from ..gradients.shift_expand import expanded_for_shift_rules
from ..gradients.launcher import Launcher
from ..errors import refuse_function_transforms
from ._placement import call_device, place
from ..devices._observable_key import tape_parameters_fast
from ._preprocess import preprocess


@quantum_boundary
def execute(
    tapes: Sequence[qml.tape.QuantumScript],
    device,
    diff_method: str | None = "best",
    *,
    max_diff: int = 1,
    gradient_device=None,
    result_device: torch.device | str | None = None,
) -> tuple:
    """Execute PennyLane tapes whose parameters are torch tensors, differentiably, in one device call.

    Results have the structure a PennyLane torch QNode returns for each tape: a tensor for one
    measurement, a tuple for several, with a leading batch axis for broadcast tapes.

    Args:
        tapes: the circuits.
        device: a qhybrid (or any PennyLane) device.
        diff_method: "adjoint", "parameter-shift", "backprop", "best" or None.
        max_diff: accepted for PennyLane compatibility; every order is available through
            ``create_graph=True`` whatever its value.
        gradient_device: a second device for the parameter-shift runs (the forward stays on ``device``).
        result_device: where results go (default: the device of the tapes' tensor parameters, an accelerator
            before the CPU, else the device's ``torch_device``); results that depend on no parameter too.

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> x = torch.tensor(0.3, requires_grad=True)
    >>> (res,) = execute([qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])], dev)
    >>> res.backward(); x.grad
    tensor(-0.2955)
    """
    tapes = list(tapes)
    refuse_function_transforms(tapes)  # (forward AD's dual tensors: before the preprocessing meets them)
    shots = getattr(device, "shots", None)
    if shots:  # a device's own shots apply to tapes that set none (as PennyLane's QNode does)
        tapes = [t if t.shots else t.copy(shots=shots) for t in tapes]
    tapes, regroup = split_shot_vectors(tapes)  # a shot vector runs as one tape per setting
    shots = next((t.shots for t in tapes if t.shots), None)
    tapes = shift_expanded(tapes, device, diff_method, gradient_device, shots)
    variants, postprocess = preprocess(device, tapes)  # the device's program, cached per structure
    method = resolved_method(diff_method, device, gradient_device, shots)
    if method in ("adjoint", "parameter-shift") and torch.is_grad_enabled():
        refuse_hidden_trainables(variants, method)  # (a generator's coefficients: no gradient)
    if result_device is None:
        result_device = call_device([tape_parameters_fast(t) for t in tapes])
        result_device = result_device or getattr(device, "torch_device", None)
    result_device = None if result_device is None else torch.device(result_device)
    if result_device is not None and result_device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(  # (torch's own error came after the forward had run)
            f"result_device={str(result_device)!r}, but this torch sees no CUDA device: leave it unset (results go "
            "where the tapes' parameters live) or pass 'cpu'."
        )
    return regroup(run_prepared(variants, postprocess, device, diff_method, gradient_device, shots=shots, result_device=result_device))


def shift_expanded(tapes: list, device, diff_method, gradient_device=None, shots=None) -> list:
    """``tapes`` with the operators a tensornet device runs whole but that have no shift rules decomposed, where
    the gradients come from parameter-shift (as PennyLane's parameter-shift does); else ``tapes``."""
    if not isinstance(device, TensorNetworkDevice):
        return tapes
    if resolved_method(diff_method, device, gradient_device, shots) != "parameter-shift":
        return tapes
    kept = runs_whole(device)
    # (an imaginary exponential first as the evolution the device runs: PennyLane's decomposition of
    # qml.exp(s_prod(0.4, Y), -0.5j * x) applied the 0.4 twice, in the value too)
    return [expanded_for_shift_rules(evolutions_from_exponentials(t)[0][0], kept) for t in tapes]


def run_prepared(
    variants, postprocess, device, diff_method, gradient_device=None, *, shots=None, result_device=None
) -> tuple:
    """The back half of ``execute``, shared with static-structure traces: device-ready ``variants`` run with
    autograd support, ``postprocess`` (the device program's) applied, results placed on ``result_device``."""
    refuse_function_transforms()
    shaped = run_variants(variants, device, diff_method, gradient_device, shots=shots)
    return place(tuple(postprocess(shaped)), result_device)


def run_variants(variants, device, diff_method, gradient_device=None, *, shots=None) -> tuple:
    """Device-ready ``variants`` run with autograd support (through the JPC ``diff_method`` names), one result
    per variant shaped as a PennyLane torch QNode's (a tensor per measurement, a tuple for several), before
    the preprocessing's postprocessing."""
    jpc = get_jpc(diff_method, device, gradient_device, shots=shots)
    if jpc is None:
        with torch.no_grad():
            raw = Launcher(device).run(variants)
    else:
        raw = execute_variants(variants, jpc)
    return tuple(r[0] if len(r) == 1 else tuple(r) for r in raw)


__all__ = ["ExecuteTapes", "execute", "execute_variants", "run_prepared", "run_variants", "shift_expanded"]

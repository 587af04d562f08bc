"""Channels as superoperators: every PennyLane channel's ``S = sum_r K_r (x) conj(K_r)`` in torch, differentiable in
the channel's parameters (the noise strengths) and broadcast over their leading (stack, batch) axes.

``S`` acts on the vectorised density matrix ``vec(rho)[k, b] = rho[k, b]`` (ket bits, then bra bits):
``S[(k', b'), (k, b)] = sum_r K_r[k', k] conj(K_r[b', b])``. The built-in one-qubit channels are written in
closed form, linear in their probabilities (so a derivative at p = 0 is finite, where one through ``sqrt(p)``
Kraus operators is not); ``QubitChannel`` and ``PauliError`` are built from their Kraus operators and Pauli word.
The closed forms are checked against PennyLane's ``kraus_matrices`` by ``tests/.../mixed/test_channels.py``.
"""

from __future__ import annotations

import numbers
from functools import reduce
from typing import Callable, Sequence

import numpy as np
import pennylane as qml
import torch

from ...._constants import literal
from ...._device_assert import assert_on_device

CHANNEL_NAMES = frozenset(
    {
        "AmplitudeDamping",
        "GeneralizedAmplitudeDamping",
        "PhaseDamping",
        "DepolarizingChannel",
        "BitFlip",
        "PhaseFlip",
        "PauliError",
        "ResetError",
        "ThermalRelaxationError",
        "QubitChannel",
    }
)
"""PennyLane's channels, each run natively by the mixed-state engine."""

PAULI_MIXTURES = frozenset({"DepolarizingChannel", "BitFlip", "PhaseFlip", "PauliError"})
"""Channels that are a mixture of Pauli unitaries with state-independent weights (what trajectories can sample)."""


_CHECKED: set = set()
_CHECKED_MAX = 4096
"""Channels (name, values) already found valid: a noise model repeats one channel everywhere."""


def check_channel_batch(op: qml.operation.Operator) -> None:
    """Refuse, by name, a channel whose parameters carry a batch axis: the engines take one strength a channel (a
    batch in the strengths alone was read as its first sample, beside a batch of gates too), as default.mixed does.

    >>> check_channel_batch(qml.DepolarizingChannel(np.array([0.1, 0.2]), wires=0))
    Traceback (most recent call last):
    ...
    ValueError: DepolarizingChannel on wires [0] has parameters with a batch axis (shape (2,)): ...
    """
    expected = 2 if op.name == "QubitChannel" else 0  # Kraus matrices, else scalar strengths (PennyLane's own
    for p in op.data:  # ndim_params follows what a channel was given)
        if qml.math.ndim(p) > expected:
            raise ValueError(
                f"{op.name} on wires {op.wires.tolist()} has parameters with a batch axis (shape "
                f"{tuple(qml.math.shape(p))}): qhybrid.tensornet takes one strength a channel, as default.mixed does. "
                "Broadcast the gates only, and run one circuit per strength (a Python loop, or torch.func.vmap over "
                "the strengths)."
            )


def check_channel(op: qml.operation.Operator) -> None:
    """Refuse, by name, a channel that is none: Kraus operators of the wrong size for its wires, or numeric
    strengths PennyLane's own ``kraus_matrices`` refuses (a probability outside [0, 1], ...). The closed forms
    below would give numbers for any value (``DepolarizingChannel(1.5)`` gave probabilities); tensor strengths
    are not read (no host read in a training step).

    >>> check_channel(qml.BitFlip(1.5, wires=0))
    Traceback (most recent call last):
    ...
    ValueError: BitFlip(1.5) on wires [0] is not a channel: p must be in the interval [0,1]. Give it a valid strength.
    """
    check_channel_batch(op)
    if op.name == "QubitChannel":
        d = 1 << len(op.wires)
        shapes = {tuple(qml.math.shape(k)) for k in op.data}
        if any(len(sh) < 2 or sh[-2:] != (d, d) for sh in shapes):
            raise ValueError(
                f"QubitChannel on wires {op.wires.tolist()} has Kraus operators of shape {sorted(shapes)}; a channel "
                f"on {len(op.wires)} wire(s) needs {d} x {d} ones (2**k x 2**k on k wires)."
            )
        return
    data = op.data
    if any(isinstance(p, torch.Tensor) for p in data):
        _check_tensor_strengths(op)
        return
    if not data or not all(isinstance(p, (numbers.Real, np.ndarray, np.generic)) and np.ndim(p) == 0 for p in data):
        return  # autograd's traced boxes are not read
    key = (op.name, tuple(float(p) for p in data), repr(op.hyperparameters))
    if key in _CHECKED:
        return
    try:
        op.kraus_matrices()
    except ValueError as e:
        values = ", ".join(f"{float(p):g}" for p in data)
        raise ValueError(
            f"{op.name}({values}) on wires {op.wires.tolist()} is not a channel: {e}. Give it a valid strength."
        ) from None
    if len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED.add(key)


_UNIT = "must be in the interval [0,1]"
_RANGES: dict[str, Callable] = {
    "AmplitudeDamping": lambda g: [((g >= 0) & (g <= 1), f"gamma {_UNIT}")],
    "PhaseDamping": lambda g: [((g >= 0) & (g <= 1), f"gamma {_UNIT}")],
    "GeneralizedAmplitudeDamping": lambda g, p: [((g >= 0) & (g <= 1), f"gamma {_UNIT}"), ((p >= 0) & (p <= 1), f"p {_UNIT}")],
    "DepolarizingChannel": lambda p: [((p >= 0) & (p <= 1), f"p {_UNIT}")],
    "BitFlip": lambda p: [((p >= 0) & (p <= 1), f"p {_UNIT}")],
    "PhaseFlip": lambda p: [((p >= 0) & (p <= 1), f"p {_UNIT}")],
    "PauliError": lambda p: [((p >= 0) & (p <= 1), f"p {_UNIT}")],
    "ResetError": lambda p0, p1: [
        ((p0 >= 0) & (p0 <= 1), f"p_0 {_UNIT}"),
        ((p1 >= 0) & (p1 <= 1), f"p_1 {_UNIT}"),
        ((p0 + p1 >= 0) & (p0 + p1 <= 1), f"p_0 + p_1 {_UNIT}"),
    ],
    "ThermalRelaxationError": lambda pe, t1, t2, tg: [
        ((pe >= 0) & (pe <= 1), "pe must be between 0 and 1"),
        (t1 > 0, "T_1 must be positive"),
        (t2 > 0, "T_2 must be positive"),
        (t2 <= 2 * t1, "T_2 must be at most 2 * T_1"),
        (tg >= 0, "the gate time tg must not be negative"),
    ],
}  # fmt: skip
"""PennyLane's ranges of each channel's strengths (its ``kraus_matrices`` checks), written for numbers and tensors."""


def _check_tensor_strengths(op: qml.operation.Operator) -> None:
    """A channel with tensor strengths checked where they live: ONE ``_assert_async`` of every range (no host read;
    on a CPU it raises here, on a GPU the failure is the device's assert at the next synchronisation). Number
    strengths beside them are checked at once. Inside torch.func transforms (vmap over the strengths) torch has
    no batching rule for the assert: not checked there."""
    ranges = _RANGES.get(op.name)
    if ranges is None:
        return
    pending, messages = [], []
    for holds, message in ranges(*op.data):
        if isinstance(holds, torch.Tensor):
            pending.append(holds)
            messages.append(message)
        elif not holds:
            raise ValueError(f"{op.name} on wires {op.wires.tolist()} is not a channel: {message}. Give it a valid strength.")
    if not pending:
        return
    message = (
        f"{op.name} on wires {op.wires.tolist()} is not a channel: {'; '.join(messages)} (a tensor strength is "
        "checked on its device, without reading it). Give it a valid strength."
    )
    assert_on_device(reduce(torch.logical_and, pending), message)


def is_channel(op: qml.operation.Operator) -> bool:
    """Whether ``op`` is a (non-unitary) channel.

    >>> is_channel(qml.DepolarizingChannel(0.1, wires=0)), is_channel(qml.RX(0.1, 0))
    (True, False)
    """
    return isinstance(op, qml.operation.Channel)


def _pauli_mixture(w_i, w_x, w_y, w_z) -> list:
    """Entries (row-major, 4 x 4) of ``sum_P w_P P (x) conj(P)`` over I, X, Y, Z; index ``2 k + b``."""
    a, c = w_i + w_z, w_x + w_y  # populations kept / swapped
    d, e = w_i - w_z, w_x - w_y  # coherences kept / swapped
    return [a, 0, 0, c, 0, d, e, 0, 0, e, d, 0, c, 0, 0, a]


def _affine(a, b, c, d, e) -> list:
    """``rho00' = a rho00 + b rho11``, ``rho11' = c rho00 + d rho11``, coherences scaled by ``e`` (real)."""
    return [a, 0, 0, b, 0, e, 0, 0, 0, 0, e, 0, c, 0, 0, d]


def _depolarizing(p):
    return _pauli_mixture(1 - p, p / 3, p / 3, p / 3)


def _bit_flip(p):
    return _pauli_mixture(1 - p, p, 0, 0)


def _phase_flip(p):
    return _pauli_mixture(1 - p, 0, 0, p)


def _amplitude_damping(g):
    return _affine(1, g, 0, 1 - g, torch.sqrt(1 - g))


def _generalized_amplitude_damping(g, p):
    # PennyLane's convention: with probability 1 - p decay towards |0>, with probability p towards |1>
    return _affine((1 - p) + p * (1 - g), (1 - p) * g, p * g, (1 - p) * (1 - g) + p, torch.sqrt(1 - g))


def _phase_damping(g):
    return _affine(1, 0, 0, 1, torch.sqrt(1 - g))


def _reset_error(p0, p1):
    return _affine(1 - p1, p0, p1, 1 - p0, 1 - p0 - p1)


def _thermal_relaxation(pe, t1, t2, tg):
    e1, e2 = torch.exp(-tg / t1), torch.exp(-tg / t2)
    reset = 1 - e1
    return _affine(e1 + reset * (1 - pe), reset * (1 - pe), reset * pe, e1 + reset * pe, e2)


_ONE_QUBIT: dict[str, Callable] = {
    "DepolarizingChannel": _depolarizing,
    "BitFlip": _bit_flip,
    "PhaseFlip": _phase_flip,
    "AmplitudeDamping": _amplitude_damping,
    "GeneralizedAmplitudeDamping": _generalized_amplitude_damping,
    "PhaseDamping": _phase_damping,
    "ResetError": _reset_error,
    "ThermalRelaxationError": _thermal_relaxation,
}


def _real(p, real_dtype, device) -> torch.Tensor:
    if isinstance(p, torch.Tensor):
        return p.to(device=device, dtype=real_dtype)
    if isinstance(p, (int, float)):  # a fixed noise strength: made once per device, not copied there per call
        return literal((float(p),), device, real_dtype)[0]
    return torch.as_tensor(p, dtype=real_dtype, device=device)


def _from_entries(entries: list, params: Sequence[torch.Tensor], dtype, device) -> torch.Tensor:
    real_dtype = dtype.to_real()
    lead = torch.broadcast_shapes(*(p.shape for p in params)) if params else ()
    cols = [e.expand(lead) if isinstance(e, torch.Tensor) else torch.full(lead, float(e), dtype=real_dtype, device=device)
            for e in entries]
    return torch.stack(cols, -1).reshape(*lead, 4, 4).to(dtype)


def kraus_superoperator(kraus: torch.Tensor) -> torch.Tensor:
    """``sum_r K_r (x) conj(K_r)`` of Kraus operators ``[..., r, D, D]``, shape ``[..., D*D, D*D]``.

    >>> kraus_superoperator(torch.eye(2, dtype=torch.complex128)[None]).shape
    torch.Size([4, 4])
    """
    d = kraus.shape[-1]
    s = torch.einsum("...rik,...rjl->...ijkl", kraus, kraus.conj())
    return s.reshape(*kraus.shape[:-3], d * d, d * d)


_PAULI = {"I": [[1, 0], [0, 1]], "X": [[0, 1], [1, 0]], "Y": [[0, -1j], [1j, 0]], "Z": [[1, 0], [0, -1]]}


def _pauli_word(letters: str, dtype, device) -> torch.Tensor:
    mats = [torch.tensor(_PAULI[c], dtype=dtype, device=device) for c in letters]
    return reduce(torch.kron, mats)


def superoperator(op: qml.operation.Operator, params: Sequence, dtype, device) -> torch.Tensor:
    """The channel ``op``'s superoperator with ``params`` in place of its data: ``lead + (4**k, 4**k)`` for a
    channel on ``k`` wires, ``lead`` the broadcast shape of the parameters' leading axes.

    >>> superoperator(qml.BitFlip(0.25, wires=0), [torch.tensor(0.25)], torch.complex128, "cpu")[0, 3].real
    tensor(0.2500, dtype=torch.float64)
    """
    real_dtype = dtype.to_real()
    name = op.name
    if name in _ONE_QUBIT:
        ps = [_real(p, real_dtype, device) for p in params]
        ps = list(torch.broadcast_tensors(*ps)) if len(ps) > 1 else ps
        return _from_entries(_ONE_QUBIT[name](*ps), ps, dtype, device)
    if name == "PauliError":
        p = _real(params[0], real_dtype, device)
        word = _pauli_word(op.hyperparameters["operators"], dtype, device)
        eye = torch.eye(word.shape[0], dtype=dtype, device=device)
        ii, pp = kraus_superoperator(eye[None]), kraus_superoperator(word[None])
        p = p.to(dtype)[..., None, None]
        return (1 - p) * ii + p * pp
    if name == "QubitChannel":
        kraus = torch.stack([k if isinstance(k, torch.Tensor) else torch.as_tensor(k) for k in params], -3)
        return kraus_superoperator(kraus.to(device=device, dtype=dtype))
    raise NotImplementedError(  # pragma: no cover - preprocessing lets only CHANNEL_NAMES through
        f"Channel {name} has no superoperator in qhybrid.tensornet; use qml.QubitChannel with its Kraus operators."
    )

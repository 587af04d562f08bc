"""Gate tensors: PennyLane operators to torch matrices that carry gradients.

One table of closed-form builders for the gates that dominate VQC workloads, vectorised over any
leading dimensions (batch, stacked tapes, several gates of a kind at once), and a generic fallback
that asks PennyLane for the matrix. Fixed gates are built once per dtype and device and cached.
"""

from __future__ import annotations

import collections
import functools
from typing import Callable, Sequence

import numpy as np
import pennylane as qml
import torch

from .._constants import literal
from ._excitation_gates import TWO_LEVEL, excitation_matrix
from ._rebound import rebound

_Builder = Callable[[Sequence[torch.Tensor]], tuple[list, list]]
"""Real parameters in, (real parts, imaginary parts) of the row-major matrix entries out (None = 0)."""


def _half(theta):
    return torch.cos(theta / 2), torch.sin(theta / 2)


def _rx(p):
    c, s = _half(p[0])
    return [c, None, None, c], [None, -s, -s, None]


def _ry(p):
    c, s = _half(p[0])
    return [c, -s, s, c], [None, None, None, None]


def _rz(p):
    c, s = _half(p[0])
    return [c, None, None, c], [-s, None, None, s]


def _phase_shift(p):
    return [1.0, None, None, torch.cos(p[0])], [None, None, None, torch.sin(p[0])]


def _rot(p):
    phi, theta, omega = torch.broadcast_tensors(*p)
    c, s = _half(theta)
    a, b = (phi + omega) / 2, (phi - omega) / 2
    ca, sa, cb, sb = torch.cos(a), torch.sin(a), torch.cos(b), torch.sin(b)
    re = [ca * c, -cb * s, cb * s, ca * c]
    im = [-sa * c, -sb * s, -sb * s, sa * c]
    return re, im


def _ising_zz(p):
    c, s = _half(p[0])
    re = [c, None, None, None, None, c, None, None, None, None, c, None, None, None, None, c]
    im = [-s, None, None, None, None, s, None, None, None, None, s, None, None, None, None, -s]
    return re, im


def _controlled(single: _Builder) -> _Builder:
    """Block-diag(I, U) from the builder of U: the control is the first wire."""

    def build(p):
        ure, uim = single(p)
        re = [1.0, None, None, None, None, 1.0, None, None]
        im = [None] * 8
        re += [None, None, ure[0], ure[1], None, None, ure[2], ure[3]]
        im += [None, None, uim[0], uim[1], None, None, uim[2], uim[3]]
        return re, im

    return build


_BUILDERS: dict[str, tuple[int, _Builder]] = {
    "RX": (2, _rx),
    "RY": (2, _ry),
    "RZ": (2, _rz),
    "PhaseShift": (2, _phase_shift),
    "U1": (2, _phase_shift),
    "Rot": (2, _rot),
    "CRX": (4, _controlled(_rx)),
    "CRY": (4, _controlled(_ry)),
    "CRZ": (4, _controlled(_rz)),
    "CRot": (4, _controlled(_rot)),
    "ControlledPhaseShift": (4, _controlled(_phase_shift)),
    "IsingZZ": (4, _ising_zz),
}
"""Closed forms checked against PennyLane's matrices by the random-circuit tests."""


def has_fast_builder(name: str) -> bool:
    return name in _BUILDERS or name in TWO_LEVEL


def broadcast_shape(*shapes) -> tuple:
    """``torch.broadcast_shapes`` for the few short shapes of gate parameters (that one is slow Python)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[i] = d
    return tuple(out)


def _assemble(dim: int, re: list, im: list, params, dtype, device) -> torch.Tensor:
    real_dtype = dtype.to_real()
    lead = broadcast_shape(*(p.shape for p in params)) if params else ()
    zero = torch.zeros(lead, dtype=real_dtype, device=device)

    def fill(v):
        if v is None:
            return zero
        if isinstance(v, float):
            return torch.full(lead, v, dtype=real_dtype, device=device)
        return v if v.shape == lead else v.expand(lead)

    if all(v is None for v in im):
        return torch.stack([fill(v) for v in re], -1).to(dtype).reshape(*lead, dim, dim)
    # real and imaginary parts interleaved in one stack, read as complex (one op less than torch.complex)
    pairs = torch.stack([fill(v) for pair in zip(re, im) for v in pair], -1)
    return torch.view_as_complex(pairs.reshape(*lead, dim, dim, 2)).to(dtype)


def typed_tensor(p, dtype: torch.dtype, device) -> torch.Tensor:
    """``p`` as a tensor of the computation's ``dtype`` on ``device``. A Python or numpy number goes straight
    to ``dtype``: through torch's default dtype (float32 unless set) ``0.7`` would be rounded to 7 digits
    first. A numpy float32 value keeps its float32 value (widened exactly), as a float32 tensor does.

    >>> torch.set_default_dtype(torch.float32)
    >>> typed_tensor(0.7, torch.float64, "cpu").item() == 0.7
    True
    >>> torch.set_default_dtype(torch.float64)
    """
    if isinstance(p, torch.Tensor):
        return p.to(device=device, dtype=dtype)
    if type(p) is float or type(p) is int:  # a constant angle: made once per device, no host data a step
        return literal(p, device, dtype)
    if isinstance(p, np.generic) and p.dtype.kind in "fiub":  # its exact value as a Python number (float32 widened)
        return literal(p.item(), device, dtype)
    return torch.as_tensor(p, dtype=dtype, device=device)


def fast_matrix(name: str, params: Sequence[torch.Tensor], dtype, device) -> torch.Tensor:
    """Matrix of gate ``name`` for real parameter tensors with any (broadcastable) leading shape.

    >>> fast_matrix("RX", [torch.tensor([0.1, 0.2], dtype=torch.float64)], torch.complex128, "cpu").shape
    torch.Size([2, 2, 2])
    """
    real_dtype = dtype.to_real()
    params = [typed_tensor(p, real_dtype, device) for p in params]
    if name in TWO_LEVEL:  # fermionic excitations (_excitation_gates.py)
        return excitation_matrix(name, params, dtype, device)
    dim, builder = _BUILDERS[name]
    re, im = builder(params)
    return _assemble(dim, re, im, params, dtype, device)


def real_gate(kind: str, op: qml.operation.Operator) -> bool:
    """Whether a gate slot's matrix is real for every real angle, from its kind alone: a closed form without
    imaginary entries (``RY``, ``CRY``) or a real constant matrix (Hadamard, CNOT). Decided at plan time, so a
    step never reads a matrix back from the device to find out (``kind``: the slot's, ``"fast"`` / ``"const"``).

    >>> real_gate("fast", qml.RY(0.3, wires=0)), real_gate("fast", qml.RX(0.3, wires=0))
    (True, False)
    >>> real_gate("const", qml.Hadamard(0)), real_gate("const", qml.S(0))
    (True, False)
    """
    if kind == "fast":
        return _real_closed_form(op.name)
    if kind == "const":
        m = np.asarray(op.matrix())
        return not np.iscomplexobj(m) or not np.any(m.imag)
    return False


@functools.lru_cache(maxsize=None)
def _real_closed_form(name: str) -> bool:
    if name in TWO_LEVEL:  # the entries are analytic in the angle: zero imaginary parts at two generic angles
        return not any(
            bool(excitation_matrix(name, [torch.tensor(a, dtype=torch.float64)], torch.complex128, "cpu").imag.any())
            for a in (0.7, 2.3)
        )
    zeros = [torch.zeros((), dtype=torch.float64)] * 3  # enough angles for any builder (Rot takes three)
    return all(v is None for v in _BUILDERS[name][1](zeros)[1])


_CONSTANTS: dict[tuple, torch.Tensor] = {}


def constant_matrix(op: qml.operation.Operator, dtype, device) -> torch.Tensor:
    """Matrix of a parameter-free gate, built once per gate kind, size, settings, dtype and device."""
    key = (op.name, len(op.wires), repr(op.hyperparameters) if op.hyperparameters else "", dtype, str(device))
    mat = _CONSTANTS.get(key)
    if mat is None:
        mat = torch.as_tensor(np.asarray(op.matrix()), dtype=dtype, device=device)
        _CONSTANTS[key] = mat
    return mat


def fixed_matrix(op: qml.operation.Operator, dtype, device) -> torch.Tensor:
    """The matrix of a gate without trainable parameters: parameter-free (``constant_matrix``: by kind, wires and
    settings), or of constant angles built as the general path builds them (``typed_tensor``: a numpy float32 angle
    widened exactly, not PennyLane's float32 matrix; ``constant_matrix`` keys no data). Callers keep it."""
    if not op.data:
        return constant_matrix(op, dtype, device)
    if has_fast_builder(op.name):
        real = dtype.to_real()
        return fast_matrix(op.name, [typed_tensor(p, real, device) for p in op.data], dtype, device)
    return generic_matrix(op, list(op.data), dtype, device)


_VALUED: collections.OrderedDict = collections.OrderedDict()
_VALUED_MAX = 4096
_VALUED_MAX_ELEMENTS = 1 << 12


def _value_key(p):
    """A hashable key of a constant parameter's value (a number, or a small numpy array), None otherwise."""
    if type(p) in (float, int, complex) or isinstance(p, np.generic):
        return (type(p), repr(p))
    if isinstance(p, np.ndarray) and p.size <= _VALUED_MAX_ELEMENTS:
        return (p.shape, p.dtype.str, p.tobytes())
    return None


def generic_matrix(op: qml.operation.Operator, params: Sequence, dtype, device) -> torch.Tensor:
    """Matrix of any operator that has one, with ``params`` in place of its data (kept differentiable). With constant
    parameters only (``PauliRot(0.3, "XY")``, a numpy ``QubitUnitary``) the matrix is made once per value, dtype and
    device (a tensor made from the host's numbers every step is host data: no CUDA graph captures it); never
    write it."""
    keys = [_value_key(p) for p in params]
    if params and all(k is not None for k in keys):
        hyper = repr(op.hyperparameters) if op.hyperparameters else ""
        key = (type(op), op.name, len(op.wires), hyper, tuple(keys), dtype, str(device))
        return _cached(key, lambda: _generic_matrix(op, params, dtype, device))
    return _generic_matrix(op, params, dtype, device)


def _cached(key, make) -> torch.Tensor:
    """``_VALUED[key]``, made by ``make()`` on a miss (least recently used dropped past ``_VALUED_MAX``)."""
    hit = _VALUED.get(key)
    if hit is None:
        # its own memory: ``torch.as_tensor`` of a numpy array shares the array's, and the user may write the
        # array later (then a later, equal array read the written values)
        hit = _VALUED[key] = make().clone()
        if len(_VALUED) > _VALUED_MAX:
            _VALUED.popitem(last=False)
    else:
        _VALUED.move_to_end(key)
    return hit


def _pauli_rot(op, params, dtype, device) -> torch.Tensor:
    """``exp(-i t/2 P) = cos(t/2) I - i sin(t/2) P`` with the word's matrix made once per device (PennyLane's own
    builds it from numpy every call: host data a step)."""
    word = op.hyperparameters["pauli_word"]
    wires = range(len(word))

    def word_matrix():
        pauli = qml.pauli.string_to_pauli_word(word, {w: w for w in wires})
        return typed_tensor(qml.matrix(pauli, wire_order=wires), dtype, device)

    P = _cached(("pauli word", word, dtype, str(device)), word_matrix)
    eye = _cached(("eye", P.shape[-1], dtype, str(device)), lambda: torch.eye(P.shape[-1], dtype=dtype, device=device))
    half = typed_tensor(params[0], dtype.to_real(), device)[..., None, None] / 2
    return torch.cos(half) * eye - 1j * torch.sin(half) * P


def _multi_rz(op, params, dtype, device) -> torch.Tensor:
    """``diag(exp(-i t/2 z))``, ``z`` the words' signs ``(-1)^popcount``, made once per device."""
    real = dtype.to_real()
    k = len(op.wires)
    # MultiRZ(pi)'s diagonal is -i z: its imaginary part, negated
    z = lambda: typed_tensor(-qml.matrix(qml.MultiRZ(np.pi, wires=range(k))).diagonal().imag, real, device)  # noqa: E731
    signs = _cached(("z signs", k, real, str(device)), z)
    phase = typed_tensor(params[0], real, device)[..., None] * (-0.5 * signs)
    return torch.diag_embed(torch.polar(torch.ones_like(phase), phase))


_CLOSED_FORMS = {"PauliRot": _pauli_rot, "MultiRZ": _multi_rz}
"""Gates whose trainable matrix is built here in torch (PennyLane's make tensors from numpy inside every call)."""


def _controlled(op, params, dtype, device) -> torch.Tensor | None:
    """A control (any number of wires and values) on a gate with a builder here: the identity with the gate's matrix
    in the block its control values select, or None where the operator is not that plain (work wires, a base of
    another kind)."""
    base = op.base
    if op.work_wires or list(op.wires) != list(op.control_wires) + list(base.wires) or len(params) != len(base.data):
        return None
    if has_fast_builder(base.name) and base.name not in TWO_LEVEL:
        m = fast_matrix(base.name, params, dtype, device)
    elif base.name in _CLOSED_FORMS:
        m = _CLOSED_FORMS[base.name](base, params, dtype, device)
    else:
        return None
    t = m.shape[-1]
    at = int("".join("1" if v else "0" for v in op.control_values), 2) * t
    size = t << len(op.control_wires)
    eye = _cached(("eye", size, dtype, str(device)), lambda: torch.eye(size, dtype=dtype, device=device))
    out = eye.expand(*m.shape[:-2], size, size).clone()
    out[..., at : at + t, at : at + t] = m
    return out


def _generic_matrix(op: qml.operation.Operator, params: Sequence, dtype, device) -> torch.Tensor:
    trainable = any(isinstance(p, torch.Tensor) for p in params)
    closed = _CLOSED_FORMS.get(op.name)
    if closed is not None and trainable and type(op).__module__.startswith("pennylane"):
        return closed(op, params, dtype, device)
    if trainable and type(op) in (qml.ops.op_math.Controlled, qml.ops.op_math.ControlledOp):
        m = _controlled(op, params, dtype, device)
        if m is not None:
            return m
    if trainable and isinstance(op, qml.ops.op_math.Pow) and float(op.z).is_integer():
        # PennyLane takes a float power through scipy's fractional power, which refuses tensors that require grad
        # (``pow(pow(RY(t), 2), 0.5)`` decomposes into ``RY(t)**1.0``)
        return torch.linalg.matrix_power(_generic_matrix(op.base, params, dtype, device), int(op.z))
    if trainable:
        # PennyLane's matrices cannot mix numpy and torch (U3(x, 0.0, y)), and torch would take an integer
        # angle's cos in its default dtype: numbers join as tensors of our precision
        params = [_as_tensor_like(p, dtype, device) for p in params]
    if any(p is not q for p, q in zip(params, op.data)):
        op = rebound(op, list(params))
    try:
        return typed_tensor(op.matrix(), dtype, device)
    except (RuntimeError, ValueError, TypeError):
        if op.batch_size is None:
            raise
    # some PennyLane matrices do not broadcast with torch parameters: build them element by element
    per = [
        rebound(op, [_element(p, op, k, b) for k, p in enumerate(op.data)]).matrix()
        for b in range(op.batch_size)
    ]
    return torch.stack([typed_tensor(m, dtype, device) for m in per])


def _as_tensor_like(p, dtype, device):
    """A number as a tensor (real ones in ``dtype``'s real precision); real or complex tensors as they are."""
    if isinstance(p, torch.Tensor):
        if p.is_floating_point() or p.is_complex():
            return p
        kind = "i"
    else:
        kind = np.asarray(p).dtype.kind
    if kind == "c":
        return typed_tensor(p, dtype, device)
    if kind in "fiub":
        return typed_tensor(p, dtype.to_real(), device)
    return p


def _element(p, op, k, b):
    return p[b] if qml.math.ndim(p) > op.ndim_params[k] else p


def constant_tensor(p, dtype, device) -> torch.Tensor:
    """``typed_tensor(p, ...)``, made once per value where ``p`` is a number or a small numpy array (an observable's
    matrix, a prepared state): no host data a step. Never write it."""
    key = None if isinstance(p, torch.Tensor) else _value_key(p)
    if key is None:
        return typed_tensor(p, dtype, device)
    return _cached(("tensor", key, dtype, str(device)), lambda: typed_tensor(p, dtype, device))


def state_vector(op: qml.operation.Operator, params: Sequence, dtype, device) -> torch.Tensor:
    """State of a StatePrep / BasisState on its own wires, shape ``[batch?] + [2] * len(wires)``."""
    if any(p is not q for p, q in zip(params, op.data)):
        op = qml.ops.functions.bind_new_parameters(op, list(params))
    vec = op.state_vector(wire_order=op.wires)
    return constant_tensor(vec, dtype, device)


def global_phase(params: Sequence, dtype, device) -> torch.Tensor:
    """exp(-i phi) of a GlobalPhase, with phi's leading shape."""
    real_dtype = dtype.to_real()
    phi = typed_tensor(params[0], real_dtype, device)
    return torch.polar(torch.ones_like(phi), -phi)

"""Gates of one kind built from their angle columns in one batched call, and the angles' cotangents from the
matrices' cotangents in closed form (no autograd graph: the circuit node's backward calls this directly).

Every closed-form gate here is ``P0 + U(theta)`` with ``U`` a product of factors ``exp(-i theta_k G_k / 2)``
(``G_k^2 = 1``) or phases ``exp(i theta_k)`` on a fixed block, and ``P0`` a fixed projector part (the
identity block of a controlled gate, the ``|0><0|`` entry of a phase shift). Then

    dM/dtheta_k = (M(theta + s e_k) - P0) * c

with ``(s, c) = (pi, 1/2)`` for half-angle rotations (``d exp(-i t G/2) = exp(-i (t + pi) G/2) / 2``) and
``(pi/2, 1)`` for phases (``d e^{i t} = e^{i (t + pi/2)}``). For a real loss, ``dL/dtheta_k =
Re(sum(conj(g_M) * dM/dtheta_k))`` in torch's convention for complex cotangents.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ...._constants import literal
from ..._gates import fast_matrix

_HALF = (math.pi, 0.5)
_PHASE = (math.pi / 2, 1.0)

SHIFT_RULES: dict[str, tuple[tuple[float, float], tuple[int, ...]]] = {
    "RX": (_HALF, ()),
    "RY": (_HALF, ()),
    "RZ": (_HALF, ()),
    "Rot": (_HALF, ()),
    "IsingZZ": (_HALF, ()),
    "PhaseShift": (_PHASE, (0,)),
    "U1": (_PHASE, (0,)),
    "CRX": (_HALF, (0, 1)),
    "CRY": (_HALF, (0, 1)),
    "CRZ": (_HALF, (0, 1)),
    "CRot": (_HALF, (0, 1)),
    "ControlledPhaseShift": (_PHASE, (0, 1, 2)),
}
"""Per gate kind: the (shift, factor) of its rule and the diagonal entries of its fixed part ``P0``."""


def supported(name: str) -> bool:
    return name in SHIFT_RULES


def build(name: str, columns: Sequence[torch.Tensor], dtype, device, with_derivatives: bool = False):
    """Matrices ``[n, *lead, D, D]`` of ``n`` gates of kind ``name`` from their angle columns ``[n, *lead]``.

    ``with_derivatives``: also ``dM/dtheta_k`` for every parameter, ``[k, n, *lead, D, D]``, from the same
    builder call (the shifted angles are stacked beside the real ones), for ``angle_cotangents``."""
    if not with_derivatives:
        return fast_matrix(name, columns, dtype, device)
    return build_stacked(name, torch.stack(list(columns)), dtype, device, True)


def build_stacked(name: str, stacked: torch.Tensor, dtype, device, with_derivatives: bool = False):
    """``build`` from the columns stacked, ``[k, n, *lead]``: (matrices, derivatives or None)."""
    if not with_derivatives:
        if name == "Rot":
            return rot_stacked(stacked.unsqueeze(0), dtype)[0], None
        return fast_matrix(name, list(stacked.unbind(0)), dtype, device), None
    if name in _HALF_PARTS and stacked.shape[0] == 1:
        every = _half_stacked(name, stacked, dtype)  # row 1 is dM/dtheta already
        return every[0], every[1:]
    (shift, factor), fixed = SHIFT_RULES[name]
    k = stacked.shape[0]
    shifts = _shifts(k, shift, stacked.dtype, stacked.device, stacked.ndim - 1)
    angles = stacked + shifts  # [1 + k (which shifted), k, n, *lead]
    if name == "Rot":  # the factor folded into the shifted rows' sign table: dM is every[1:] as it is
        every = rot_stacked(angles, dtype, derivative_rows=factor)
        return every[0], every[1:]
    else:
        every = fast_matrix(name, list(angles.unbind(1)), dtype, device)  # [1 + k, n, *lead, D, D]
    dm = every[1:]
    if fixed:
        dm = dm.clone()
        at = literal(fixed, dm.device, torch.long)  # (a Python list index is host data a step)
        dm[..., at, at] -= 1
    if factor != 1.0:
        dm = dm * factor
    return every[0], dm


_ROT: dict = {}


def rot_stacked(angles: torch.Tensor, dtype, derivative_rows: float | None = None) -> torch.Tensor:
    """``Rot(phi, theta, omega)`` matrices ``[L, *rest, 2, 2]`` from ``angles`` ``[L, 3, *rest]`` in ~15 ops (the
    builder's closed form, one op per term, is ~27): the half sums ``a = (phi + omega) / 2``, ``b = (phi - omega)
    / 2``, ``t = theta / 2`` by one product with a 3 x 3 table, their cosines and sines, and every entry's real and
    imaginary part as a signed product of two of them, gathered by index tables. ``derivative_rows``: rows 1..
    come out scaled by it (a shift rule's derivatives, ``build_stacked``) at no op.

    >>> from qhybrid.devices.tensornet._gates import fast_matrix
    >>> p = torch.randn(2, 3, 4, dtype=torch.float64)
    >>> want = torch.stack([fast_matrix("Rot", list(q.unbind(0)), torch.complex128, "cpu") for q in p])
    >>> bool(torch.allclose(rot_stacked(p, torch.complex128), want))
    True
    """
    L, rest = angles.shape[0], angles.shape[2:]
    key = (angles.dtype, str(angles.device), L if derivative_rows is not None else None, derivative_rows)
    hit = _ROT.get(key)
    if hit is None:
        mix = torch.tensor([[0.5, 0.0, 0.5], [0.5, 0.0, -0.5], [0.0, 0.5, 0.0]], dtype=angles.dtype)
        sign = torch.tensor([1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0], dtype=angles.dtype)
        # rows of Y = (cos a, cos b, cos t, sin a, sin b, sin t): (re, im) of entries 00, 01, 10, 11
        first, second = torch.tensor([0, 3, 1, 4, 1, 4, 0, 3]), torch.tensor([2, 2, 5, 5, 5, 5, 2, 2])
        if derivative_rows is not None:  # rows 1.. scaled (``build_stacked``'s shift-rule factor), free
            sign = torch.stack([sign] + [sign * derivative_rows] * (L - 1))[:, None, :]
        hit = _ROT[key] = tuple(t.to(angles.device) for t in (mix[:, :, None], sign, first, second))
    mix, sign, first, second = hit
    x = (mix * angles.reshape(L, 1, 3, -1)).sum(2)  # [L, 3, R]: a, b, t
    y = torch.cat([torch.cos(x), torch.sin(x)], 1).transpose(1, 2)  # [L, R, 6]
    parts = y.index_select(2, first) * y.index_select(2, second) * sign  # [L, R, 8], contiguous
    m = torch.view_as_complex(parts.view(L, *rest, 2, 2, 2))
    return m if m.dtype == dtype else m.to(dtype)


_HALF_PARTS = {
    "RX": ((1, 0, 0, 0, 0, 0, 1, 0), (0, 0, 0, -1, 0, -1, 0, 0)),
    "RY": ((1, 0, 0, 0, 0, 0, 1, 0), (0, 0, -1, 0, 1, 0, 0, 0)),
    "RZ": ((1, 0, 0, 0, 0, 0, 1, 0), (0, -1, 0, 0, 0, 0, 0, 1)),
}
"""Per one-angle half-angle rotation: its entries' (re, im) parts, row-major, from (cos t, sin t) (t = theta/2)."""

_HALF: dict = {}


def _half_stacked(name: str, stacked: torch.Tensor, dtype) -> torch.Tensor:
    """``[2, n, *lead, 2, 2]``: ``M(theta)`` and ``dM/dtheta = M(theta + pi) / 2`` of a one-angle half-angle rotation
    from ``stacked`` ``[1, n, *lead]`` in 7 ops (``fast_matrix`` and the shift, 14): ``(r cos t, r sin t)`` for
    ``t = theta / 2 + (0, pi / 2)`` and ``r = (1, 1/2)`` as one ``polar``, the entries one GEMM with a 2 x 8 sign
    table.

    >>> t = torch.randn(1, 3, dtype=torch.float64)
    >>> from qhybrid.devices.tensornet._gates import fast_matrix
    >>> bool(torch.allclose(_half_stacked("RX", t, torch.complex128)[0], fast_matrix("RX", [t[0]], torch.complex128, "cpu")))
    True
    """
    key = (name, stacked.dtype, str(stacked.device), stacked.ndim)
    hit = _HALF.get(key)
    if hit is None:
        trailing = (1,) * (stacked.ndim - 1)
        shift = torch.tensor([0.0, math.pi / 2], dtype=stacked.dtype).view(2, 1, *trailing)
        scale = torch.tensor([1.0, 0.5], dtype=stacked.dtype).view(2, 1, *trailing)
        table = torch.tensor(_HALF_PARTS[name], dtype=stacked.dtype)
        hit = _HALF[key] = tuple(t.to(stacked.device) for t in (shift, scale, table))
    shift, scale, table = hit
    t = torch.add(shift, stacked, alpha=0.5)  # [2, 1, n, *lead]
    cs = torch.view_as_real(torch.polar(scale, t))  # (r cos t, r sin t)
    parts = torch.mm(cs.view(-1, 2), table)  # [2 n lead, 8]: (re, im) of the four entries
    m = torch.view_as_complex(parts.view(2, *stacked.shape[1:], 2, 2, 2))
    return m if m.dtype == dtype else m.to(dtype)


_SHIFTS: dict = {}


def _shifts(k: int, shift: float, dtype, device, trailing: int = 0) -> torch.Tensor:
    """``[1 + k, k, 1 * trailing]``: row 0 zeros, row ``j`` the shift on parameter ``j - 1`` (made once per kind of
    call)."""
    key = (k, shift, dtype, str(device), trailing)
    hit = _SHIFTS.get(key)
    if hit is None:
        hit = torch.zeros(k + 1, k, dtype=dtype, device=device)
        hit[torch.arange(1, k + 1), torch.arange(k)] = shift
        hit = _SHIFTS[key] = hit.reshape(k + 1, k, *(1,) * trailing)
    return hit


def angle_cotangents(dm: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    """``dL/dtheta_k = Re(sum(conj(g) * dM/dtheta_k))`` for every parameter, from ``g`` (the cotangent of the
    matrices) and ``dm`` (the derivatives ``build`` gave)."""
    return list(angle_cotangents_stacked(dm, g).unbind(0))


def angle_cotangents_stacked(dm: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``angle_cotangents`` as one ``[k, n, *lead]`` tensor."""
    prod = torch.view_as_real(dm) * torch.view_as_real(g.resolve_conj())  # g broadcasts over dm's leading k
    return prod.sum((-1, -2, -3))

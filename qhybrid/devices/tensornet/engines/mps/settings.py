"""What ``method="mps"`` runs with, and what its last execution discarded."""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field

import torch

from .....errors import QhybridWarning

DEFAULT_CUTOFF = {torch.complex128: 1e-12, torch.complex64: 1e-5}
"""The relative cutoff of ``cutoff=None``: Schmidt values below this times the largest of their split are
numerically zero and dropped. An exact zero comes out of a split at about eps * s_max * sqrt(size) (1e-15 in
double precision at bond 1024: ``svd.py`` reads the Gram route's values off ``U^H theta``, not off the
eigenvalues, whose zeros sit at 1e-8), so 1e-12 leaves a margin of a thousand and drops a weight below 1e-24 a
value. Keeping the zeros (``cutoff=0``) grows a shallow circuit's bonds to 2**(n/2): 30 wires at depth 10 reached
bond 1024 where the Schmidt ranks are 32. Single precision: zeros at about 1e-6, weight under 1e-10 a value."""

DISCARDED_WEIGHT_WARNING = 1e-2
"""An execution whose summed discarded weight (sum of dropped squared Schmidt coefficients over every
truncation, the largest over the batch) exceeds this is warned about: its numbers are those of a state
whose fidelity with the exact one may be below about 99%."""


class TruncationWarning(QhybridWarning):
    """An MPS execution discarded more weight than ``DISCARDED_WEIGHT_WARNING``."""


@dataclass(frozen=True)
class TruncationReport:
    """Truncation of one device execution (every variant and batch member; worst case over them).

    ``discarded_weight``: summed weight dropped by the truncated SVDs; ``fidelity``: the product over
    truncations of the kept weight, the usual estimate of |<exact|MPS>|^2; ``max_bond``: the largest bond
    dimension reached; ``per_variant``: the discarded weight of each variant (a list of floats, one per batch
    member)."""

    discarded_weight: float
    fidelity: float
    max_bond: int
    per_variant: tuple = ()


class TruncationLog:
    """Where the engine leaves the report of the last execution (the device reads ``last``).

    With bonds fixed by structure (``cutoff=0``, :attr:`MPSSettings.fixed_bonds`) the engine leaves the
    discarded weights and fidelities as device tensors and ``last`` reads them when asked (a steady step then
    reads nothing back: it can be captured as a CUDA graph, and after a replay ``last`` reads the replay's
    numbers, which it never caches); otherwise ``last`` is the report already read."""

    def __init__(self):
        self._report: TruncationReport | None = None
        self._pending: tuple | None = None  # (per_variant tensors, MPSSettings) of a lazy report
        self._warned = False
        self.checked: set = set()  # structures whose first execution was read and checked eagerly

    @property
    def last(self) -> TruncationReport | None:
        if self._pending is None:
            return self._report
        per_variant, settings = self._pending
        rep = _read(per_variant)
        if not self._warned:  # once per execution, however often the report is read
            self._warned = True
            settings.warn_if_lossy(rep, stacklevel=4)  # the line that read it
        return rep

    @last.setter
    def last(self, rep: TruncationReport | None) -> None:
        self._report, self._pending = rep, None

    def leave(self, per_variant: list, settings: "MPSSettings") -> None:
        """Keep one execution's tensors unread (see the class)."""
        self._report, self._pending, self._warned = None, (per_variant, settings), False


def _read(per_variant: list[tuple[torch.Tensor, torch.Tensor, int]]) -> TruncationReport:
    """Per variant (discarded ``[B]``, fidelity ``[B]``, largest bond) read back as one report."""
    rows = [(d.tolist(), f.tolist(), b) for d, f, b in per_variant]
    discarded = max((max(d) for d, _, _ in rows), default=0.0)
    fidelity = min((min(f) for _, f, _ in rows), default=1.0)
    bond = max((b for _, _, b in rows), default=1)
    return TruncationReport(discarded, fidelity, bond, tuple(tuple(d) for d, _, _ in rows))


def _capturing(per_variant: list) -> bool:
    t = per_variant[0][0] if per_variant else None
    return t is not None and t.is_cuda and torch.cuda.is_current_stream_capturing()


@dataclass(frozen=True)
class MPSSettings:
    """``max_bond_dim`` (None: no cap) and ``cutoff`` (singular values below ``cutoff * s_max`` dropped; 0 keeps
    every one); ``default_cutoff``: whether ``cutoff`` is the dtype's :data:`DEFAULT_CUTOFF` (the user gave none)."""

    max_bond_dim: int | None = None
    cutoff: float = 0.0
    default_cutoff: bool = False
    log: TruncationLog = field(default_factory=TruncationLog, compare=False, hash=False)

    @property
    def fixed_bonds(self) -> bool:
        """``cutoff=0``: every bond is decided by the circuit's structure and the cap, ``min(max_bond_dim, the
        dimensions' bound)``, never by singular values; no split or centre move reads a value back, and the
        truncation report is read only when asked (:class:`TruncationLog`). A steady step is then capture-safe.

        >>> mps_settings("mps", 64, 0).fixed_bonds, mps_settings("mps", 64, None).fixed_bonds
        (True, False)
        """
        return self.cutoff == 0

    def report(self, per_variant: list[tuple[torch.Tensor, torch.Tensor, int]], structure=None) -> None:
        """Keep (and warn about) the truncation of one execution: per variant (discarded ``[B]``, fidelity ``[B]``,
        largest bond). With :attr:`fixed_bonds` the tensors stay unread, except on the first execution of each
        ``structure`` (outside a CUDA-graph capture): that one is read and warned about as every execution is
        with a value cutoff; later ones warn when ``last_truncation`` is read."""
        if self.fixed_bonds and (structure in self.log.checked or _capturing(per_variant)):
            self.log.leave(per_variant, self)
            return
        if self.fixed_bonds:
            self.log.checked.add(structure)
        rep = _read(per_variant)
        self.log.last = rep
        self.warn_if_lossy(rep, stacklevel=3)  # run_mps's line, as before

    def warn_if_lossy(self, rep: TruncationReport, stacklevel: int) -> None:
        if rep.discarded_weight > DISCARDED_WEIGHT_WARNING:
            warnings.warn(
                f"method='mps' discarded a weight of {rep.discarded_weight:.3g} (fidelity estimate {rep.fidelity:.3g}) "
                f"at max_bond_dim={self.max_bond_dim}, cutoff={self.cutoff}: results are those of the truncated "
                "state. Raise max_bond_dim for closer numbers (dev.last_truncation has the details).",
                TruncationWarning,
                stacklevel=stacklevel,
            )


METHODS = ("auto", "mps")


def mps_settings(method: str, max_bond_dim, cutoff, dtype: torch.dtype = torch.complex128) -> MPSSettings | None:
    """The device options ``method``, ``max_bond_dim`` and ``cutoff`` checked, as settings (None: exact);
    ``cutoff=None`` is the dtype's :data:`DEFAULT_CUTOFF` (numerically zero Schmidt values dropped).

    >>> s = mps_settings("mps", 64, None)
    >>> s.max_bond_dim, s.cutoff
    (64, 1e-12)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method != "mps":
        if max_bond_dim is not None or cutoff is not None:
            raise ValueError(
                "max_bond_dim and cutoff truncate a matrix product state; they apply to method='mps' only "
                f"(got method={method!r}). Pass method='mps' with them, or drop them."
            )
        return None
    if max_bond_dim is not None and (isinstance(max_bond_dim, bool) or not isinstance(max_bond_dim, numbers.Integral)
                                     or max_bond_dim < 1):
        raise ValueError(f"max_bond_dim must be a positive int or None (no cap), got {max_bond_dim!r}.")
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Real) or not 0 <= cutoff < 1):
        raise ValueError(
            f"cutoff must be a number in [0, 1), None (drop numerically zero Schmidt values) or 0 (keep every one), "
            f"got {cutoff!r}."
        )
    cap = None if max_bond_dim is None else int(max_bond_dim)  # (a numpy integer too)
    if cutoff is None:
        return MPSSettings(cap, DEFAULT_CUTOFF.get(dtype, 1e-12), default_cutoff=True)
    return MPSSettings(cap, float(cutoff))

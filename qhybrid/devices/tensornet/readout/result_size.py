"""Results too large to return whatever the method: a ``qml.state()`` or ``qml.density_matrix`` whose own size is
above ``max_memory`` is refused by its size, with what to measure instead (the state-vector engine's own refusal
would suggest ``method="mps"``, which keeps the state compressed but must write this result out all the same)."""

from __future__ import annotations

from pennylane.measurements import DensityMatrixMP, StateMP

from ....errors import ContractionTooLargeError
from ..engines.network.plan import _fmt_bytes


def result_entries(mp, n_wires: int) -> tuple[str, int] | None:
    """``(what, entries)`` of a state or density-matrix result on ``n_wires`` simulated wires, else None.

    >>> from pennylane import state, density_matrix
    >>> result_entries(state(), 34), result_entries(density_matrix(wires=[0, 1]), 34)
    (('qml.state() of 34 wires (2**34 amplitudes)', 17179869184), ('qml.density_matrix of 2 wires (4**2 entries)', 16))
    """
    if isinstance(mp, DensityMatrixMP):
        k = len(mp.wires) or n_wires
        return f"qml.density_matrix of {k} wires (4**{k} entries)", 1 << (2 * k)
    if isinstance(mp, StateMP):
        return f"qml.state() of {n_wires} wires (2**{n_wires} amplitudes)", 1 << n_wires
    return None


def refuse_unreturnable(measurements, n_wires: int, lead: int, itemsize: int, max_memory: float) -> None:
    """Refuse a state or density-matrix result larger than ``max_memory`` by itself (``lead``: stacked rows
    times batch), before anything is simulated."""
    for mp in measurements:
        found = result_entries(mp, n_wires)
        if found is None:
            continue
        what, entries = found
        need = entries * lead * itemsize
        if need > max_memory:
            rows = f" x {lead} rows" if lead > 1 else ""
            raise ContractionTooLargeError(
                f"{what} is {_fmt_bytes(need)} ({entries} elements{rows} x {itemsize} bytes), above "
                f"max_memory={_fmt_bytes(max_memory)}: "
                "no method returns it (method='mps' keeps the state compressed, but refuses to write this result "
                "out too). Measure expectation values, or probs / density_matrix of a few wires (method='mps' reads "
                "those on wide circuits), or sample with shots; or raise the device's max_memory where the machine "
                "has that much."
            )

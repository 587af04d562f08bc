"""What a ``MixedProgram`` ran, as ``EngineChoice`` entries of ``dev.plan_cache_info().engines``: the density
matrix forward, or the expectation values walked back as observables (``heisenberg``: in the Pauli basis where
``pauli.PauliWalk`` applies, else in the computational basis)."""

from __future__ import annotations

from ..lightcone.choice import EngineChoice
from ..network.plan import _fmt_bytes


def engine_choices(program) -> tuple[EngineChoice, ...]:
    """One entry per way ``program`` ran (the plan's forward pass before its first run)."""
    n = program.n
    what = f"noisy circuit, {n} wires"
    out = []
    if "forward" in program._ran or not program._ran:
        reason = (f"channels need a mixed state (noise='exact'): the 4**{n} density matrix, "
                  f"{_fmt_bytes(program.density_bytes(1))} a row")
        out.append(EngineChoice(what, "density matrix", reason if program._ran else reason + "; not run yet",
                                None, None, None, None))
    if "walk" in program._ran:
        walk = program._pauli_walk
        basis = "Pauli basis" if walk is not None and walk.applies else "computational basis"
        out.append(EngineChoice(what, f"Heisenberg walk ({basis})", "expectation values of Pauli sentences: "
                                "the observables walk back through the circuit to the per-wire stage (where the "
                                "data enter) instead of every sample's density matrix forward", None, None, None, None))
    return tuple(out)

"""The closed classes of a light-cone program planned in one call, before their programs are built.

Each closed class's ``ClosedProgram`` plans its own networks when it is first built, one class after the other,
so each planning call held one costly network and the hyper tier had nothing to spread over the cores. Here, at
the first closed program of a ``ConeProgram``, the networks its engine choices built (one row, nothing stacked)
are planned together, within the sum of the classes' planning shares: the hyper tier plans them in worker
processes (``network/hyper_tier.py``). Each class's own planning then takes its path from this process's memo
(or the path store) without searching again: the trees are those it would have found alone (the tier's trees
depend on the network alone). With ``spread_classes`` a rank runs only its share of the classes, so the classes
are left to plan themselves.
"""

from __future__ import annotations

from ..network.network import BATCH
from ..network.plan import plan_networks


def plan_closed_classes(program) -> None:
    """Plan together the networks of ``program``'s closed classes that have no program yet (once per program)."""
    if program.opts.spread_classes is not False:
        return
    networks, share = [], 0.0
    for c in program.classes:
        built = program._networks.get(id(c))
        if program._closed_class[id(c)] and built and ("closed", id(c), 1) not in program._programs:
            networks.extend(built.values())
            share += program._plan_time[id(c)]
    if len(networks) > 1:
        plan_networks(networks, program.opts.optimizer, share, vary=BATCH)


__all__ = ["plan_closed_classes"]

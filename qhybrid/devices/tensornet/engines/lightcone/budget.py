"""How a structure's planning budget (the device's ``plan_time``) is shared among its closed cone classes.

Each class's network is planned at its first run, within its share. Shares follow the class's network
flops as priced by the engine choice (greedy paths): the search time goes where the flops are, so a
Q100 p=4 program's costliest cone (28% of the greedy flops) gets 28% of the budget and a cheap cone next
to nothing. Every share is at least ``MIN_SHARE_S`` while the budget is positive: a class whose share
rounds to nothing still gets the path search's hyper tier (``network.hyper``), which runs whatever the
budget; a budget of 0 (the user's ``plan_time=0``) means greedy paths only.

>>> class C: pass
>>> a, b = C(), C()
>>> class Ch:
...     def __init__(self, flops): self.engine, self.network_flops = "closed network", flops
>>> shares = plan_shares([a, b], [Ch(3.0), Ch(1.0)], 1.0, True)
>>> shares[id(a)], shares[id(b)]
(0.75, 0.25)
"""

from __future__ import annotations

MIN_SHARE_S = 1e-3
"""Smallest share of a positive budget (seconds): enough to mark the class as planned with a search."""


def plan_shares(classes, choices, budget: float, searches: bool) -> dict[int, float]:
    """``{id(class): seconds}`` for the closed classes (state-vector classes plan nothing): ``budget``
    split in proportion to each choice's ``network_flops`` (equal parts where a class was not priced);
    ``searches``: whether the device's budget is positive (then every share is at least ``MIN_SHARE_S``)."""
    closed = [(c, ch) for c, ch in zip(classes, choices) if ch.engine == "closed network"]
    if not closed:
        return {}
    weights = [ch.network_flops if ch.network_flops else None for _, ch in closed]
    if any(w is None for w in weights):
        weights = [1.0] * len(closed)
    total = sum(weights)
    floor = MIN_SHARE_S if searches else 0.0
    return {id(c): max(budget * w / total, floor) for (c, _), w in zip(closed, weights)}


__all__ = ["plan_shares", "MIN_SHARE_S"]

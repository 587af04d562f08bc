"""The gate order: every wire sees its gates in circuit order, whatever order the sweep picks."""

import numpy as np

from qhybrid.devices.tensornet.engines.mps.schedule import schedule


def test_order_respects_each_wires_sequence():
    rng = np.random.default_rng(3)
    gates = [tuple(int(w) for w in rng.choice(10, int(rng.integers(2, 4)), replace=False)) for _ in range(80)]
    order = schedule(gates, 10)
    assert sorted(order) == list(range(80))
    for wire in range(10):
        mine = [g for g in range(80) if wire in gates[g]]
        assert [g for g in order if wire in gates[g]] == mine


def test_brickwork_is_swept_back_and_forth():
    n = 8
    layer = [(i, i + 1) for i in range(0, n - 1, 2)] + [(i, i + 1) for i in range(1, n - 1, 2)]
    order = schedule(layer * 2, n)
    first_odd = [layer[j] for j in order[4:7]]
    assert first_odd == [(5, 6), (3, 4), (1, 2)]  # the odd layer starts where the even one ended

"""Fixtures shared by the tensornet device's tests."""

import pytest

from qhybrid.devices.tensornet.engines.network import pathfind


@pytest.fixture
def fresh_planner():
    """The path search's memo and counters emptied before the test, the memo again after it."""
    pathfind.clear_memo()
    pathfind.reset_stats()
    yield pathfind.STATS
    pathfind.clear_memo()

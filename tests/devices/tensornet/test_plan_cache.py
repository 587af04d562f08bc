"""Plans are found once per circuit structure and reused across calls, batches, epochs and shifts."""

import pennylane as qml
import torch

import qhybrid


def _layer(dev, diff_method):
    @qhybrid.qnode(dev, diff_method=diff_method)
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(4), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(4))
        return [qml.expval(qml.Z(i)) for i in range(4)]

    return f


def test_training_loop_hits_after_first_epoch():
    dev = qhybrid.device("tensornet", wires=4)
    f = _layer(dev, "adjoint")
    w = torch.rand(2, 4, 3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    data = torch.rand(3, 8, 4, dtype=torch.float64)  # 3 batches of 8
    for epoch in range(10):
        for xb in data:
            opt.zero_grad()
            torch.stack(f(xb, w)).sum().backward()
            opt.step()
        if epoch == 0:
            after_first = dev.plan_cache_info()
    info = dev.plan_cache_info()
    assert after_first.misses == 1
    assert info.misses == 1 and info.hits == 29 and info.size == 1


def test_values_do_not_change_the_key_but_batch_size_does():
    dev = qhybrid.device("tensornet", wires=4)
    f = _layer(dev, None)
    w = torch.rand(2, 4, 3, dtype=torch.float64)
    f(torch.rand(8, 4), w)
    f(torch.rand(8, 4), torch.rand(2, 4, 3))
    assert dev.plan_cache_info().misses == 1
    f(torch.rand(5, 4), w)
    assert dev.plan_cache_info().misses == 2


def test_parameter_shift_steps_reuse_plans():
    dev = qhybrid.device("tensornet", wires=4)
    f = _layer(dev, "parameter-shift")
    w = torch.rand(1, 4, 3, dtype=torch.float64, requires_grad=True)
    x = torch.rand(2, 4, dtype=torch.float64)
    for _ in range(3):
        torch.stack(f(x, w)).sum().backward()
    info = dev.plan_cache_info()
    assert info.misses == 2  # the forward structure and the stacked shifted structure
    assert info.hits == 4


def test_cache_is_bounded():
    dev = qhybrid.device("tensornet", wires=2, plan_cache_size=2)
    for k in range(4):
        ops = [qml.RX(0.1, 0)] * (k + 1)
        qhybrid.execute([qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0))])], dev, diff_method=None)
    assert dev.plan_cache_info().size == 2


def test_a_new_batch_size_reuses_the_searched_paths(monkeypatch):
    """The batch size is part of the structure key (a new program), but not of the path memo: the second
    batch size searches nothing and takes the paths found for the first."""
    from qhybrid.devices.tensornet import _simulate
    from qhybrid.devices.tensornet.engines.network import pathfind as _pathfind

    monkeypatch.setattr(_simulate, "STATE_MODE_MAX_WIRES", 0)  # closed networks, planned by _pathfind
    monkeypatch.setattr(_pathfind, "FLOP_RATE", 1.0)  # every search pays
    _pathfind.clear_memo()
    stats = _pathfind.reset_stats()
    dev = qhybrid.device("tensornet", wires=4, plan_time=0.2)
    f = _layer(dev, None)
    ref = qml.QNode(_layer_circuit, qml.device("default.qubit", wires=4))
    w = torch.rand(2, 4, 3, dtype=torch.float64)
    for batch in (5, 7):
        x = torch.rand(batch, 4, dtype=torch.float64)
        torch.testing.assert_close(torch.stack(f(x, w)), torch.stack(ref(x, w)), atol=1e-10, rtol=0)
        if batch == 5:
            searched = stats.searches
    assert searched > 0 and dev.plan_cache_info().misses == 2
    assert stats.searches == searched  # no new search for the second batch size
    assert stats.memo_hits == 4  # each of the 4 networks took its remembered path
    _pathfind.clear_memo()


def _layer_circuit(x, w):
    qml.AngleEmbedding(x, wires=range(4), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(4))
    return [qml.expval(qml.Z(i)) for i in range(4)]

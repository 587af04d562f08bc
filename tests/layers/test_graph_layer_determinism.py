"""GraphQLayer(deterministic=True): the first gradient a new layer takes is bitwise the one every later call
and every freshly built layer gives (issue 20, item 10).

Each layer gets a device of its own, so its first call is the first time qhybrid sees its circuits' structure
(as in a fresh process): that call used to run the tape PennyLane's preprocessing returned, and later calls
the cached template with its parameters gathered from the inputs, whose backward sums in another order.
"""

from __future__ import annotations

import networkx as nx
import pytest
import torch

import qhybrid

BATCH = 3  # sample 0 is the structure's first run, samples 1.. already hit the cache
REPEATS = 3


@pytest.fixture(autouse=True)
def _deterministic_algorithms():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


def _layer(kind, output, diff_method, light_cone, nodes):
    torch.manual_seed(0)
    layer = qhybrid.GraphQLayer(
        nx.cycle_graph(nodes) if nodes > 20 else nx.random_regular_graph(3, nodes, seed=3), 2, kind=kind, output=output, n_features=2, deterministic=True,
        diff_method=diff_method, light_cone=light_cone, device=qhybrid.device("tensornet"),
    ).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.uniform_(-2, 2)
    return layer


def _grads(layer, with_weights: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    w = torch.rand(BATCH, layer.graph.n_edges, generator=gen, dtype=torch.float64)
    x = torch.rand(BATCH, layer.graph.n_nodes, 2, generator=gen, dtype=torch.float64)
    w = w.requires_grad_(True) if with_weights else None
    x = x.requires_grad_(True) if layer.kind == "qgnn" else None
    out = layer(w, x)
    cot = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    wrt = [*layer.parameters()] + [t for t in (w, x) if t is not None]
    return [g.clone() for g in torch.autograd.grad((out * cot).sum(), wrt)]


@pytest.mark.parametrize(
    "kind, output, diff_method, light_cone, with_weights, nodes",
    [
        ("qaoa", "edges", "adjoint", False, True, 8),
        ("qaoa", "edges", "adjoint", False, False, 8),
        ("qaoa", "cost", "backprop", False, False, 8),
        ("qaoa", "edges", "parameter-shift", False, True, 8),
        ("qaoa", "edges", "best", True, True, 6),
        ("qgnn", "nodes", "adjoint", False, True, 4),
        # a 24-node ring, wider than the device's state vectors: the device's light cones (stacked
        # classes, shared rows)
        ("qaoa", "edges", "adjoint", "auto", True, 24),
        ("qaoa", "cost", "adjoint", "auto", False, 24),
        ("qgnn", "nodes", "adjoint", "auto", True, 24),
    ],
)
def test_first_gradient_is_bitwise_every_later_one(kind, output, diff_method, light_cone, with_weights, nodes):
    layer = _layer(kind, output, diff_method, light_cone, nodes)
    first = _grads(layer, with_weights)
    later = [_grads(layer, with_weights) for _ in range(REPEATS)]
    fresh_layer = _layer(kind, output, diff_method, light_cone, nodes)
    fresh = _grads(fresh_layer, with_weights)
    for other in [*later, fresh]:
        assert all(torch.equal(a, b) for a, b in zip(first, other)), [
            (a - b).abs().max().item() for a, b in zip(first, other)
        ]

"""GraphQLayer's backward: bitwise-deterministic gradients with ``deterministic=True`` (run to run, a sample
alone vs inside a bigger batch), and no work for inputs that need no gradient (counted, not timed)."""

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.gradients import _execute
from qhybrid.gradients.adjoint_tn import AdjointTN

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here (checked on the lent GPU machine)"),
    ),
]


@pytest.fixture
def deterministic_algorithms(request):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


def det_layer(kind, device, *, light_cone=False, diff_method="adjoint"):
    g = nx.random_regular_graph(3, 8, seed=3)
    layer = qhybrid.GraphQLayer(
        g, 2, kind=kind, output="edges" if kind == "qaoa" else "nodes", n_features=2,
        deterministic=True, light_cone=light_cone, diff_method=diff_method,
        device=qhybrid.device("tensornet", torch_device=device),
    ).double().to(device)
    with torch.no_grad():
        for p in layer.parameters():
            p.uniform_(-2, 2)
    return layer


def batch(layer, n, device, seed=7):
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(n, layer.graph.n_edges, generator=gen, dtype=torch.float64).to(device)
    x = torch.rand(n, layer.graph.n_nodes, 2, generator=gen, dtype=torch.float64).to(device) if layer.kind == "qgnn" else None
    return w, x


def grads(layer, w, x, cot):
    """Gradients of sum(out * cot) for the parameters and the inputs (fresh leaves)."""
    w = w.detach().clone().requires_grad_(True)
    x = None if x is None else x.detach().clone().requires_grad_(True)
    out = layer(w, x)
    wrt = [*layer.parameters(), w] + ([x] if x is not None else [])
    return [g.detach().clone() for g in torch.autograd.grad((out * cot).sum(), wrt)]


def bits_equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.usefixtures("deterministic_algorithms")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind, light_cone", [("qaoa", False), ("qaoa", True), ("qgnn", False)])
def test_deterministic_gradients_bitwise(kind, light_cone, device):
    layer = det_layer(kind, device, light_cone=light_cone)
    w, x = batch(layer, 5, device)
    out_shape = layer(w, x).shape
    cot = torch.randn(out_shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(device)
    first, second = grads(layer, w, x, cot), grads(layer, w, x, cot)
    assert bits_equal(first, second)  # run to run

    n_params = len(list(layer.parameters()))
    per_sample = [grads(layer, w[i : i + 1], None if x is None else x[i : i + 1], cot[i : i + 1]) for i in range(5)]
    # an input's gradient: a sample's row is bitwise the one it gets alone
    for i, alone in enumerate(per_sample):
        for k in range(n_params, len(first)):
            assert torch.equal(first[k][i], alone[k][0])
    # a shared parameter's gradient: the fold, in batch order, of the samples' own gradients
    for k in range(n_params):
        folded = per_sample[0][k]
        for alone in per_sample[1:]:
            folded = folded + alone[k]
        assert torch.equal(first[k], folded)
    # and a loss on one sample only gives, inside the batch, bitwise the gradient it gives alone
    only = torch.zeros_like(cot)
    only[2] = cot[2]
    inside = grads(layer, w, x, only)
    assert bits_equal(inside[:n_params], per_sample[2][:n_params])


@pytest.mark.usefixtures("deterministic_algorithms")
def test_deterministic_parameter_shift_bitwise():
    layer = det_layer("qaoa", "cpu", diff_method="parameter-shift")
    w, _ = batch(layer, 3, "cpu")
    cot = torch.randn(3, layer.graph.n_edges, dtype=torch.float64)
    first = grads(layer, w, None, cot)
    assert bits_equal(first, grads(layer, w, None, cot))
    alone = grads(layer, w[1:2], None, cot[1:2])
    assert torch.equal(first[2][1], alone[2][0])


def test_deterministic_on_cuda_requires_deterministic_algorithms():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here (checked on the lent GPU machine)")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        layer = det_layer("qaoa", "cuda")
        with pytest.raises(RuntimeError, match="use_deterministic_algorithms"):
            layer(*batch(layer, 2, "cuda")[:1])
    finally:
        torch.use_deterministic_algorithms(before)


# --- skipping unneeded gradients ----------------------------------------------------------------


def qgnn(diff_method, dev, n_features=2):
    layer = qhybrid.GraphQLayer(nx.path_graph(4), 1, kind="qgnn", n_features=n_features, diff_method=diff_method, device=dev)
    return layer.double()


def shifted_runs(layer, dev, w, x):
    with qml.Tracker(dev) as tracker:
        layer(w, x).sum().backward()
    return tracker.totals["simulations"]  # circuits run (executions count measurement groups x batch, as on default.qubit)


def test_parameter_shift_skips_node_features_without_grad():
    """Each trainable gate angle costs two shifted circuits; node features that need no gradient cost none."""
    dev = qhybrid.device("tensornet")
    layer = qgnn("parameter-shift", dev)
    n, e = 4, 3
    x = torch.rand(2, n, 2, dtype=torch.float64)
    params = 1 * (2 * e + 2 * n)  # ZZ, XX per edge, RY, RZ per node, in one layer
    assert shifted_runs(layer, dev, None, x) == 1 + 2 * params
    assert shifted_runs(layer, dev, None, x.requires_grad_(True)) == 1 + 2 * (params + 2 * n)


def test_parameter_shift_skips_edge_weights_and_frozen_parameters():
    dev = qhybrid.device("tensornet")
    layer = qhybrid.GraphQLayer(nx.cycle_graph(5), 2, diff_method="parameter-shift", device=dev, output="cost").double()
    w = torch.rand(3, 5, dtype=torch.float64)
    layer.requires_grad_(False)
    with qml.Tracker(dev) as tracker, torch.no_grad():
        layer(w)
    assert tracker.totals["simulations"] == 1  # nothing to differentiate: forward only
    # frozen gamma/beta, weights that need a gradient: only the 2 x 5 cost gates are shifted, not the mixers
    assert shifted_runs(layer, dev, w.requires_grad_(True), None) == 1 + 2 * (2 * 5)
    layer.requires_grad_(True)
    assert shifted_runs(layer, dev, w.detach(), None) == 1 + 2 * (2 * 5 + 2 * 5)


def test_adjoint_differentiates_only_what_needs_a_gradient(monkeypatch):
    seen = []
    original = AdjointTN.forward

    def spy(self, variants, trainable, sources=None):  # elements differentiated, whichever path the call takes
        if sources is None:
            seen.append(sum(v.params[i].numel() for v, t in zip(variants, trainable) for i in t))
        else:
            seen.append(sum(s.numel() for s in sources))
        return original(self, variants, trainable, sources)

    monkeypatch.setattr(AdjointTN, "forward", spy)
    bound = _execute.one_node_results

    def spy_bound(device, variants):  # the one-node path: the inputs it differentiates
        out = bound(device, variants)
        if out is not None:
            needed = {id(x): x for v in variants for x in v.gather.inputs if x.requires_grad}
            seen.append(sum(x.numel() for x in needed.values()))
        return out

    monkeypatch.setattr(_execute, "one_node_results", spy_bound)
    layer = qgnn("adjoint", qhybrid.device("tensornet"), n_features=1)
    x = torch.rand(2, 4, 1, dtype=torch.float64)
    layer(None, x).sum().backward()
    layer(None, x.requires_grad_(True)).sum().backward()
    # the 3 edges x 2 couplings and 4 nodes x 2 rotations, counted per parameter (broadcast over the batch) or
    # per sample; the encoding angles (x) join only when x needs a gradient
    assert seen[0] in (2 * 3 + 4 * 2, 2 * (2 * 3 + 4 * 2)) and seen[1] > seen[0]

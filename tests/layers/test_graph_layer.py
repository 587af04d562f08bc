"""GraphQLayer against default.qubit (both JPCs, both kinds, every output, with and without light cones),
batches of one and of several structures, and its argument checks."""

import networkx as nx
import pennylane as qml
import numpy as np
import pytest
import torch

import qhybrid
from _graph_reference import reference, random_graph
from _lightcone_reference import word_expval

TOL = 1e-10
CASES = [("qaoa", "edges"), ("qaoa", "cost"), ("qgnn", "nodes"), ("qgnn", "edges")]


def make_layer(edges, kind, output, *, n_layers=2, n_features=2, **kw):
    layer = qhybrid.GraphQLayer(edges, n_layers, kind=kind, output=output, n_features=n_features, **kw).double()
    with torch.no_grad():  # random angles everywhere (the QAOA ramp is too tame a test)
        for p in layer.parameters():
            p.uniform_(-3, 3)
    return layer


def inputs(layer, batch, *, weights=True):
    w = torch.rand(batch, layer.graph.n_edges, dtype=torch.float64, requires_grad=True) * 2 if weights else None
    if w is not None:
        w = w.detach().requires_grad_(True)
    x = None
    if layer.kind == "qgnn":
        x = torch.rand(batch, layer.graph.n_nodes, layer.n_features, dtype=torch.float64) * 3
        x.requires_grad_(True)
    return w, x


def check_against_reference(layer, w, x):
    out = layer(w, x)
    if w is None and x is None:
        out = out[None]
    cot = torch.randn_like(out)
    wrt = [*layer.parameters()] + [t for t in (w, x) if t is not None]
    grads = torch.autograd.grad((out * cot).sum(), wrt)
    w_ref = w if w is not None else torch.ones(out.shape[0], layer.graph.n_edges, dtype=torch.float64)
    ref = reference(layer, w_ref, x)
    ref_grads = torch.autograd.grad((ref * cot).sum(), wrt)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=TOL, rtol=0)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=TOL, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("kind, output", CASES)
@pytest.mark.parametrize("light_cone", [False, True])
def test_matches_default_qubit(kind, output, diff_method, light_cone):
    seed = CASES.index((kind, output)) + 4 * light_cone  # a different random graph per case
    layer = make_layer(random_graph(7, 0.35, seed), kind, output, diff_method=diff_method, light_cone=light_cone)
    check_against_reference(layer, *inputs(layer, 2))


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("light_cone", [False, True])
def test_unit_weights_default(diff_method, light_cone):
    """No edge weights: every cost gate shares one angle (the fast, unbroadcast path)."""
    layer = make_layer(random_graph(8, 0.3, 5), "qaoa", "edges", diff_method=diff_method, light_cone=light_cone)
    check_against_reference(layer, None, None)


def test_wide_ring_uses_light_cones():
    """A 30-node ring at p=1: every edge's cone is the same 4-node path (one class, one run), and its values
    are those of an 8-node ring (whose cones are the same path), computed on default.qubit."""
    layer = make_layer(nx.cycle_graph(30), "qaoa", "edges", n_layers=1)
    w = torch.ones(1, 30, dtype=torch.float64)
    out = layer(w)
    plan = layer.plan(layer.graph)
    assert plan.classes is not None and len(plan.classes) == 1 and plan.cone_wires == 4
    small = make_layer(nx.cycle_graph(8), "qaoa", "edges", n_layers=1)
    small.load_state_dict(layer.state_dict())
    ref = reference(small, torch.ones(1, 8, dtype=torch.float64))
    torch.testing.assert_close(out, ref[:, :1].expand(1, 30), atol=TOL, rtol=0)


def test_wide_p2_ladder_matches_light_cone_reference():
    """p=2 on a 2x11 ladder (22 nodes: wider than the device's state vectors) with per-edge weights: the
    device cuts cones of several classes; values and gradients (angles and weights) vs an independent
    light-cone simulation on default.qubit."""
    layer = make_layer(nx.ladder_graph(11), "qaoa", "edges")
    plan = layer.plan(layer.graph)
    assert plan.classes is not None and len(plan.classes) > 1 and plan.cone_wires < 22
    w = (torch.rand(layer.graph.n_edges, dtype=torch.float64) * 2).requires_grad_(True)
    out = layer(w)
    cot = torch.randn_like(out)
    wrt = [layer.gamma, layer.beta, w]
    grads = torch.autograd.grad((out * cot).sum(), wrt)
    blocks = [[qml.Hadamard(i) for i in range(layer.graph.n_nodes)]]
    for l in range(layer.n_layers):
        blocks.append([qml.IsingZZ(2 * layer.gamma[l] * w[e], wires=uv) for e, uv in enumerate(layer.graph.edges)])
        blocks.append([qml.RX(2 * layer.beta[l], wires=i) for i in range(layer.graph.n_nodes)])
    ref = torch.stack([word_expval(blocks, (qml.Z(u) @ qml.Z(v)).pauli_rep.popitem()[0]) for u, v in layer.graph.edges])
    ref_grads = torch.autograd.grad((ref * cot).sum(), wrt)
    torch.testing.assert_close(out, ref, atol=TOL, rtol=0)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=TOL, rtol=0)


def test_wide_qgnn_matches_light_cone_reference():
    """QGNN on a 24-node ring (native IsingXX blocks, which the device's walker commutes gate by gate):
    per-node values and gradients (parameters, weights, features) vs the light-cone reference."""
    layer = make_layer(nx.cycle_graph(24), "qgnn", "nodes", n_layers=2, n_features=2)
    n, e = layer.graph.n_nodes, layer.graph.n_edges
    w = (torch.rand(e, dtype=torch.float64) * 2).requires_grad_(True)
    x = (torch.rand(n, 2, dtype=torch.float64) * 3).requires_grad_(True)
    out = layer(w, x)
    assert layer.plan(layer.graph).cone_wires == 9  # one neighbour further per two-qubit block, each side
    cot = torch.randn_like(out)
    wrt = [layer.coupling, layer.rotation, w, x]
    grads = torch.autograd.grad((out * cot).sum(), wrt)
    gates = (qml.RY, qml.RZ)
    blocks = [[gates[f](x[v, f], wires=v) for v in range(n)] for f in range(2)]
    for l in range(layer.n_layers):
        blocks.append([qml.IsingZZ(layer.coupling[l, k, 0] * w[k], wires=uv) for k, uv in enumerate(layer.graph.edges)])
        blocks.append([qml.IsingXX(layer.coupling[l, k, 1] * w[k], wires=uv) for k, uv in enumerate(layer.graph.edges)])
        blocks.append([qml.RY(layer.rotation[l, v, 0], wires=v) for v in range(n)])
        blocks.append([qml.RZ(layer.rotation[l, v, 1], wires=v) for v in range(n)])
    ref = torch.stack([word_expval(blocks, qml.Z(v).pauli_rep.popitem()[0]) for v in range(n)])
    ref_grads = torch.autograd.grad((ref * cot).sum(), wrt)
    torch.testing.assert_close(out, ref, atol=TOL, rtol=0)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=TOL, rtol=0)


def test_unbatched_shapes_and_dtype():
    layer = qhybrid.GraphQLayer([(0, 1), (1, 2)], 1, output="cost")
    assert layer().shape == () and layer().dtype == torch.float32
    assert layer(torch.ones(2)).shape == ()
    assert layer(torch.ones(5, 2)).shape == (5,)
    q = qhybrid.GraphQLayer([(0, 1), (1, 2)], 1, kind="qgnn")
    assert q(None, torch.rand(3)).shape == (3,)
    assert q(torch.rand(4, 2), torch.rand(4, 3, 1)).shape == (4, 3)


def test_same_structure_batch_is_one_execution():
    dev = qhybrid.device("tensornet")
    layer = make_layer(random_graph(6, 0.5, 3), "qaoa", "edges", device=dev)
    w, _ = inputs(layer, 16)
    with qml.Tracker(dev) as tracker, torch.no_grad():
        out = layer(w)
    assert tracker.totals["batches"] == 1 and tracker.totals["simulations"] == 1  # one broadcast circuit
    assert len(layer._plans) == 1
    with torch.no_grad():
        torch.testing.assert_close(out[3], layer(w[3]), atol=1e-12, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_batch_of_structures_grouped_and_put_back_in_order(diff_method):
    dev = qhybrid.device("tensornet")
    layer = make_layer([(0, 1)], "qaoa", "cost", device=dev, diff_method=diff_method)
    graphs = [random_graph(6, 0.5, 1), random_graph(5, 0.5, 2), random_graph(6, 0.5, 1), nx.path_graph(4)]
    ws = [torch.rand(len(layer.plan(qhybrid.layers._graph_input.as_graph(g)).template.roots), dtype=torch.float64) for g in graphs]
    ws = [w.requires_grad_(True) for w in ws]
    with qml.Tracker(dev) as tracker, torch.no_grad():
        layer(ws, graphs=graphs)
    assert tracker.totals["batches"] == 1 and tracker.totals["simulations"] == 3  # three structures
    outs = layer(ws, graphs=graphs)
    sum(o for o in outs).backward()
    for g, w, o in zip(graphs, ws, outs):
        alone = make_layer(g, "qaoa", "cost")
        alone.load_state_dict(layer.state_dict())
        torch.testing.assert_close(o, reference(alone, w[None])[0], atol=TOL, rtol=0)
    w_ref = [w.detach().clone().requires_grad_(True) for w in ws]
    gamma_ref = torch.zeros(2, dtype=torch.float64)
    for g, w in zip(graphs, w_ref):
        alone = make_layer(g, "qaoa", "cost")
        alone.load_state_dict(layer.state_dict())
        reference(alone, w[None]).sum().backward()
        gamma_ref += alone.gamma.grad
    torch.testing.assert_close(layer.gamma.grad, gamma_ref, atol=TOL, rtol=0)
    for w, r in zip(ws, w_ref):
        torch.testing.assert_close(w.grad, r.grad, atol=TOL, rtol=0)


@pytest.mark.parametrize(
    "graph",
    [
        [(0, 1), (1, 2), (2, 3)],
        torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]]),  # torch_geometric: both directions
        torch.tensor([[0, 1], [1, 2], [2, 3]]),  # [E, 2]
        (torch.tensor([0, 1, 3, 5, 6]), torch.tensor([1, 0, 2, 1, 3, 2])),  # CSC of the symmetric adjacency
        nx.path_graph(4),
    ],
)
def test_graph_forms_agree(graph):
    layer = qhybrid.GraphQLayer(graph, 1)
    assert layer.graph.n_nodes == 4 and layer.graph.edges == ((0, 1), (1, 2), (2, 3))


def test_rustworkx_graph():
    rx = pytest.importorskip("rustworkx")
    g = rx.PyGraph()
    g.add_nodes_from(range(3))
    g.add_edges_from_no_data([(0, 1), (1, 2)])
    assert qhybrid.GraphQLayer(g, 1).graph.edges == ((0, 1), (1, 2))


@pytest.mark.parametrize(
    "graph, error, match",
    [
        ([(0, 0)], ValueError, "self-loop"),
        ([(0, 1.5)], TypeError, "integers"),
        (torch.tensor([[0.0, 1.0], [1.0, 2.0]]), TypeError, "integer"),
        (torch.zeros(3, 3, dtype=torch.long), ValueError, r"\[2, E\]"),
        ("abc", TypeError, "edge list"),
        ((torch.tensor([0, 2]), torch.tensor([1])), ValueError, "CSC offsets"),
    ],
)
def test_bad_graphs_are_refused(graph, error, match):
    with pytest.raises(error, match=match):
        qhybrid.GraphQLayer(graph, 1)


def test_python_weights_take_the_layers_dtype():
    """A list of Python floats was read in torch's default dtype (float32) before a float64 layer used it: 1e-8 off
    (found by a fuzzing helper). Python numbers take the layer's dtype; numpy arrays and tensors keep theirs."""
    w = [0.1234567891234, 0.9876543210987, 0.5555555555555, 0.3141592653589]
    edges = [(0, 1), (1, 2), (0, 2), (2, 3)]
    layer = qhybrid.GraphQLayer(edges, 2, kind="qaoa", output="edges").double()
    with torch.no_grad():
        want = layer(torch.tensor(w, dtype=torch.float64))
        assert torch.equal(layer(w), want) and torch.equal(layer(np.array(w)), want)
        assert qhybrid.GraphQLayer(edges, 2, kind="qaoa", output="edges")(w).dtype == torch.float32


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="kind"):
        qhybrid.GraphQLayer([(0, 1)], 1, kind="gcn")
    with pytest.raises(ValueError, match="output"):
        qhybrid.GraphQLayer([(0, 1)], 1, kind="qgnn", output="cost")
    layer = qhybrid.GraphQLayer([(0, 1), (1, 2)], 1)
    with pytest.raises(ValueError, match="E=2"):
        layer(torch.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        layer(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="qgnn"):
        layer(None, torch.ones(3, 1))
    q = qhybrid.GraphQLayer([(0, 1), (1, 2)], 1, kind="qgnn")
    with pytest.raises(ValueError, match="node features"):
        q()
    with pytest.raises(ValueError, match="own graph"):
        q(graphs=[[(0, 2)]], x=[torch.ones(3, 1)])
    with pytest.raises(ValueError, match="wires"):
        qhybrid.GraphQLayer([(0, 1), (1, 2)], 1, device=qhybrid.device("tensornet", wires=2))()


def test_a_called_layer_pickles_and_saves_and_still_computes(tmp_path):
    """After its first call a layer holds device plans (by weak reference): pickling and ``torch.save`` drop
    those caches, and the loaded layer computes the same value."""
    import pickle

    layer = qhybrid.GraphQLayer([(0, 1), (1, 2), (2, 0)], n_layers=2, output="cost").double()
    expected = layer()
    again = pickle.loads(pickle.dumps(layer))
    torch.testing.assert_close(again(), expected, rtol=0, atol=1e-12)
    torch.save(layer, tmp_path / "layer.pt")
    loaded = torch.load(tmp_path / "layer.pt", weights_only=False)
    torch.testing.assert_close(loaded(), expected, rtol=0, atol=1e-12)

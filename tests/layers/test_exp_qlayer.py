"""ExpQLayer (with the encodings and ansätze it is built from) against default.qubit, plus the nn.Module
contract: dtypes, shapes, errors, state_dict / torch.save, deepcopy and DistributedDataParallel."""

import copy
import math

import numpy as np
import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.layers._encodings import amplitude_state

from _layer_reference import jacobians, reference_qnode
from _autograd_graph import autograd_node_names

N_QUBITS = 3
N_LAYERS = 3
BATCH = 4
ANSATZE = ["strongly-entangling", "basic-entangler", "hardware-efficient"]
CASES = [
    (encoding, ansatz, reupload)
    for encoding in ["angle", "amplitude", "iqp"]
    for ansatz in ANSATZE
    for reupload in [False, True]
    if not (encoding == "amplitude" and reupload)
]


def z_each(wires):
    return [qml.expval(qml.Z(w)) for w in wires]


def features(encoding, n_qubits=N_QUBITS, batch=BATCH, dtype=torch.float64):
    n = 2**n_qubits if encoding == "amplitude" else n_qubits
    x = torch.rand(batch, n, dtype=dtype) * math.pi
    return x.requires_grad_()


def compare(layer, ref, x, tol=1e-10):
    """Outputs and full Jacobians (inputs and weights) of the layer against the reference QNode."""
    out = layer(x)
    w_ref = layer.weight.detach().clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    expected = ref(x_ref, w_ref)
    expected = torch.stack(expected, -1) if isinstance(expected, (list, tuple)) else expected
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=tol, rtol=0)
    jx, jw = jacobians(out, [x, layer.weight])
    jx_ref, jw_ref = jacobians(expected, [x_ref, w_ref])
    torch.testing.assert_close(jx, jx_ref, atol=tol, rtol=0)
    torch.testing.assert_close(jw, jw_ref, atol=tol, rtol=0)


@pytest.mark.parametrize("encoding, ansatz, reupload", CASES)
def test_matches_default_qubit_float64(encoding, ansatz, reupload):
    layer = qhybrid.ExpQLayer(N_QUBITS, N_LAYERS, encoding=encoding, ansatz=ansatz, reupload=reupload).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS), encoding=encoding, ansatz=ansatz, reupload=reupload)
    compare(layer, ref, features(encoding))


@pytest.mark.parametrize("rotation", ["X", "Y", "Z"])
def test_angle_rotations(rotation):
    layer = qhybrid.ExpQLayer(N_QUBITS, 2, rotation=rotation, reupload=True).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS), rotation=rotation, reupload=True)
    compare(layer, ref, features("angle"))


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift", "backprop"])
@pytest.mark.parametrize("encoding", ["angle", "iqp"])
def test_diff_methods(diff_method, encoding):
    layer = qhybrid.ExpQLayer(N_QUBITS, 2, encoding=encoding, diff_method=diff_method, reupload=True).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS), encoding=encoding, reupload=True)
    compare(layer, ref, features(encoding))


def test_custom_observables_and_device_wire_labels():
    labels = ["a", "b", "c"]
    observables = [qml.X("a") @ qml.Z("c"), qml.Y("b"), qml.Z("a") @ qml.Z("b") @ qml.Z("c")]
    dev = qhybrid.device("tensornet", wires=labels)
    layer = qhybrid.ExpQLayer(3, 2, observables=observables, device=dev, reupload=True).double()
    assert layer.out_features == 3 and layer.wires == labels
    ref = reference_qnode(lambda wires: [qml.expval(o) for o in observables], wires=labels, reupload=True)
    compare(layer, ref, features("angle"))


def test_pauli_letter_observables():
    layer = qhybrid.ExpQLayer(N_QUBITS, 1, observables="X").double()
    ref = reference_qnode(lambda wires: [qml.expval(qml.X(w)) for w in wires], wires=range(N_QUBITS))
    compare(layer, ref, features("angle"))


def test_callable_ansatz():
    def ansatz(w, wires):
        for i, wire in enumerate(wires):
            qml.RZ(w[i, 0], wires=wire)
            qml.RX(w[i, 1], wires=wire)
        qml.CNOT(wires=[wires[0], wires[-1]])

    layer = qhybrid.ExpQLayer(N_QUBITS, 2, ansatz=ansatz, weight_shape=(N_QUBITS, 2), reupload=True).double()
    assert layer.weight.shape == (2, N_QUBITS, 2)
    ref = reference_qnode(z_each, wires=range(N_QUBITS), ansatz=ansatz, reupload=True)
    compare(layer, ref, features("angle"))


def test_fewer_angle_features_than_qubits():
    layer = qhybrid.ExpQLayer(N_QUBITS, 2, n_features=2).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS))
    x = (torch.rand(BATCH, 2, dtype=torch.float64) * math.pi).requires_grad_()
    compare(layer, ref, x)


def test_amplitude_pads_and_normalises():
    layer = qhybrid.ExpQLayer(N_QUBITS, 1, encoding="amplitude", n_features=5).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS), encoding="amplitude")
    x = (torch.rand(BATCH, 5, dtype=torch.float64) + 0.1).requires_grad_()
    compare(layer, ref, x)
    torch.testing.assert_close(
        amplitude_state(torch.tensor([3.0, 4.0, 0.0]), 2), torch.tensor([0.6, 0.8, 0.0, 0.0])
    )
    with pytest.raises(ValueError, match="all-zero"):
        layer(torch.zeros(5, dtype=torch.float64))


@pytest.mark.parametrize(
    "encoding, ansatz, reupload",
    [("angle", "strongly-entangling", True), ("iqp", "hardware-efficient", False), ("amplitude", "basic-entangler", False)],
)
def test_float32_path(encoding, ansatz, reupload):
    layer = qhybrid.ExpQLayer(N_QUBITS, 2, encoding=encoding, ansatz=ansatz, reupload=reupload)
    assert layer.weight.dtype == torch.float32
    x = features(encoding, dtype=torch.float32)
    out = layer(x)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert x.grad.dtype == torch.float32 and layer.weight.grad.dtype == torch.float32

    ref = reference_qnode(z_each, wires=range(N_QUBITS), encoding=encoding, ansatz=ansatz, reupload=reupload)
    x64 = x.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    expected = torch.stack(ref(x64, w64), -1)
    expected.sum().backward()
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(layer.weight.grad.double(), w64.grad, atol=1e-5, rtol=0)


def test_sits_between_linear_layers_in_float32():
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), qhybrid.ExpQLayer(4, 2), torch.nn.Linear(4, 2))
    x = torch.randn(8, 6)
    out = model(x)
    assert out.shape == (8, 2) and out.dtype == torch.float32
    out.pow(2).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_shapes_unbatched_and_extra_batch_axes():
    layer = qhybrid.ExpQLayer(N_QUBITS, 2).double()
    x = torch.rand(2, 5, N_QUBITS, dtype=torch.float64)
    out = layer(x)
    assert out.shape == (2, 5, N_QUBITS)
    torch.testing.assert_close(layer(x[1, 3]), out[1, 3], atol=1e-12, rtol=0)
    assert layer(x[0, 0]).shape == (N_QUBITS,)
    empty = layer(torch.rand(0, N_QUBITS, dtype=torch.float64))
    assert empty.shape == (0, N_QUBITS)
    empty.sum().backward()


def test_weight_shapes_and_initialisation():
    assert qhybrid.ExpQLayer(4, 2).weight.shape == (2, 4, 3)
    assert qhybrid.ExpQLayer(4, 2, ansatz="basic-entangler").weight.shape == (2, 4)
    assert qhybrid.ExpQLayer(4, 2, ansatz="hardware-efficient").weight.shape == (2, 4)
    w = qhybrid.ExpQLayer(6, 50).weight
    assert isinstance(w, torch.nn.Parameter)
    assert 0.0 <= w.min() and w.max() < 2 * math.pi and w.std() > 1.0


def test_wrong_feature_count_names_both_sizes():
    layer = qhybrid.ExpQLayer(4, 1)
    with pytest.raises(ValueError, match=r"expects 4 input features.*got 3 features"):
        layer(torch.rand(5, 3))
    with pytest.raises(ValueError, match="expects 4"):
        layer(torch.tensor(1.0))
    amp = qhybrid.ExpQLayer(2, 1, encoding="amplitude")
    with pytest.raises(ValueError, match=r"expects 4 input features.*got 2 features"):
        amp(torch.rand(2))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"encoding": "basis"}, ValueError, "Unknown encoding 'basis'"),
        ({"ansatz": "qaoa"}, ValueError, "Unknown ansatz 'qaoa'"),
        ({"ansatz": lambda w, wires: None}, ValueError, "weight_shape="),
        ({"weight_shape": (3,)}, ValueError, "only for a callable ansatz"),
        ({"rotation": "W"}, ValueError, "rotation must be"),
        ({"encoding": "amplitude", "reupload": True}, ValueError, "cannot be re-uploaded"),
        ({"n_features": 4}, ValueError, "n_qubits=3"),
        ({"encoding": "iqp", "n_features": 2}, ValueError, "n_features=2 does not match n_qubits=3"),
        ({"encoding": "amplitude", "n_features": 9}, ValueError, "2\\*\\*n_qubits=8"),
        ({"observables": [qml.Z(5)]}, ValueError, r"wire\(s\) \[5\]"),
        ({"observables": "W"}, ValueError, "'X', 'Y' or 'Z'"),
        ({"observables": ["Z"]}, TypeError, r"observables\[0\]"),
        ({"device": qhybrid.device("tensornet", wires=2)}, ValueError, "device has 2 wires"),
    ],
)
def test_bad_configuration(kwargs, error, match):
    with pytest.raises(error, match=match):
        qhybrid.ExpQLayer(3, 1, **kwargs)


def test_bad_sizes():
    with pytest.raises(ValueError, match="n_qubits must be a positive int"):
        qhybrid.ExpQLayer(0)
    with pytest.raises(ValueError, match="n_layers must be a positive int"):
        qhybrid.ExpQLayer(2, 1.5)


def test_to_dtype_follows_the_weights():
    layer = qhybrid.ExpQLayer(N_QUBITS, 2)
    x = torch.rand(3, N_QUBITS, dtype=torch.float64)
    out32 = layer(x.float())
    layer = layer.to(torch.device("cpu"), torch.float64)
    assert layer.weight.dtype == torch.float64
    assert layer.quantum_device().dtype == torch.complex128
    out64 = layer(x)
    assert out64.dtype == torch.float64
    torch.testing.assert_close(out64.float(), out32, atol=1e-5, rtol=0)


def test_state_dict_round_trip(tmp_path):
    layer = qhybrid.ExpQLayer(N_QUBITS, 2, reupload=True)
    x = torch.rand(4, N_QUBITS)
    expected = layer(x)
    assert list(layer.state_dict()) == ["weight"]

    other = qhybrid.ExpQLayer(N_QUBITS, 2, reupload=True)
    assert not torch.allclose(other(x), expected)
    other.load_state_dict(layer.state_dict())
    torch.testing.assert_close(other(x), expected)

    torch.save(layer.state_dict(), tmp_path / "weights.pt")
    again = qhybrid.ExpQLayer(N_QUBITS, 2, reupload=True)
    again.load_state_dict(torch.load(tmp_path / "weights.pt"))
    torch.testing.assert_close(again(x), expected)


def test_torch_save_whole_module_and_deepcopy(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), qhybrid.ExpQLayer(3, 2), torch.nn.Linear(3, 1))
    x = torch.rand(4, 3)
    expected = model(x)
    torch.save(model, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    torch.testing.assert_close(loaded(x), expected)
    torch.testing.assert_close(copy.deepcopy(model)(x), expected)


def test_distributed_data_parallel_one_process(tmp_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        model = torch.nn.Sequential(qhybrid.ExpQLayer(3, 2), torch.nn.Linear(3, 1))
        ddp = DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        x, y = torch.rand(8, 3), torch.rand(8, 1)
        before = model[0].weight.detach().clone()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        reference = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), model[0].weight)[0]
        torch.testing.assert_close(model[0].weight.grad, reference)
        opt.step()
        assert not torch.equal(model[0].weight, before)
    finally:
        dist.destroy_process_group()


def test_repr_names_the_configuration():
    text = repr(qhybrid.ExpQLayer(2, 1, encoding="iqp", ansatz="hardware-efficient", reupload=True))
    assert "IQPEncoding" in text and "HardwareEfficient" in text and "reupload=True" in text


def test_training_step_reduces_loss():
    model = torch.nn.Sequential(qhybrid.ExpQLayer(2, 2, reupload=True), torch.nn.Linear(2, 1))
    x = torch.rand(16, 2) * math.pi
    y = torch.sin(x.sum(-1, keepdim=True))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def test_nan_inputs_are_refused_with_their_rows():
    layer = qhybrid.ExpQLayer(3, 1)
    x = torch.rand(6, 3)
    x[2, 1] = float("nan")
    x[4, 0] = float("inf")
    with pytest.raises(ValueError, match=r"input rows \[2, 4\] \(of 6\) contain NaN or inf"):
        layer(x)
    unchecked = qhybrid.ExpQLayer(3, 1, check_finite=False)
    assert torch.isnan(unchecked(x)[2]).any()  # what the check prevents: silent NaN results


def test_nan_weights_are_refused():
    layer = qhybrid.ExpQLayer(2, 1)
    with torch.no_grad():
        layer.weight[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"weight holds NaN or inf \(at \[\[0, 1, 2\]\]\)"):
        layer(torch.rand(3, 2))




@pytest.mark.parametrize("encoding, ansatz, reupload", CASES)
def test_repeat_calls_match_default_qubit(encoding, ansatz, reupload):
    """Later calls reuse the layer's trace (new inputs and updated weights gathered into the cached
    circuit): still default.qubit's values and Jacobians, and one trace for one input shape."""
    layer = qhybrid.ExpQLayer(N_QUBITS, N_LAYERS, encoding=encoding, ansatz=ansatz, reupload=reupload).double()
    ref = reference_qnode(z_each, wires=range(N_QUBITS), encoding=encoding, ansatz=ansatz, reupload=reupload)
    opt = torch.optim.SGD(layer.parameters(), lr=0.3)
    for _ in range(2):
        layer(features(encoding)).sum().backward()
        opt.step()
        opt.zero_grad()
    compare(layer, ref, features(encoding))
    (qnode,) = layer._qnodes.values()
    assert qnode._static.traces == 1


def test_a_layer_step_records_one_node_for_the_circuit():
    """The graph of a repeat step: the user's leaves, ONE node for the circuit, the layer's stack of the
    outputs; no gate-building ops recorded (they run inside the node)."""
    layer = qhybrid.ExpQLayer(4, 2).double()
    x = torch.rand(6, 4, dtype=torch.float64, requires_grad=True)
    layer(x)
    out = layer(x)
    names = autograd_node_names(out.sum())
    assert sorted(names) == ["AccumulateGrad", "AccumulateGrad", "BoundNodeBackward", "StackBackward0", "SumBackward0"]
    out.sum().backward()
    assert x.grad is not None and layer.weight.grad is not None


def test_repeat_calls_float32_in_float32_out():
    layer = qhybrid.ExpQLayer(N_QUBITS, 2)
    ref_layer = copy.deepcopy(layer).double()
    for _ in range(3):
        x = torch.rand(5, N_QUBITS, requires_grad=True)
        out = layer(x)
        assert out.dtype == torch.float32
        out.sum().backward()
        assert x.grad.dtype == torch.float32 and layer.weight.grad.dtype == torch.float32
    want = ref_layer(x.detach().double())
    torch.testing.assert_close(out.detach().double(), want.detach(), atol=1e-5, rtol=0)


def test_changed_settings_retrace():
    """A setting changed after construction is part of the trace's key: the next call traces anew."""
    layer = qhybrid.ExpQLayer(N_QUBITS, 2).double()
    x = features("angle")
    layer(x)
    layer.observables = [qml.X(w) for w in layer.wires]
    ref = reference_qnode(lambda wires: [qml.expval(qml.X(w)) for w in wires], wires=range(N_QUBITS), encoding="angle", ansatz="strongly-entangling", reupload=False)
    layer(x)
    compare(layer, ref, x)


def test_an_encoding_changed_in_place_retraces():
    """The trace was keyed by the encoding's identity alone: ``layer.encoding.rotation = "X"`` after a first call kept
    running the ``"Y"`` circuit, silently (found by a fuzzing helper)."""
    layer = qhybrid.ExpQLayer(N_QUBITS, 2).double()
    x = features("angle")
    layer(x)
    layer.encoding.rotation = "X"
    ref = reference_qnode(lambda wires: [qml.expval(qml.Z(w)) for w in wires], wires=range(N_QUBITS), encoding="angle", rotation="X", ansatz="strongly-entangling", reupload=False)
    compare(layer, ref, x)


@pytest.mark.parametrize("ansatz", ANSATZE)
@pytest.mark.parametrize("encoding", ["angle", "amplitude"])
def test_one_qubit(encoding, ansatz):
    """One wire: the strongly-entangling ansatz asked PennyLane for a CNOT range of 0, refused on every forward
    ("Ranges must not be zero"; found by a fuzzing helper)."""
    layer = qhybrid.ExpQLayer(1, 2, encoding=encoding, ansatz=ansatz).double()
    ref = reference_qnode(z_each, wires=range(1), encoding=encoding, ansatz=ansatz)
    compare(layer, ref, features(encoding, n_qubits=1))

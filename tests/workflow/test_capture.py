"""capture="cuda-graph" on ExpQLayer / QLayer / TorchLayer / qnode: clear errors where capture cannot work
(decided at construction where the device is known, else at the first call), the call-key logic (a new
shape or structure captures anew, a seen one replays), and on a GPU captured results and gradients equal
to uncaptured ones."""

from __future__ import annotations

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.workflow import _capture
from qhybrid.errors import CaptureError

N = 3


def _circuit(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(N), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(N))
    return [qml.expval(qml.Z(i)) for i in range(N)]


def _builders(capture, **kw):
    dev = qhybrid.device("tensornet", wires=N, **kw)
    return {
        "ExpQLayer": lambda: qhybrid.ExpQLayer(N, 2, capture=capture),
        "QLayer": lambda: qhybrid.QLayer(N, 2, capture=capture),
        "TorchLayer": lambda: qhybrid.TorchLayer(qhybrid.qnode(dev)(_circuit), {"w": (2, N, 3)}, capture=capture),
        "qnode": lambda: qhybrid.qnode(dev, capture=capture)(_circuit),
    }


@pytest.mark.parametrize("what", ["ExpQLayer", "QLayer", "TorchLayer", "qnode"])
def test_unknown_capture_mode_is_refused(what):
    with pytest.raises(ValueError, match="capture must be None or 'cuda-graph', got 'cuda'"):
        _builders("cuda")[what]()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given on a machine without CUDA")
@pytest.mark.parametrize("what", ["ExpQLayer", "QLayer", "TorchLayer", "qnode"])
def test_without_cuda_capture_is_refused_at_construction(what):
    with pytest.raises(CaptureError, match=r"needs a CUDA GPU.*capture=None\) to run uncaptured"):
        _builders("cuda-graph")[what]()


@pytest.fixture
def cuda_claimed(monkeypatch):
    """As if CUDA were present: what is refused then comes from the device, the gradient method or the
    call's tensors."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("what", ["TorchLayer", "qnode"])
def test_a_cpu_device_is_refused_at_construction(cuda_claimed, what):
    with pytest.raises(CaptureError, match="its device runs on cpu; create the device with torch_device='cuda'"):
        _builders("cuda-graph", torch_device="cpu")[what]()
    dev = qhybrid.device("tensornet", wires=N, torch_device="cpu")
    with pytest.raises(CaptureError, match="its device runs on cpu"):
        qhybrid.ExpQLayer(N, device=dev, capture="cuda-graph")


def test_parameter_shift_is_refused_at_construction(cuda_claimed):
    dev = qhybrid.device("tensornet", wires=N)
    with pytest.raises(CaptureError, match="parameter-shift.*cannot be captured"):
        qhybrid.qnode(dev, diff_method="parameter-shift", capture="cuda-graph")(_circuit)
    with pytest.raises(CaptureError, match="parameter-shift"):
        qhybrid.ExpQLayer(N, diff_method="parameter-shift", capture="cuda-graph")


@pytest.mark.parametrize("what", ["ExpQLayer", "QLayer", "TorchLayer", "qnode"])
def test_cpu_inputs_are_refused_at_the_first_call(cuda_claimed, what):
    f = _builders("cuda-graph")[what]()
    x = torch.rand(4, N, dtype=torch.float64)
    call = (lambda: f(x, torch.rand(2, N, 3, dtype=torch.float64))) if what == "qnode" else (lambda: f(x))
    with pytest.raises(CaptureError, match="tensor argument 0 is on cpu; move the inputs and the module to the GPU"):
        call()


@pytest.fixture
def eager_capture(monkeypatch):
    """Capture replaced by the eager function (CPU tensors allowed): the key logic and the argument
    wiring (parameters bound by name, keyword arguments, non-tensor arguments) run on any machine."""
    made = []

    def fake(self, fn, tensors):
        self.running = True  # as during a real capture: the owner runs its eager code
        try:
            fn(*tensors)
        finally:
            self.running = False
        self.captures += 1
        made.append(tuple(t.shape for t in tensors))

        def replay(*args):
            self.running = True
            try:
                return fn(*args)
            finally:
                self.running = False

        return replay

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_capture.Graphs, "_check_tensors", lambda self, tensors: None)
    monkeypatch.setattr(_capture.Graphs, "_capture", fake)
    return made


def test_layers_recapture_on_a_new_shape_and_keep_gradients(eager_capture):
    torch.manual_seed(0)
    plain = qhybrid.ExpQLayer(N, 2).double()
    graphed = qhybrid.ExpQLayer(N, 2, capture="cuda-graph").double()
    graphed.load_state_dict(plain.state_dict())
    for batch in (4, 4, 6, 4):
        x = torch.rand(batch, N, dtype=torch.float64, requires_grad=True)
        want = plain(x)
        (gx, gw) = torch.autograd.grad(want.square().sum(), (x, plain.weight))
        x2 = x.detach().clone().requires_grad_()
        got = graphed(x2)
        (hx, hw) = torch.autograd.grad(got.square().sum(), (x2, graphed.weight))
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        torch.testing.assert_close(hx, gx, atol=1e-12, rtol=0)
        torch.testing.assert_close(hw, gw, atol=1e-12, rtol=0)
    assert graphed._graphs.captures == 2 and eager_capture[0] == ((4, N), (2, N, 3))


def test_torch_layer_and_qnode_wiring(eager_capture):
    dev = qhybrid.device("tensornet", wires=N)
    layer = qhybrid.TorchLayer(qhybrid.qnode(dev)(_circuit), {"w": (2, N, 3)}, capture="cuda-graph").double()
    plain = qhybrid.TorchLayer(qhybrid.qnode(dev)(_circuit), {"w": (2, N, 3)}).double()
    plain.load_state_dict(layer.state_dict())
    x = torch.rand(5, N, dtype=torch.float64)
    torch.testing.assert_close(layer(x), plain(x), atol=1e-12, rtol=0)
    layer(x).sum().backward()
    plain(x).sum().backward()
    torch.testing.assert_close(layer.w.grad, plain.w.grad, atol=1e-12, rtol=0)

    def scaled(inputs, w, scale=1.0):
        qml.AngleEmbedding(scale * inputs, wires=range(N), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(N))
        return qml.expval(qml.Z(0))

    qn = qhybrid.qnode(dev, capture="cuda-graph")(scaled)
    ref = qhybrid.qnode(dev)(scaled)
    w = torch.rand(2, N, 3, dtype=torch.float64)
    for scale in (1.0, 2.0, 1.0):  # a non-tensor argument decides the circuit: part of the key
        torch.testing.assert_close(qn(x, w, scale=scale), ref(x, w, scale=scale), atol=1e-12, rtol=0)
    assert qn._graphs.captures == 2
    with pytest.raises(CaptureError, match="must be hashable"):
        qn(x, w, scale=[1.0])


def test_graphs_are_bounded(eager_capture):
    g = _capture.Graphs("f", max_graphs=2)
    for n in (1, 2, 3, 1):
        g.call(lambda t: t * 2, (torch.ones(n),))
    assert g.captures == 4 and len(g._graphs) == 2  # the first shape was dropped, so captured again


# --- on a GPU: the real capture ------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("what", ["ExpQLayer", "TorchLayer"])
def test_captured_layer_equals_uncaptured(what):
    torch.manual_seed(0)
    dev = qhybrid.device("tensornet", wires=N)
    make = {
        "ExpQLayer": lambda c: qhybrid.ExpQLayer(N, 2, capture=c),
        "TorchLayer": lambda c: qhybrid.TorchLayer(qhybrid.qnode(dev)(_circuit), {"w": (2, N, 3)}, capture=c),
    }[what]
    plain, graphed = make(None).double().cuda(), make("cuda-graph").double().cuda()
    graphed.load_state_dict(plain.state_dict())
    for batch in (8, 8, 16, 8):  # new values each call; a new batch size captures anew
        x = torch.rand(batch, N, dtype=torch.float64, device="cuda", requires_grad=True)
        want = plain(x)
        grads = torch.autograd.grad(want.square().sum(), (x, *plain.parameters()))
        x2 = x.detach().clone().requires_grad_()
        got = graphed(x2)
        got_grads = torch.autograd.grad(got.square().sum(), (x2, *graphed.parameters()))
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        for a, b in zip(got_grads, grads):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    assert graphed._graphs.captures == 2


@pytest.mark.gpu
def test_captured_qnode_equals_uncaptured():
    dev = qhybrid.device("tensornet", wires=N)
    qn, ref = qhybrid.qnode(dev, capture="cuda-graph")(_circuit), qhybrid.qnode(dev)(_circuit)
    g = torch.Generator().manual_seed(1)
    for batch in (8, 8, 4):
        x = torch.rand(batch, N, generator=g, dtype=torch.float64).cuda()
        w = torch.rand(2, N, 3, generator=g, dtype=torch.float64).cuda().requires_grad_()
        got = torch.stack(list(qn(x, w)))
        (gw,) = torch.autograd.grad(got.sum(), (w,))
        want = torch.stack(list(ref(x, w)))
        (hw,) = torch.autograd.grad(want.sum(), (w,))
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        torch.testing.assert_close(gw, hw, atol=1e-12, rtol=0)
    assert qn._graphs.captures == 2


@pytest.mark.parametrize("static_structure", [True, False])
def test_a_torch_layer_keeps_the_graphs_of_a_captured_qnode(eager_capture, static_structure):
    """A qnode built with capture="cuda-graph" inside a TorchLayer (whose static traces are the qnode's, or
    its traced copy's) is still replayed from its graphs: one capture per call shape."""
    dev = qhybrid.device("tensornet", wires=N)
    layer = qhybrid.TorchLayer(
        qhybrid.qnode(dev, capture="cuda-graph")(_circuit), {"w": (2, N, 3)}, static_structure=static_structure
    ).double()
    plain = qhybrid.TorchLayer(qhybrid.qnode(dev)(_circuit), {"w": (2, N, 3)}).double()
    plain.load_state_dict(layer.state_dict())
    for batch in (5, 5, 3):
        x = torch.rand(batch, N, dtype=torch.float64)
        got, want = layer(x), plain(x)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        (g,) = torch.autograd.grad(got.square().sum(), layer.w)
        (h,) = torch.autograd.grad(want.square().sum(), plain.w)
        torch.testing.assert_close(g, h, atol=1e-12, rtol=0)
    assert layer._run._graphs.captures == 2

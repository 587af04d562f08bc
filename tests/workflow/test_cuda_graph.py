"""qhybrid.cuda_graph: the forward and backward of a step captured as CUDA graphs and replayed give what
default.qubit gives, call after call with new inputs (GPU); clear errors where capture is impossible."""

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import CaptureError

TOL = 1e-10
N, L, B = 4, 2, 16


def _circuit(x, w):
    qml.AngleEmbedding(x, wires=range(N), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(N))
    return [qml.expval(qml.Z(i)) for i in range(N)] + [qml.expval(qml.X(0) @ qml.Y(2))]


def _reference(x, w):
    qn = qml.QNode(_circuit, qml.device("default.qubit", wires=N), interface="torch", diff_method="backprop")
    x, w = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
    out = torch.stack(list(qn(x, w)))
    weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype)[:, None]
    gx, gw = torch.autograd.grad((out * weights).sum(), (x, w))
    return out.detach(), gx, gw


@pytest.mark.gpu
def test_captured_qnode_replays_match_default_qubit():
    dev = qhybrid.device("tensornet", wires=N)
    qn = qhybrid.qnode(dev, diff_method="adjoint")(_circuit)
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(B, N, generator=g, dtype=torch.float64) * 3).cuda().requires_grad_()
    w = (torch.rand(L, N, 3, generator=g, dtype=torch.float64) * 6).cuda().requires_grad_()
    step = qhybrid.cuda_graph(lambda x, w: torch.stack(list(qn(x, w))), (x, w))
    for _ in range(3):  # new values in the same buffers' shapes: every replay must see them
        x = (torch.rand(B, N, generator=g, dtype=torch.float64) * 3).cuda().requires_grad_()
        w = (torch.rand(L, N, 3, generator=g, dtype=torch.float64) * 6).cuda().requires_grad_()
        out = step(x, w)
        weights = torch.linspace(0.5, 1.5, out.shape[0], dtype=out.dtype, device="cuda")[:, None]
        gx, gw = torch.autograd.grad((out * weights).sum(), (x, w))
        want, hx, hw = _reference(x, w)
        torch.testing.assert_close(out.detach().cpu(), want, atol=TOL, rtol=0)
        torch.testing.assert_close(gx.cpu(), hx, atol=TOL, rtol=0)
        torch.testing.assert_close(gw.cpu(), hw, atol=TOL, rtol=0)


@pytest.mark.gpu
def test_captured_layer_trains_like_the_eager_layer():
    torch.manual_seed(0)
    eager = qhybrid.ExpQLayer(N, L).double().cuda()
    captured = qhybrid.ExpQLayer(N, L).double().cuda()
    captured.load_state_dict(eager.state_dict())
    x = torch.rand(B, N, dtype=torch.float64, device="cuda")
    step = qhybrid.cuda_graph(captured, (x,))
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(captured.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.rand(B, N, dtype=torch.float64, device="cuda")
        for model, opt in ((eager, opt_e), (step, opt_c)):
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()
        torch.testing.assert_close(captured.weight.detach(), eager.weight.detach(), atol=TOL, rtol=0)


@pytest.mark.gpu
def test_host_arguments_are_refused_by_name():
    qn = qhybrid.qnode(qhybrid.device("tensornet", wires=N), diff_method="adjoint")(_circuit)
    x = torch.rand(B, N, dtype=torch.float64, device="cuda")
    with pytest.raises(ValueError, match=r"sample_args\[1\] is on cpu"):
        qhybrid.cuda_graph(qn, (x, torch.rand(L, N, 3, dtype=torch.float64)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given on a machine without a GPU")
def test_without_a_gpu_capture_is_refused():
    with pytest.raises(CaptureError, match="needs a CUDA GPU"):
        qhybrid.cuda_graph(lambda x: x, (torch.zeros(1),))


class _OnCuda(torch.Tensor):
    """A CPU tensor that says it is on CUDA: the argument checks pass and capture itself is faked."""

    @property
    def is_cuda(self):
        return True


@pytest.mark.parametrize("fails", [False, True])
def test_the_collector_is_off_during_capture_and_back_after(monkeypatch, fails):
    """Python's collector must not run mid-capture (it can free an earlier capture's graphs, which invalidates the
    capture): off while ``make_graphed_callables`` runs, as it was afterwards, even when capture fails."""
    import gc

    seen = []

    def capture(fn, args, num_warmup_iters):
        seen.append(gc.isenabled())
        if fails:
            raise RuntimeError("operation not permitted when stream is capturing")
        return fn

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", capture)
    x = torch.Tensor._make_subclass(_OnCuda, torch.zeros(2))
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            if fails:
                with pytest.raises(CaptureError, match="could not capture"):
                    qhybrid.cuda_graph(lambda t: t, (x,))
            else:
                qhybrid.cuda_graph(lambda t: t, (x,))
            assert gc.isenabled() == enabled
        finally:
            gc.enable()
    assert seen == [False, False]

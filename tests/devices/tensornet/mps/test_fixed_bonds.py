"""method="mps" with cutoff=0 decides every bond from the circuit's structure and the cap (issue 39): a steady value +
gradient step reads nothing back to the host (so it can be captured as a CUDA graph), its truncation report is
read only when asked, and its numbers are those of the value-reading code: default.qubit's where nothing is cut,
the same truncated state where the cap cuts."""

import warnings

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.devices.tensornet.engines.mps import qr, state
from qhybrid.devices.tensornet.engines.mps.settings import TruncationWarning
from qhybrid.testing import describe, host_touches



def _sel(n, chi, batch=3, layers=3, **options):
    """``StronglyEntanglingLayers`` on ``n`` wires after an embedding of a batch, every <Z_i>, at cutoff=0 unless
    ``options`` say otherwise: the device, the qnode and its inputs."""
    options.setdefault("cutoff", 0)
    dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=chi, **options)

    @qhybrid.qnode(dev)
    def f(x, w):
        qml.AngleEmbedding(x, wires=range(n), rotation="Y")
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return [qml.expval(qml.Z(i)) for i in range(n)]

    g = torch.Generator().manual_seed(n * 100 + chi)
    x = torch.rand(batch, n, dtype=torch.float64, generator=g) * 3
    w = torch.rand(layers, n, 3, dtype=torch.float64, generator=g) * 6
    return dev, f, x, w


def _step(f, x, w):
    w = w.clone().requires_grad_()
    out = torch.stack(f(x, w))
    (grad,) = torch.autograd.grad(out.sum(), w)
    return out.detach(), grad


@pytest.mark.parametrize("chi", [8, 3])  # 8: every bond of 7 wires held (exact); 3: the cap cuts
def test_a_steady_step_reads_nothing_back(chi):
    dev, f, x, w = _sel(7, chi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        touches = host_touches(lambda: _step(f, x, w), warmup=2)
    assert not touches, describe(touches)


def test_with_a_value_cutoff_a_step_still_reads_its_ranks():
    """The default cutoff sizes bonds from singular values: data-dependent by design (docs/MPS.md, 'Capture')."""
    dev, f, x, w = _sel(7, 8, cutoff=None)
    assert host_touches(lambda: _step(f, x, w), warmup=2)


def test_the_report_read_later_is_the_last_steps():
    dev, f, x, w = _sel(8, 3)
    with pytest.warns(TruncationWarning):  # the first execution of a structure is read and checked at once
        _step(f, x, w)
    first = dev.last_truncation
    w2 = w + 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)  # later executions warn only when the report is read
        _step(f, x, w2)
    with pytest.warns(TruncationWarning, match="discarded a weight"):
        lazy = dev.last_truncation
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)  # once per execution
        again = dev.last_truncation
    fresh, g, _, _ = _sel(8, 3)
    with pytest.warns(TruncationWarning):
        _step(g, x, w2)
    assert lazy == again == fresh.last_truncation != first
    assert lazy.max_bond == 3 and lazy.discarded_weight > 0 and len(lazy.per_variant[0]) == 3


def test_a_report_with_nothing_cut_is_exact_and_silent():
    dev, f, x, w = _sel(6, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        for _ in range(3):
            _step(f, x, w)
        report = dev.last_truncation
    assert report.discarded_weight == 0.0 and report.fidelity == 1.0 and report.max_bond == 8


def test_a_truncated_step_is_the_one_that_checked_ranks(monkeypatch):
    """Where the cap cuts, the structural centre moves (tall blocks by the SVD split, no rank check) give the
    truncated state the rank-checked QR moves gave: the same numbers and gradients."""
    dev, f, x, w = _sel(10, 4)
    with pytest.warns(TruncationWarning):
        fixed = _step(f, x, w)
    original = qr.exact_split
    monkeypatch.setattr(state, "exact_split", lambda theta, centre, fixed=False: original(theta, centre))
    dev, f, x, w = _sel(10, 4)
    with pytest.warns(TruncationWarning):
        checked = _step(f, x, w)
    for a, b in zip(fixed, checked):
        assert torch.allclose(a, b, atol=1e-10)


def test_tall_moves_take_the_svd_split_without_a_read(monkeypatch):
    """A padded tall block has a singular R: without reading it, the fixed mode never runs QR's R^-H on it."""
    g = torch.Generator().manual_seed(0)
    theta = (torch.randn(2, 8, 2, dtype=torch.complex128, generator=g) @ torch.randn(2, 2, 4, dtype=torch.complex128, generator=g))
    monkeypatch.setattr(qr, "_full_rank", lambda r: pytest.fail("the rank of R was read"))
    left, right, k = qr.exact_split(theta.requires_grad_(), "right", fixed=True)
    assert k == 4 and torch.allclose(left @ right, theta, atol=1e-13)
    assert torch.allclose(left.mH @ left, torch.eye(4, dtype=theta.dtype).expand(2, 4, 4), atol=1e-13)
    (grad,) = torch.autograd.grad((left @ right).abs().pow(2).sum(), theta)
    assert torch.isfinite(grad).all() and torch.allclose(grad, 2 * theta.detach(), atol=1e-10)
    wide = theta.detach().mH.contiguous()
    left, right, k = qr.exact_split(wide, "right", fixed=True)  # wide: QR, no check needed
    assert k == 4 and torch.allclose(left @ right, wide, atol=1e-13)

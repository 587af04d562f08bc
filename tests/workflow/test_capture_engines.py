"""Every engine's steady step captured as CUDA graphs (``qhybrid.cuda_graph``) replays what the uncaptured step
gives, to 1e-12, with new values on every replay (GPU): the state vector at a large batch (W1 at batch 8192, W5),
diagonal runs (G16), light-cone classes, the closed networks of deep QAOA (Q100p3, Q100p4, L8p3), the mixed-state
engine and its Pauli walk (NW1's kind), noise trajectories, and an exact parameter-shift launch. The uncaptured step is checked against default.qubit elsewhere; here a
second qnode on its own device is the reference, so the captured one never shares its caches.

The MPS is captured with bonds fixed by structure (cutoff=0 and a max_bond_dim); with a value cutoff its bond sizes
follow singular values read per call, and capture is refused by name."""

import warnings

import networkx as nx
import pennylane as qml
import pytest
import torch

import qhybrid
from benchmarks.workloads import deep_qaoa, qaoa_function
from tests.devices.tensornet.test_steady_steps import noisy_sel

pytestmark = pytest.mark.gpu

TOL = 1e-12


def _sel(n, layers, batch, diff_method="adjoint", **device):
    def make():
        dev = qhybrid.device("tensornet", wires=n, **device)

        @qhybrid.qnode(dev, diff_method=diff_method)
        def f(x, w):
            qml.AngleEmbedding(x, wires=range(n), rotation="Y")
            qml.StronglyEntanglingLayers(w, wires=range(n))
            return [qml.expval(qml.Z(i)) for i in range(n)]

        return lambda x, w: torch.stack(list(f(x, w)))

    def args(seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.rand(batch, n, generator=g, dtype=torch.float64) * 3
        w = torch.rand(layers, n, 3, generator=g, dtype=torch.float64) * 6
        return x.cuda().requires_grad_(), w.cuda().requires_grad_()

    return make, args


def _noisy(n, batch):
    def make():
        f = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(noisy_sel(n))
        return lambda x, w: torch.stack(list(f(x, w)))

    return make, _sel(n, 2, batch)[1]


def _qaoa(n, edges, p):
    def make():
        node = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(qaoa_function(edges, n))
        return lambda g, b: node(g, b).reshape(1)

    def args(seed):
        gen = torch.Generator().manual_seed(seed)
        g = torch.rand(p, generator=gen, dtype=torch.float64) * 0.6
        b = torch.rand(p, generator=gen, dtype=torch.float64) * 0.6 - 0.5
        return g.cuda().requires_grad_(), b.cuda().requires_grad_()

    return make, args


def _regular(n, seed):
    return [(int(u), int(v)) for u, v in nx.random_regular_graph(3, n, seed=seed).edges()]


def _deep(name):
    n, edges, p = deep_qaoa(name)
    return _qaoa(n, edges, p)


CASES = {
    "W1_batch8192": lambda: _sel(8, 4, 8192),
    "W5": lambda: _sel(12, 6, 1024),
    "G16_diagonal_runs": lambda: _qaoa(16, _regular(16, 7), 2),
    "cone_classes_Q30p2": lambda: _qaoa(30, _regular(30, 1), 2),
    "Q100p3": lambda: _deep("Q100p3"),
    "L8p3": lambda: _deep("L8p3"),
    "Q100p4": lambda: _deep("Q100p4"),
    "NW1_mixed_state": lambda: _noisy(4, 1),
    "NW1_pauli_walk": lambda: _noisy(4, 16),
    "parameter_shift_launch": lambda: _sel(6, 2, 64, diff_method="parameter-shift"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_captured_step_equals_uncaptured(case):
    make, args = CASES[case]()
    captured, plain = qhybrid.cuda_graph(make(), args(0)), make()
    for seed in (1, 2):  # new values in the graph's buffers: every replay must see them
        a = args(seed)
        b = tuple(t.detach().clone().requires_grad_() for t in a)
        got, want = captured(*a), plain(*b)
        weights = torch.linspace(0.5, 1.5, got.numel(), dtype=got.dtype, device=got.device).reshape(got.shape)
        got_grads = torch.autograd.grad((got * weights).sum(), a)
        want_grads = torch.autograd.grad((want * weights).sum(), b)
        assert got.is_cuda and all(g.is_cuda for g in got_grads)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for g, h in zip(got_grads, want_grads):
            torch.testing.assert_close(g, h, atol=TOL, rtol=0)


def test_noise_trajectories_replay_fresh_draws_whose_mean_is_the_exact_channels():
    """Trajectories draw from the device's own CUDA generator, which ``qhybrid.cuda_graph`` registers with its graphs:
    a replay draws anew (two replays of the same inputs differ) and stays an unbiased estimate (the mean of many
    replays' values and gradients matches the exact density matrix's, within ten standard errors)."""
    n, batch, rows, replays = 4, 2, 512, 16
    make_sampled = _noisy_with(n, noise="trajectories", trajectories=rows, seed=11)
    exact = _noisy_with(n)
    _, args = _sel(n, 2, batch)
    captured = qhybrid.cuda_graph(make_sampled(), args(0))
    a = args(1)
    b = tuple(t.detach().clone().requires_grad_() for t in a)
    want = exact()(*b)
    want_grads = torch.autograd.grad(want.sum(), b)
    values, grads = [], []
    for _ in range(replays):
        got = captured(*a)
        grads.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(got.sum(), a)]))
        values.append(got.detach().clone())
    assert not torch.equal(values[0], values[1]), "a replay repeated the captured draws"
    for samples, reference in ((torch.stack(values), want), (torch.stack(grads), torch.cat([g.reshape(-1) for g in want_grads]))):
        mean, error = samples.mean(0), samples.std(0) / replays**0.5
        assert samples.is_cuda
        assert torch.all((mean - reference.reshape(mean.shape)).abs() <= 10 * error + 1e-9), (mean, reference)


def _noisy_with(n, **device):
    def make():
        f = qhybrid.qnode(qhybrid.device("tensornet", wires=n, **device))(noisy_sel(n))
        return lambda x, w: torch.stack(list(f(x, w)))

    return make


def _mps(n, chi, batch, cutoff):
    """W1's circuit on ``method="mps"``; ``make`` also returns its device (to read its truncation report)."""
    make, args = _sel(n, 2, batch)

    def make_mps():
        dev = qhybrid.device("tensornet", wires=n, method="mps", max_bond_dim=chi, cutoff=cutoff)

        @qhybrid.qnode(dev, diff_method="adjoint")
        def f(x, w):
            qml.AngleEmbedding(x, wires=range(n), rotation="Y")
            qml.StronglyEntanglingLayers(w, wires=range(n))
            return [qml.expval(qml.Z(i)) for i in range(n)]

        return (lambda x, w: torch.stack(list(f(x, w)))), dev

    return make_mps, args


FACTORING = {"_factor", "_svd", "exact_split"}
"""engines/mps's functions that call torch.linalg's eigh, svd and qr (and use their results at once)."""


def _in_torch_linalg(exc: BaseException) -> bool:
    """Whether a capture failed in torch's CUDA factorisations (cuSOLVER does not support stream capture, and
    torch checks its status on the host: pytorch#188355), not elsewhere in qhybrid's code (a host read there is
    a bug, which test_steady_steps finds on the CPU)."""
    import traceback

    # the first failure can be the context of a later one (capture_end's "invalidated" raised while handling it)
    seen, chain = set(), []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for cause in chain:
        frames = [f for f in traceback.extract_tb(cause.__traceback__) if "/qhybrid/" in f.filename]
        if frames and frames[-1].name in FACTORING and "/engines/mps/" in frames[-1].filename:
            return True
    return False


@pytest.mark.parametrize("chi", [8, 3])  # 8: nothing cut on 6 wires; 3: the cap cuts
def test_an_mps_step_with_fixed_bonds_replays_exactly(chi):
    """cutoff=0 with a bond cap decides every bond from the structure (docs/MPS.md, 'Capture'): the step is
    captured and replays what the uncaptured one gives, values, gradients and the truncation report."""
    make, args = _mps(6, chi, 4, cutoff=0)
    fn, dev = make()
    try:
        captured = qhybrid.cuda_graph(fn, args(0))
    except qhybrid.errors.CaptureError as exc:
        if _in_torch_linalg(exc):
            pytest.xfail(f"torch's CUDA factorisations are not capturable here: {exc.__cause__}")
        raise
    plain, plain_dev = make()
    for seed in (1, 2):
        a = args(seed)
        b = tuple(t.detach().clone().requires_grad_() for t in a)
        got, want = captured(*a), plain(*b)
        got_grads = torch.autograd.grad(got.sum(), a)
        want_grads = torch.autograd.grad(want.sum(), b)
        torch.testing.assert_close(got, want, atol=TOL, rtol=0)
        for g, h in zip(got_grads, want_grads):
            torch.testing.assert_close(g, h, atol=TOL, rtol=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report, want_report = dev.last_truncation, plain_dev.last_truncation
        assert report.max_bond == want_report.max_bond == min(chi, 8)
        assert report.discarded_weight == pytest.approx(want_report.discarded_weight, abs=1e-12)
        assert (report.discarded_weight == 0.0) == (chi == 8)


def test_an_mps_step_with_a_value_cutoff_is_refused_by_name():
    """A value cutoff (the default's too) sizes bonds from singular values: capture is refused with the fix."""
    make, args = _mps(6, 8, 4, cutoff=None)
    with pytest.raises(qhybrid.errors.CaptureError, match="cutoff=0"):
        qhybrid.cuda_graph(make()[0], args(0))

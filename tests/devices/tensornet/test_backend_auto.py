"""backend="auto" on a GPU: torch for small plans (and for every network the engines batch together, since it is a
TorchBackend to them), cuTensorNet only for trees of at least CUTENSORNET_MIN_FLOPS; results equal either way."""

import pytest
import torch

from qhybrid.devices.tensornet import backends
from qhybrid.devices.tensornet.backends import auto
from qhybrid.devices.tensornet.backends.torch_backend import TorchBackend
from qhybrid.devices.tensornet.engines.network.plan import ContractionPlan


class Recording(TorchBackend):
    """Stands in for cuTensorNet on the CPU: contracts with torch and records the plans it was given."""

    name = "cutensornet"

    def __init__(self):
        super().__init__("cpu")
        self.plans = []

    def contract(self, plan, operands, **kw):
        self.plans.append(plan)
        return super().contract(plan, operands, **kw)


def _plans():
    small = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4})
    large = ContractionPlan([(0, 1), (1, 2)], (0, 2), {0: 64, 1: 2**12, 2: 2**12})
    return small, large


def test_auto_sends_only_large_trees_to_cutensornet():
    small, large = _plans()
    assert small.flops < auto.CUTENSORNET_MIN_FLOPS <= large.flops
    cutn = Recording()
    backend = auto.AutoBackend("cpu", cutn)
    a, b = torch.rand(2, 3, dtype=torch.float64), torch.rand(3, 4, dtype=torch.float64)
    torch.testing.assert_close(backend.contract(small, [a, b]), a @ b, atol=1e-12, rtol=0)
    assert cutn.plans == []
    a, b = torch.rand(64, 2**12, dtype=torch.float32), torch.rand(2**12, 2**12, dtype=torch.float32)
    backend.contract(large, [a, b])
    assert cutn.plans == [large]
    assert isinstance(backend, TorchBackend)  # engines that batch networks together keep doing so


@pytest.mark.gpu
def test_auto_matches_torch_on_a_large_tree_on_the_gpu():
    if backends.available_backends("cuda")["cutensornet"] is not None:
        pytest.skip(f"cutensornet unavailable: {backends.available_backends('cuda')['cutensornet']}")
    _, large = _plans()
    a = torch.rand(64, 2**12, dtype=torch.complex128, device="cuda", requires_grad=True)
    b = torch.rand(2**12, 2**12, dtype=torch.complex128, device="cuda", requires_grad=True)
    got = backends.get_backend("auto", "cuda").contract(large, [a, b])
    want = a @ b
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-12)
    ga = torch.autograd.grad(got.abs().square().sum(), a)[0]
    ha = torch.autograd.grad(want.abs().square().sum(), a)[0]
    torch.testing.assert_close(ga, ha, atol=1e-6, rtol=1e-12)

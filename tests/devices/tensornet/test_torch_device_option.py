"""The device option torch_device refused by name when it names no device or a CUDA this torch lacks (issue 41:
torch's own "AssertionError: Torch not compiled with CUDA enabled" came at the first run)."""

import pytest
import torch

import qhybrid


def test_a_bad_torch_device_is_refused_at_construction():
    with pytest.raises(ValueError, match="torch_device='gpu' is not a torch device"):
        qhybrid.device("tensornet", wires=2, torch_device="gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
def test_cuda_without_cuda_is_refused_at_construction():
    with pytest.raises(ValueError, match="torch_device='cuda', but this torch sees no CUDA GPU"):
        qhybrid.device("tensornet", wires=2, method="mps", torch_device="cuda")


def test_cpu_and_none_are_kept():
    assert qhybrid.device("tensornet", wires=2, torch_device="cpu").torch_device == torch.device("cpu")
    assert qhybrid.device("tensornet", wires=2).torch_device is None

"""The mixed-state engine's tests compare with default.mixed in double precision."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _double_default():
    """default.mixed builds the Kraus operators of numeric (non-tensor) channel parameters beside torch ones in
    torch's default dtype: float32 would round the reference itself to 1e-8."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)

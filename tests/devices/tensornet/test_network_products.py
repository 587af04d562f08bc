"""``engines/network/products.py``: a product whose summed extent is one runs as a broadcast ``mul``, with the values
``bmm`` gives, on plain operands, transposed views and into ``out=`` views; many networks whose trees hold such steps
match their plans one by one (tests/devices/tensornet/test_network_many.py, both ways)."""

import pytest
import torch

from qhybrid.devices.tensornet.engines.network import products


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 1, 2), (2, 1, 4), (4, 1, 16), (16, 1, 1), (1, 1, 64), (3, 2, 5), (8, 8, 8)])
@pytest.mark.parametrize("transposed", [False, True])
def test_product_is_bmm(m, k, n, transposed):
    gen = torch.Generator().manual_seed(m * 100 + k * 10 + n)
    rows = 7
    if transposed:  # the backward's operands: views of [rows, k, m] and [rows, n, k]
        a = torch.randn(rows, k, m, dtype=torch.complex128, generator=gen).mT
        b = torch.randn(rows, n, k, dtype=torch.complex128, generator=gen).mT
    else:
        a = torch.randn(rows, m, k, dtype=torch.complex128, generator=gen)
        b = torch.randn(rows, k, n, dtype=torch.complex128, generator=gen)
    want = torch.bmm(a, b)
    assert products.is_outer(m, k, n) == (k == 1 and m * n >= products.OUTER_MIN_ELEMENTS)
    torch.testing.assert_close(products.product(a, b), want, atol=1e-14, rtol=0)
    buffer = torch.full((3 + rows * m * n,), float("nan"), dtype=torch.complex128)
    out = buffer[3:].view(rows, m, n)  # a view into a larger buffer, as the arenas write
    products.kernel(m, k, n)(a, b, out=out)
    torch.testing.assert_close(out, want, atol=1e-14, rtol=0)
    assert torch.isnan(buffer[:3]).all()  # nothing written outside the view

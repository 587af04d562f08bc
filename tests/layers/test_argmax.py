"""ArgMax (first maximum, straight-through gradient) and ArgMaxQLayer."""

import pytest
import torch

import qhybrid
from qhybrid import ArgMax


def test_forward_first_maximum_as_input_dtype():
    t = torch.tensor([[0.1, 0.7, 0.7], [0.5, 0.2, 0.3], [0.0, 0.0, 0.0]], dtype=torch.float64)
    i = ArgMax.apply(t)
    assert i.dtype == torch.float64 and i.shape == (3, 1)
    assert i.squeeze(-1).tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("shape", [(7,), (4, 9), (2, 3, 5)])
def test_forward_agrees_with_torch_argmax(shape):
    t = torch.randn(shape)
    i = ArgMax.apply(t)
    assert i.shape == (*shape[:-1], 1) and i.dtype == torch.float32
    assert torch.equal(i.squeeze(-1).long(), torch.argmax(t, dim=-1))


def test_backward_puts_gradient_on_the_index():
    t = torch.tensor([[0.1, 0.7, 0.7], [0.5, 0.2, 0.3]], requires_grad=True)
    g = torch.tensor([[2.0], [-3.0]])
    ArgMax.apply(t).backward(g)
    assert torch.equal(t.grad, torch.tensor([[0.0, 2.0, 0.0], [-3.0, 0.0, 0.0]]))


def test_backward_batched_random():
    t = torch.randn(3, 4, 6, requires_grad=True)
    g = torch.randn(3, 4, 1)
    ArgMax.apply(t).backward(g)
    expected = torch.zeros(3, 4, 6).scatter(-1, torch.argmax(t, -1, keepdim=True), g)
    assert torch.equal(t.grad, expected)


HALF_CASES = [
    (torch.bfloat16, 256, torch.bfloat16), (torch.bfloat16, 512, torch.float32),
    (torch.float16, 2049, torch.float16), (torch.float16, 4096, torch.float32),
]  # fmt: skip


@pytest.mark.parametrize(("dtype", "n", "want"), HALF_CASES)
def test_half_precision_indexes_are_exact(dtype, n, want):
    """bfloat16 held 257 as 256, float16 2049 as 2048: the wrong index, and the gradient landed on it (found by a
    fuzzing helper). Where the input's dtype cannot hold every index, the index comes as float32."""
    t = torch.zeros(3, n, dtype=dtype)
    winners = [n - 1, n // 2 + 1, 0]
    t[torch.arange(3), winners] = 1.0
    t.requires_grad_()
    i = ArgMax.apply(t)
    assert i.dtype == want and i.squeeze(-1).long().tolist() == winners
    i.backward(torch.ones_like(i))
    assert torch.nonzero(t.grad).tolist() == [[0, n - 1], [1, n // 2 + 1], [2, 0]]


def test_gradient_flows_through_a_chain():
    logits = torch.randn(5, 4, requires_grad=True)
    out = ArgMax.apply(torch.softmax(logits, -1))
    out.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_vmap():
    t = torch.randn(4, 5)
    torch.testing.assert_close(torch.func.vmap(ArgMax.apply)(t), ArgMax.apply(t))


def test_rejects_bad_inputs():
    with pytest.raises(ValueError, match="0-d"):
        ArgMax.apply(torch.tensor(1.0))
    with pytest.raises(TypeError, match="floating"):
        ArgMax.apply(torch.tensor([1, 2]))


def test_argmax_qlayer_is_most_probable_bitstring_with_argmax_gradient():
    layer = qhybrid.ArgMaxQLayer(3, 2).double()
    probs_layer = qhybrid.QLayer(3, 2).double()
    probs_layer.load_state_dict(layer.state_dict())
    x = torch.rand(6, 3, dtype=torch.float64)

    idx = layer(x)
    probs = probs_layer(x)
    assert idx.shape == (6, 1) and idx.dtype == torch.float64
    assert torch.equal(idx.squeeze(-1).long(), torch.argmax(probs, -1))

    idx.sum().backward()
    winning = probs.gather(-1, torch.argmax(probs, -1, keepdim=True)).sum()
    (expected,) = torch.autograd.grad(winning, probs_layer.weight)
    torch.testing.assert_close(layer.weight.grad, expected, atol=1e-12, rtol=0)


def test_argmax_qlayer_float32_unbatched():
    out = qhybrid.ArgMaxQLayer(2)(torch.rand(2))
    assert out.shape == (1,) and out.dtype == torch.float32 and 0 <= out.item() < 4

"""ArgMax with a gradient, and ArgMaxQLayer: the most probable bitstring of a QLayer.

``argmax`` is piecewise constant, so its true derivative is zero almost everywhere. ``ArgMax`` instead
passes the incoming gradient straight through to the winning entry (zero elsewhere), the usual
"differentiable argmax" surrogate (https://discuss.pytorch.org/t/differentiable-argmax/33020) and the one
qailab's ``ArgMax`` uses: raising the winning probability is what moves the output.
"""

from __future__ import annotations

import torch

from .qlayer import QLayer


class ArgMax(torch.autograd.Function):
    """Index of the first maximum along the last axis, as a floating tensor that carries a gradient.

    Forward: ``t`` of shape ``(..., n)`` gives ``(..., 1)`` holding ``argmax(t, -1)`` in ``t``'s dtype (float32
    where a half-precision dtype cannot hold every index exactly: bfloat16 past 256 entries, float16 past 2048;
    ties resolve to the first index, NaN counts as the maximum, as in ``torch.argmax``).
    Backward: the incoming gradient ``(..., 1)`` lands on that index, zero on every other entry.

    >>> t = torch.tensor([[0.1, 0.7, 0.7], [0.5, 0.2, 0.3]], requires_grad=True)
    >>> i = ArgMax.apply(t)
    >>> i
    tensor([[1.],
            [0.]], grad_fn=<ArgMaxBackward>)
    >>> i.sum().backward(); t.grad
    tensor([[0., 1., 0.],
            [1., 0., 0.]])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(t: torch.Tensor) -> torch.Tensor:
        if t.ndim == 0:
            raise ValueError("ArgMax needs at least one axis; got a 0-d tensor.")
        if not t.is_floating_point():
            raise TypeError(f"ArgMax takes a floating tensor (its output carries a gradient), got {t.dtype}.")
        return torch.argmax(t, dim=-1, keepdim=True).to(_index_dtype(t.dtype, t.shape[-1]))

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        (t,) = inputs
        ctx.shape = t.shape
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (index,) = ctx.saved_tensors
        grad = grad_output.new_zeros(ctx.shape)
        return grad.scatter(-1, index.long(), grad_output)


_EXACT_INTEGERS = {torch.float16: 2048, torch.bfloat16: 256}
"""The largest integer up to which every integer is exact in these dtypes (their significands: 11 and 8 bits)."""


def _index_dtype(dtype: torch.dtype, n: int) -> torch.dtype:
    """``dtype`` where it holds every index below ``n`` exactly, else float32: bfloat16 held 257 as 256 (the wrong
    bitstring, and the gradient landed on it; found by a fuzzing helper)."""
    limit = _EXACT_INTEGERS.get(dtype)
    return dtype if limit is None or n - 1 <= limit else torch.float32


class ArgMaxQLayer(QLayer):
    """The most probable bitstring of a :class:`~qhybrid.QLayer`, as a float index with ArgMax's gradient.

    Args, keyword args and weights: as for :class:`~qhybrid.QLayer`.

    >>> import torch, qhybrid
    >>> layer = qhybrid.ArgMaxQLayer(2)
    >>> x = torch.rand(3, 2, requires_grad=True)
    >>> layer(x).sum().backward()   # reaches x.grad and layer.weight.grad
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Index of the most probable bitstring.

        Args:
            x: ``(batch, in_features)`` or ``(in_features,)``.

        Returns:
            ``(batch, 1)`` or ``(1,)``: an integer value in ``[0, 2**n_qubits)`` stored in the dtype of ``x`` (float32
            where a half-precision one cannot hold it exactly);
            its gradient flows to the winning probability and from there to ``x`` and ``weight``.

        >>> import torch, qhybrid
        >>> idx = qhybrid.ArgMaxQLayer(3)(torch.rand(5, 3))
        >>> idx.shape, bool(((idx >= 0) & (idx < 8)).all())
        (torch.Size([5, 1]), True)
        """
        return ArgMax.apply(super().forward(x))


__all__ = ["ArgMax", "ArgMaxQLayer"]

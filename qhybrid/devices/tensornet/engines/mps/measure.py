"""Reading an MPS: environments, expectation values of operator products, reduced density matrices, probs.

With the orthogonality centre at ``c``, the left environment of every site ``<= c`` and the right one of
every site ``>= c`` are identities; the others come from one sweep towards the centre (``Environments``).
A product of one-site operators on sites ``lo..hi`` then costs ``hi - lo + 1`` transfer steps, so all ``n``
local ``<Z_i>`` cost one sweep, and a global ``<Z...Z>`` one more.
Environments are ``[B, ket, bra]``.
"""

from __future__ import annotations

import torch

from .....errors import ContractionTooLargeError
from ..network.plan import _fmt_bytes
from .state import MPS


def _transfer(env: torch.Tensor | None, a: torch.Tensor, op: torch.Tensor | None) -> torch.Tensor:
    """The environment one site further right: ``env`` (None: identity) through ``a`` with ``op`` on its leg."""
    x = a if env is None else torch.einsum("bax,basr->bxsr", env, a)
    if op is not None:
        x = torch.einsum("ts,bxsr->bxtr", op, x) if op.dim() == 2 else torch.einsum("bts,bxsr->bxtr", op, x)
    return torch.einsum("bxtr,bxty->bry", x, a.conj())


def _transfer_left(env: torch.Tensor | None, a: torch.Tensor) -> torch.Tensor:
    """The environment one site further left, through ``a`` with the identity on its leg."""
    x = a if env is None else torch.einsum("basr,bry->basy", a, env)
    return torch.einsum("basy,bxsy->bax", x, a.conj())


class Environments:
    """Left and right identity-operator environments of an MPS, built lazily towards the centre."""

    def __init__(self, mps: MPS):
        self.mps = mps
        self._left: dict[int, torch.Tensor | None] = {}
        self._right: dict[int, torch.Tensor | None] = {}

    def left(self, i: int) -> torch.Tensor | None:
        """Contraction of sites ``< i`` (None: identity)."""
        c = self.mps.centre
        if i <= c:
            return None
        if i not in self._left:
            self._left[i] = _transfer(self.left(i - 1), self.mps.sites[i - 1], None)
        return self._left[i]

    def right(self, i: int) -> torch.Tensor | None:
        """Contraction of sites ``> i`` (None: identity)."""
        c = self.mps.centre
        if i >= c:
            return None
        if i not in self._right:
            self._right[i] = _transfer_left(self.right(i + 1), self.mps.sites[i + 1])
        return self._right[i]

    def product_expval(self, ops: dict[int, torch.Tensor]) -> torch.Tensor:
        """``<prod_i ops[i]>`` ``[B]`` (complex) for one-site operators ``[2, 2]`` or ``[B, 2, 2]``."""
        mps = self.mps
        if not ops:
            return self.norm()
        lo, hi = min(ops), max(ops)
        env = self.left(lo)
        for i in range(lo, hi + 1):
            env = _transfer(env, mps.sites[i], ops.get(i))
        return _close(env, self.right(hi))

    def norm(self) -> torch.Tensor:
        c = self.mps.centre
        return _close(_transfer(None, self.mps.sites[c], None), None)

    def reduced_density(self, sites: list[int], diagonal: bool, max_memory: float) -> torch.Tensor:
        """The reduced density matrix ``[B, 2**k, 2**k]`` of ascending ``sites`` (``diagonal``: only its
        diagonal ``[B, 2**k]``), first site the most significant bit."""
        mps = self.mps
        lo, hi = sites[0], sites[-1]
        chi = max(a.shape[-1] for a in mps.sites[lo : hi + 1])
        k = len(sites)
        outcomes = (1 << k) if diagonal else (1 << (2 * k))
        need = outcomes * chi * chi * mps.batch * mps.sites[0].element_size()
        if need > max_memory:
            what = "probabilities" if diagonal else "reduced density matrix"
            raise ContractionTooLargeError(
                f"The {what} of {k} wires needs about {_fmt_bytes(need)} at bond dimension {chi}, above "
                f"max_memory={_fmt_bytes(max_memory)}. Measure fewer wires at once, or raise max_memory."
            )
        left = self.left(lo)
        b = mps.batch
        # env [B, O, ket, bra]: O enumerates the outcomes (ket, bra pairs) of the measured sites so far
        env = None if left is None else left.unsqueeze(1)
        wanted = set(sites)
        for i in range(lo, hi + 1):
            a = mps.sites[i]
            x = a.unsqueeze(1) if env is None else torch.einsum("boax,basr->boxsr", env, a)
            if i in wanted:
                nxt = torch.einsum("boxsr,bxty->bostry", x, a.conj())
            else:
                nxt = torch.einsum("boxsr,bxsy->bory", x, a.conj())
            if i in wanted:
                if diagonal:
                    nxt = nxt.diagonal(0, 2, 3).permute(0, 1, 4, 2, 3)  # [B, O, s, r, y]
                    nxt = nxt.reshape(b, -1, *nxt.shape[-2:])
                else:
                    nxt = nxt.reshape(b, -1, *nxt.shape[-2:])
            env = nxt
        right = self.right(hi)
        if right is None:
            out = env.diagonal(0, -2, -1).sum(-1)
        else:
            out = torch.einsum("bory,bry->bo", env, right)
        if diagonal:
            return out.real
        # O is (s1, t1, s2, t2, ...): reorder to (s1 s2 ..., t1 t2 ...)
        out = out.reshape(b, *(2,) * (2 * k))
        perm = [0] + [1 + 2 * j for j in range(k)] + [2 + 2 * j for j in range(k)]
        return out.permute(perm).reshape(b, 1 << k, 1 << k)


def _close(env: torch.Tensor, right: torch.Tensor | None) -> torch.Tensor:
    if right is None:
        return env.diagonal(0, -2, -1).sum(-1)
    return (env * right).sum((-2, -1))

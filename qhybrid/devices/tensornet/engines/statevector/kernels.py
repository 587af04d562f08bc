"""The state-vector program's actions: each applied to a ``[2**n, S, B]`` state, and walked back.

An action is one of

* ``product``: the initial product state from one column vector per wire (``[2, S|1, B|1]`` each);
* ``plain``: one ``D x D`` matrix on adjacent wires ``q .. q+k-1``, the same for every stack row and sample;
* ``lead``: per-row / per-sample matrices ``[S|1, B|1, D, D]`` on adjacent wires;
* ``scattered``: a matrix (with or without lead) on non-adjacent wires;
* ``monomial``: a basis permutation with phases (CNOT rings, SWAPs, Paulis: no parameters);
* ``permute``: a monomial gate on wide circuits, as a permutation (with phases) of its own wires' slices;
* ``phase``: a global phase per row / sample ``[S|1, B|1]``;
* ``diagonal``: a run of diagonal gates as one phase multiply (``diagonal``: angle table, angle columns);
* ``two_level``: a fermionic excitation on the two amplitude sets it mixes (``excitations``);
* ``redo``: plain blocks plus a redo of a few stack rows with their own gates (no-gradient runs only).

``apply`` runs one action forward. ``unapply`` walks one back for the adjoint method: given the state
after the action and the cotangent there, it returns the state and cotangent before it and the
cotangent of each of the action's tensors, using that every action is unitary (its inverse is its
conjugate transpose), so the walk keeps O(1) states instead of one per action.

Cotangents follow torch's convention for complex tensors: for a real loss L, ``dL = Re(sum(conj(g) dz))``.
For ``out = U psi`` this gives ``g_U = g_out psi^H`` and ``g_psi = U^H g_out``.
"""

from __future__ import annotations

from typing import Sequence

import torch

from . import diagonal, excitations
from .buffers import StatePool, fresh, into
from .product import product_state, product_vjp, sum_to
from .product_stacked import stacked_state, stacked_vjp
from .permutation import apply_local_permutation
from .block_cotangent import block_cotangent
from .lead_gates import apply_lead


class Action:
    """One step of a program: ``kind``, static ``info``, and its tensors ``[start, stop)`` of a flat list.
    ``real``: its matrix is real-valued by construction (known at plan time from the gate kinds)."""

    __slots__ = ("kind", "info", "start", "stop", "real")

    def __init__(self, kind: str, info, start: int, stop: int, real: bool = False):
        self.kind, self.info, self.start, self.stop, self.real = kind, info, start, stop, real

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Action({self.kind}, {self.info}, {self.start}:{self.stop})"


class Permute(torch.autograd.Function):
    """``x[perm]`` along dim 0 whose backward is the inverse gather (not a scatter-add)."""

    @staticmethod
    def forward(x, perm, inverse):
        return x.index_select(0, perm)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.inverse = inputs[2]
        ctx.perm = inputs[1]

    @staticmethod
    def backward(ctx, g):
        if not torch.is_grad_enabled():  # first order: a plain gather (Function.apply binds its signature)
            return g.index_select(0, ctx.inverse), None, None
        return Permute.apply(g, ctx.inverse, ctx.perm), None, None


# --- forward ---------------------------------------------------------------------------------


REAL_GEMM_MIN_AMPLITUDES = 1 << 16
"""A real gate matrix (``RY``, Hadamard, their Kronecker blocks) on a state of at least this many amplitudes
multiplies the state's real view (``[.., D, 2 rest]`` float GEMM: half the arithmetic of a complex GEMM;
a 16 x 16 block on a 24-wire state 0.31-0.46 s against 0.42-0.60 s complex on the loaded 2-core CPU). Below
it the check of the matrix costs more than it saves."""


def _real_part(psi, m, real: bool):
    """``m``'s real part when ``m`` is real-valued (``real``: known from the plan, never read from its values,
    which would wait for the device) and multiplying the state's real view pays (a large state, nothing
    recorded by autograd: a real GEMM would drop the imaginary direction of ``m``'s gradient), else None."""
    if not real or not m.is_complex() or psi.numel() < REAL_GEMM_MIN_AMPLITUDES:
        return None
    if torch.is_grad_enabled() and (m.requires_grad or psi.requires_grad):  # recorded (a view under no_grad is not)
        return None
    return m.resolve_conj().real.contiguous()


def apply_plain(psi, m, q, k, real: bool = False, out=None):
    """``m`` on wires q..q+k-1 (``real``: ``m`` is real-valued by construction; ``out``: a free state-sized
    buffer to write into)."""
    A, D = 1 << q, 1 << k
    rest = psi.numel() // (A * D)  # shapes from numbers: each reshape is an op of its own
    # (a lazily conjugated state, an adjoint walk's cotangent, has no real view: the complex GEMM takes it)
    real = _real_part(psi, m, real) if rest > 1 and psi.is_contiguous() and not psi.is_conj() else None
    if real is not None:  # [.., D, rest] complex = [.., D, 2 rest] real: one real GEMM per slice
        rview = torch.view_as_real(psi).view(A, D, -1)
        if out is not None:
            torch.matmul(real, rview, out=torch.view_as_real(out).view(rview.shape))
            return out
        return torch.view_as_complex(torch.matmul(real, rview).view(*psi.shape, 2))
    if rest == 1:  # the last wires, no lead: one GEMM, not 2**q matrix-vector products
        flat = psi.reshape(A, D)
        if out is not None:
            return torch.mm(flat, m.T, out=out.view(flat.shape)).view(psi.shape)
        return torch.mm(flat, m.T).view(psi.shape)
    # bmm / mm straight: torch.matmul's broadcasting adds 4-5 views and expands a call (each an op)
    if q == 0:
        flat = psi.reshape(D, rest)
        res = torch.mm(m, flat, out=None if out is None else out.view(flat.shape))
    else:
        view = psi.reshape(A, D, rest)
        res = torch.bmm(m.expand(A, D, D), view, out=None if out is None else out.view(view.shape))
    return res.view(psi.shape)


def apply_scattered(psi, m, wires, n, lead):
    """A gate on non-adjacent wires: einsum on the tensor view."""
    k = len(wires)
    S, B = psi.shape[1], psi.shape[2]
    letters = "abcdefghijklmnopqrstuvwxyz"
    if n + k + 2 > len(letters):
        letters = letters + letters.upper()
    state = [letters[i] for i in range(n)]
    new = [letters[n + 2 + j] for j in range(k)]
    s, b = letters[n], letters[n + 1]
    out = list(state)
    for j, w in enumerate(wires):
        out[w] = new[j]
    t = psi.reshape(*(2,) * n, S, B)
    if lead:
        mt = m.expand(S, B, *m.shape[2:]).reshape(S, B, *(2,) * (2 * k))
        meq = s + b + "".join(new) + "".join(state[w] for w in wires)
    else:
        mt = m.reshape(*(2,) * (2 * k))
        meq = "".join(new) + "".join(state[w] for w in wires)
    eq = f"{meq},{''.join(state)}{s}{b}->{''.join(out)}{s}{b}"
    return torch.einsum(eq, mt, t).reshape(psi.shape)


def apply_monomial(psi, perm, phase, differentiable: bool, pool: StatePool | None = None):
    if perm is not None:
        perm_t, inv_t = perm
        if differentiable:
            psi = Permute.apply(psi, perm_t, inv_t)
        else:
            psi = into(pool, psi, _gather, psi, perm_t)
            if phase is not None:
                return psi.mul_(phase[:, None, None])  # the gather made psi: scale it in place
    if phase is not None:
        psi = into(pool, psi, torch.mul, psi, phase[:, None, None]) if not differentiable else psi * phase[:, None, None]
    return psi


def _gather(psi, index, out=None):
    return torch.index_select(psi, 0, index, out=out) if out is not None else psi.index_select(0, index)


def apply_redo(psi, ts, info, n):
    """Row 0's gates as plain (Kronecker-fused) blocks for the whole stack, then the few rows whose gates
    differ recomputed from the old state with their own gates and written over the result."""
    plain, sub_blocks, sparse_wires, idx = info
    out = psi
    for (q, k), K in zip(plain, ts):
        out = apply_plain(out, K, q, k)
    rest = ts[len(plain) :]
    sub = psi.index_select(1, idx)
    for (q, k), K in zip(sub_blocks, rest):
        sub = apply_plain(sub, K, q, k)
    for w, m in zip(sparse_wires, rest[len(sub_blocks) :]):
        sub = apply_lead(sub, m.index_select(0, idx), w, 1)
    return out.index_copy(1, idx, sub)


def apply(psi, action: Action, ts: Sequence[torch.Tensor], n: int, differentiable: bool = False,
          pool: StatePool | None = None):
    """``action`` applied to ``psi`` (``ts``: its tensors; ``pool``: free buffers to write the result into)."""
    kind, info = action.kind, action.info
    if kind == "plain":
        return into(pool, psi, apply_plain, psi, ts[0], *info, action.real)
    if kind == "lead":
        return apply_lead(psi, ts[0], *info)
    if kind == "monomial":
        perm, phase = info
        return apply_monomial(psi, perm, phase, differentiable, pool)
    if kind == "permute":
        src, phase = info.forward
        return into(pool, psi, apply_local_permutation, psi, info.wires, src, phase, n, differentiable)
    if kind == "phase":
        return psi * ts[0][None]
    if kind == "diagonal":
        return diagonal.apply(psi, info, ts)
    if kind == "scattered":
        wires, lead = info
        return apply_scattered(psi, ts[0], wires, n, lead)
    if kind == "redo":
        return apply_redo(psi, ts, info, n)
    if kind == "two_level":
        return excitations.apply(psi, ts[0], info)
    raise AssertionError(kind)  # pragma: no cover - "product" starts a run, it is not applied


def run(actions: Sequence[Action], tensors: Sequence[torch.Tensor], n: int, S: int, B: int, dtype, device,
        differentiable: bool = False, keep: list | None = None, keep_count: int = 0) -> torch.Tensor:
    """The final state of ``actions`` (the first one is the product state). ``keep`` collects the state
    before each action (None where not kept) for the first ``keep_count`` gate actions, the ones whose
    walk back costs a matmul (a permutation or phase is as cheap to un-apply as to keep).

    Without a recorded graph each action writes into a state the run made and no longer needs (``buffers``)."""
    first = actions[0]
    vectors = tensors[first.start : first.stop]
    halves = [] if keep is not None else None  # kept for the product's VJP (``adjoint``: ``states[0]``)
    if len(vectors) == 1 and vectors[0].ndim == 4:  # one stacked tensor of wire vectors (product_stacked)
        psi = stacked_state(vectors[0], S, B, halves)
    else:
        psi = product_state(vectors, S, B, dtype, device)
    pool = None if differentiable else StatePool()
    owned = pool is not None and fresh(psi, vectors)
    if keep is not None:
        keep.append(halves or None)
    for a in actions[1:]:
        kept = False
        if keep is not None:
            kept = keep_count > 0 and a.kind in ("plain", "lead", "scattered")
            keep.append(psi if kept else None)
            keep_count -= kept
        new = apply(psi, a, tensors[a.start : a.stop], n, differentiable, pool)
        if owned and not kept:
            pool.give(psi)
        psi, owned = new, pool is not None
    return psi


# --- backward (adjoint walk) -------------------------------------------------------------------


def _local_vjp(fn, psi_before, m, g_after, need_m: bool):
    """Cotangents of ``fn(psi, m)`` by torch reverse mode over that one action (rare gate layouts)."""
    with torch.enable_grad():
        x = psi_before.detach().requires_grad_(True)
        mm = m.detach().requires_grad_(need_m)
        out = fn(x, mm)
        wrt = [x, mm] if need_m else [x]
        grads = torch.autograd.grad(out, wrt, g_after)
    return grads[0], (grads[1] if need_m else None)


def _small(m: torch.Tensor) -> torch.Tensor:
    """A gate-sized view materialised, so that BLAS sees a plain operand and no state-sized copy is made."""
    return m.resolve_conj().contiguous()


def unapply(psi, h, action: Action, ts, needs, n, keep_state: bool = True, pool: StatePool | None = None,
            own_psi: bool = False, own_h: bool = False):
    """Walk ``action`` back: (state before, conj cotangent before, cotangents of ``ts``).

    The walk carries ``h = conj(g)`` rather than the cotangent g itself: then every product it needs is
    a matmul with a transposed, never a conjugated, state-sized operand (``conj(g_U) = sum h psi^T``),
    which BLAS takes without copying. ``psi`` is the state after the action; with ``keep_state=False``
    it is already the state before (kept from the forward pass) and is returned as it is.

    ``pool``: free buffers for the results; ``psi`` (``own_psi``) and ``h`` (``own_h``) go into it once they
    are used up, so a block's walk holds three states (state, cotangent, one spare), not four."""
    kind, info = action.kind, action.info
    if kind in ("plain", "lead"):
        q, k = info
        m = ts[0]
        fn = apply_plain if kind == "plain" else apply_lead
        at = (q, k, action.real) if kind == "plain" else (q, k)
        before = into(pool, psi, fn, psi, _small(m.mH), *at) if keep_state else psi
        g_m = block_cotangent(h, before, m, q, k, kind == "lead") if needs[0] else None
        if own_psi and keep_state:
            pool.give(psi)
        # on a small state a plain block's transpose as a view (``_small``'s copy is two ops a block, which there
        # cost more than the arithmetic); a large state's GEMMs take the plain operand
        view = kind == "plain" and h.numel() < REAL_GEMM_MIN_AMPLITUDES
        h_new = into(pool, h, fn, h, m.mT if view else _small(m.mT), *at)
        if own_h:
            pool.give(h)
        return before, h_new, [g_m]
    if kind == "monomial":
        perm, phase = info
        if phase is not None:
            p = phase[:, None, None]
            if keep_state:
                psi = _step(pool, psi, own_psi, torch.mul, psi, p.conj().resolve_conj())
                own_psi = True
            h, own_h = _step(pool, h, own_h, torch.mul, h, p), True
        if perm is not None:
            inv = perm[1]
            if keep_state:
                psi = _step(pool, psi, own_psi, _gather, psi, inv)
            h = _step(pool, h, own_h, _gather, h, inv)
        return psi, h, []
    if kind == "permute":
        if keep_state:
            psi = _step(pool, psi, own_psi, apply_local_permutation, psi, info.wires, *info.back, n)
        h = _step(pool, h, own_h, apply_local_permutation, h, info.wires, *info.back_h, n)
        return psi, h, []
    before, h_new, grads = _unapply_other(psi, h, action, ts, needs, n, keep_state)
    if pool is not None:
        if own_psi and before is not psi:
            pool.give(psi)
        if own_h:
            pool.give(h)
    return before, h_new, grads


def _step(pool, old, own_old: bool, fn, *args):
    """``fn(*args)`` into a pooled buffer, then ``old`` (if the walk owns it) back to the pool."""
    new = into(pool, old, fn, *args)
    if own_old and pool is not None:
        pool.give(old)
    return new


def _unapply_other(psi, h, action: Action, ts, needs, n, keep_state: bool):
    kind, info = action.kind, action.info
    if kind == "phase":
        p = ts[0]
        before = psi * p.conj()[None] if keep_state else psi
        g_p = sum_to((h * before).sum(0), p.shape).conj() if needs[0] else None
        return before, h * p[None], [g_p]
    if kind == "diagonal":
        return diagonal.unapply(psi, h, info, ts, needs)
    if kind == "two_level":
        return excitations.unapply(psi, h, ts[0], info, needs, keep_state)
    if kind == "scattered":
        wires, lead = info
        m = ts[0]
        fn = lambda x, mm: apply_scattered(x, mm, wires, n, lead)  # noqa: E731
        before = fn(psi, _small(m.mH)) if keep_state else psi
        g_before, g_m = _local_vjp(fn, before, m, h.conj(), needs[0])
        return before, g_before.conj(), [g_m]
    raise AssertionError(kind)  # pragma: no cover - "redo" runs only without gradients


_NEEDS_STATE = ("plain", "lead", "scattered", "phase", "diagonal", "two_level")
"""Actions whose walk back needs the state before them (for their own cotangent)."""


def adjoint(actions: Sequence[Action], tensors: Sequence[torch.Tensor], psi: torch.Tensor, h: torch.Tensor,
            needs: Sequence[bool], n: int, states: Sequence[torch.Tensor] | None = None, own_h: bool = False) -> list:
    """Cotangents of every tensor of the program from the final state ``psi`` and ``h``, the conjugate of
    its cotangent.

    ``states``: the state before each action where the forward pass kept it (None elsewhere); every other
    state is recomputed by un-applying the (unitary) actions from ``psi``. ``own_h``: no one else holds ``h``
    (the walk may overwrite it); ``psi`` and the kept states are never overwritten."""
    grads: list = [None] * len(tensors)
    pool, own_psi, own_h = StatePool(), False, own_h
    first_needed = next((i for i, a in enumerate(actions) if any(needs[a.start : a.stop])), None)
    if first_needed is None:
        return grads
    # below the first action whose state was not kept, the state itself is never needed again: only the
    # cotangent is walked back through the permutations there (the kept states serve the gate actions)
    unkept = [i for i in range(1, len(actions)) if actions[i].kind in _NEEDS_STATE and (states is None or states[i] is None)]
    lowest = min(unkept) if unkept else len(actions)
    for i in range(len(actions) - 1, max(first_needed, 1) - 1, -1):
        a = actions[i]
        kept = None if states is None else states[i]
        if kept is not None and own_psi:
            pool.give(psi)
            own_psi = False
        state = psi if kept is None else kept
        walk_state = kept is None and i >= lowest
        psi, h, gs = unapply(state, h, a, tensors[a.start : a.stop], needs[a.start : a.stop], n, walk_state, pool,
                             own_psi, own_h)
        own_psi, own_h = own_psi or walk_state, True
        grads[a.start : a.stop] = gs
    if first_needed == 0:
        a = actions[0]
        pool = psi = None  # the product-state VJP needs neither: their memory is free for its temporaries
        vectors = tensors[a.start : a.stop]
        if len(vectors) == 1 and vectors[0].ndim == 4:
            halves = states[0] if states is not None else None
            grads[a.start : a.stop] = [stacked_vjp(vectors[0], h, halves) if needs[a.start] else None]
        else:
            grads[a.start : a.stop] = product_vjp(vectors, h, needs[a.start : a.stop])
    return grads

"""State-vector program for narrow circuits: the plan of a structure compiled into a few large tensor ops.

The contraction of a narrow circuit's ket network *is* a state-vector simulation; doing it with a
compiled op list instead of pairwise einsums removes the permute copies and the per-gate overhead:

* **Layout.** The state is ``[2**n, S, B]`` (stack, batch last, contiguous): a gate that is the same for
  every stacked variant and batch element is one ``matmul`` of its ``D x D`` matrix against the view
  ``[2**q, D, rest]``, with no permute. Gates that differ per batch element / variant multiply element-wise
  against the trailing ``[S, B]`` axes.
* **Product state.** Single-qubit gates before the first multi-qubit gate (an embedding, the first
  rotation layer) are fused per wire and their first columns form the initial product state.
* **Gate fusion.** Single-qubit gates wait on their wire (they commute with gates on other wires) and are
  multiplied together; when the state must be touched they are applied in Kronecker blocks of up to
  a few adjacent wires (``kron_blocks``: four on the CPU, six on a GPU), one matmul per block.
* **Monomial gates.** Parameter-free gates with one non-zero per row (CNOT, SWAP, Toffoli, CZ, Pauli,
  S, T, ...) become one permutation of the basis (with phases) at plan time; consecutive ones compose
  into one gather.
* **Diagonal runs.** Consecutive diagonal gates (``RZ``, ``IsingZZ``, ``MultiRZ``, ``CZ``, ...: a QAOA cost
  layer) are one element-wise phase multiply from a plan-time angle table (``diagonal``); single-qubit
  gates waiting on a wire join the run when they are all diagonal, else they fuse into Kronecker blocks.
* **Z words.** Expectation values of Z-type Pauli words are one product of a sign matrix with the
  probabilities; a basis permutation after the last gate moves into the sign matrix.

**Adjoint differentiation.** A run is a list of actions (``kernels``) built from the gate matrices.
With gradients enabled the whole list, and the Z-word measurement, is one autograd node
(``AdjointProgram``): forward keeps the final state (and the states before its gate actions while they
fit ``KEEP_STATES_MAX_BYTES``); backward walks the actions in reverse, un-applying each unitary action
to the state and carrying the cotangent back, reading each gate matrix's cotangent on the way. Only the
small gate-building ops before the node are recorded by autograd; they chain the matrices' cotangents
to the parameters. Higher derivatives recompute the program with torch ops (exact Hessians).
"""

from __future__ import annotations

import math

import numpy as np
import pennylane as qml
import torch

from ...._threads import threads_for
from . import diagonal, kernels
from ...._constants import literal, on_device
from ..._gates import real_gate
from ..._structure import UNITARY_BY_CONSTRUCTION, TapeStructure, unitary_by_kind
from .allocator import tune_allocator as _tune_allocator
from .blocks import _Kron, _build_krons, _full_monomial, _monomial
from .adjoint import AdjointProgram, is_unitary, np_unitary
from .kernels import Action
from .excitations import TWO_LEVEL, two_level
from .permutation import LOCAL_PERMUTATION_MAX_WIRES, MONOMIAL_TABLE_MAX_WIRES, local_permutation
from .permutation import monomial_on, monomials_composed as _composed, monomials_span as _span
from .cost import check_state_memory
from .product import basis_bits, basis_ket
from .zwords import z_expvals, z_reader
from .kron_blocks import kron_groups, kron_max_wires

SPARSE_MAX_FRACTION = 3
"""A stacked gate is applied as row 0's gate plus a redo of the rows that differ when those are at most
1/SPARSE_MAX_FRACTION of the stack."""


class _Step:
    __slots__ = ("kind", "data")

    def __init__(self, kind: str, data):
        self.kind = kind
        self.data = data


class StateVectorProgram:
    """A narrow structure compiled to steps on a ``[2**n, S, B]`` state (see the module notes)."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, tape, dtype,
                 max_memory: float = math.inf, device="cpu"):
        self.n = n = len(structure.sim_wires)
        self.kron_wires = kron_max_wires(device)
        # refused before any table or state is made (a forward run; the adjoint's extra is checked when a run
        # records gradients)
        self.max_memory = max_memory
        self._lead = max(stack_size, 1) * (structure.batch_size or 1)
        check_state_memory(n, self._lead, dtype.itemsize, max_memory, gradient=False, what="the circuit's state")
        self._two_level: dict = {}  # slot -> its excitation tables (made at the first run)
        self.structure = structure
        self.stacked = stacked
        self.stack_size = stack_size
        steps: list[_Step] = []
        pending: dict[int, list[int]] = {}
        started = False
        phases: list[int] = []

        def flush(wires=None):
            nonlocal started
            if not started:
                steps.append(_Step("product", {w: pending.pop(w, []) for w in range(n)}))
                started = True
                return
            todo = sorted(w for w in (pending if wires is None else wires) if pending.get(w))
            if todo:
                steps.append(_Step("local", {w: pending.pop(w) for w in todo}))

        kinds: dict[int, str | None] = {}  # slot -> how it joins a diagonal run (None: it does not)

        open_run = lambda: steps[-1].data if steps and steps[-1].kind == "diagonal" else None  # noqa: E731
        absorb = lambda: diagonal.absorb_pending(open_run(), pending, kinds, structure.slots, tape.operations)  # noqa: E731

        self.basis_slots = []  # BasisState preparations: their bits start their wires' product vectors
        for si, slot in enumerate(structure.slots):
            if slot.kind in ("phase", "prep"):
                (phases if slot.kind == "phase" else self.basis_slots).append(si)
                continue
            op = tape.operations[slot.op_index]
            kinds[si] = diagonal.member_kind(op, slot.kind) if slot.kind != "prep" else None
            if len(slot.wires) == 1:
                pending.setdefault(slot.wires[0], []).append(si)
                continue
            kind = kinds[si] if n <= diagonal.RUN_MAX_WIRES else None
            if kind is not None and started:
                absorb()
            # constant diagonal gates join an open run they can reach; elsewhere they are monomials (which
            # compose with neighbouring permutations)
            if kind is not None and (kind != "const" or (open_run() is not None and not any(pending.get(w) for w in slot.wires))):
                if not started:
                    flush()
                if any(pending.get(w) for w in slot.wires):
                    flush()  # a non-diagonal gate waits on one of its wires: it comes first
                run = open_run()
                if run is None or not run.room():
                    run = diagonal.DiagonalRun(n)
                    steps.append(_Step("diagonal", run))
                run.add(si, kind, op, slot.wires)
                continue
            mono = None
            if slot.kind == "const":
                mono = _monomial(np.asarray(qml.matrix(op, wire_order=op.wires)))
            if any(pending.get(w) for w in slot.wires) or not started:
                absorb()
                flush()  # every waiting single-qubit gate at once: larger Kronecker blocks
            if mono is not None and n > MONOMIAL_TABLE_MAX_WIRES:
                gate = (tuple(slot.wires), *mono)
                prev = steps[-1] if steps and steps[-1].kind == "permute" else None
                if prev is not None and _span(prev.data + [gate]) <= LOCAL_PERMUTATION_MAX_WIRES:
                    prev.data.append(gate)  # one permutation of the wires they span
                else:
                    steps.append(_Step("permute", [gate]))
            elif mono is not None:
                src, vals = _full_monomial(n, slot.wires, *mono)
                prev = steps[-1] if steps and steps[-1].kind == "monomial" else None
                if prev is not None:  # compose with the previous gather: out[x] = c2 c1[P2] psi[P1[P2]]
                    p1, c1 = prev.data
                    prev.data = (p1[src], vals * c1[src])
                else:
                    steps.append(_Step("monomial", (src, vals)))
            else:
                steps.append(_Step("gate", si))
        absorb()
        flush()
        self.steps = [self._finish(s, dtype) for s in steps]
        self.phases = phases
        # the adjoint walk inverts every action by its conjugate transpose: closed-form gates are unitary,
        # constant ones are checked here once, operators' own matrices (user_matrices) at every run
        self.in_runs = in_runs = {si for st in self.steps if st.kind == "diagonal" for si in st.data.angles}
        # the slots whose matrices the actions use (a diagonal run reads its gates' angles, not matrices)
        self.matrix_slots = sorted(set(range(len(structure.slots))) - in_runs - set(self.basis_slots))
        self.user_matrices = [
            si for si, slot in enumerate(structure.slots)
            if slot.kind == "matrix" and si not in in_runs and slot.name not in UNITARY_BY_CONSTRUCTION
            and not unitary_by_kind(tape.operations[slot.op_index])
        ]  # fmt: skip
        # a gate without parameters is one of PennyLane's named gates, unitary by definition: only constant
        # matrices given as data (QubitUnitary, ...) are checked
        self.unitary = all(
            np_unitary(np.asarray(qml.matrix(op)))
            for op in (tape.operations[slot.op_index] for slot in structure.slots if slot.kind == "const")
            if op.num_params > 0
        )
        # gates real for every angle (RY, CNOT, Hadamard): their blocks may multiply a large state's real view
        self.real_slots = frozenset(
            si for si, slot in enumerate(structure.slots)
            if slot.kind in ("fast", "const") and real_gate(slot.kind, tape.operations[slot.op_index])
        )
        self.measure = z_reader(tape, structure) if n > 0 else None
        self.measure_signs = self.measure
        last = self.steps[-1] if self.steps else None
        if self.measure is not None and last is not None and last.kind == "monomial" and last.data[0] is not None:
            # E = s . |P psi|^2 = s[:, P^-1] . |psi|^2: the last permutation moves into the sign matrix
            self.measure_signs = self.measure[:, last.data[0][1]].contiguous()

    def _finish(self, step: _Step, dtype) -> _Step:
        if step.kind == "diagonal":
            step.data.finish()
        if step.kind == "permute":
            return _Step("permute", local_permutation(*_composed(step.data), dtype))
        if step.kind != "monomial":
            return step
        src, vals = step.data
        perm = torch.as_tensor(src)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(len(perm))
        identity = bool(np.array_equal(src, np.arange(len(src))))
        ones = bool(np.all(vals == 1))
        phase = None if ones else torch.as_tensor(np.asarray(vals, dtype=complex)).to(dtype)
        if not ones and np.all(np.imag(vals) == 0):
            phase = torch.as_tensor(np.real(vals).copy()).to(dtype.to_real())
        return _Step("monomial", (None if identity else (perm, inverse), phase))

    # --- running -------------------------------------------------------------------------------
    def run(self, values, lead_shape) -> torch.Tensor:
        """The final state, shape ``[2**n, S', B']`` (S', B' are 1 where absent).

        With gradients enabled the whole program is one autograd node (``AdjointProgram``) whose backward
        is the adjoint method; only the small gate-building ops before it are recorded one by one."""
        return self._run(values, None)

    def run_expvals(self, values) -> torch.Tensor:
        """``[measurements, S', B']`` Z-word expectation values (``self.measure`` is not None), measured inside
        the program's node: the basis permutation (and global phases) after the last gate are folded into
        the sign matrix, since they do not change the probabilities."""
        return self._run(values, self.measure_signs)

    def _run(self, values, signs):
        S = self.stack_size or 1
        B = self.structure.batch_size or 1
        with threads_for((1 << self.n) * S * B, values.device):  # small states: one intra-op thread
            return self._run_states(values, signs, S, B)

    def _run_states(self, values, signs, S: int, B: int):
        _tune_allocator((1 << self.n) * S * B * values.dtype.itemsize)
        grad = torch.is_grad_enabled()
        if grad and self.max_memory < math.inf:
            # (the states its forward keeps for the walk: one before each gate at most)
            check_state_memory(self.n, self._lead, values.dtype.itemsize, self.max_memory, gradient=True,
                               what="the circuit's state and its gradient", actions=len(self.structure.slots))
        if signs is not None:
            signs = on_device(signs, values.device, values.dtype.to_real())  # copied once per device and dtype
        actions, tensors = self.actions(values, sparse_ok=not grad, measuring=signs is not None)
        if grad and any(t.requires_grad for t in tensors):
            if self.unitary and all(is_unitary(values.matrix(si)) for si in self.user_matrices):
                return AdjointProgram.apply(actions, self.n, S, B, signs, *tensors)
            psi = kernels.run(actions, tensors, self.n, S, B, values.dtype, values.device, differentiable=True)
            return psi if signs is None else z_expvals(signs, psi)
        with torch.no_grad():
            psi = kernels.run(actions, tensors, self.n, S, B, values.dtype, values.device)
            return psi if signs is None else z_expvals(signs, psi)

    def actions(self, values, sparse_ok: bool, measuring: bool = False) -> tuple[list[Action], list[torch.Tensor]]:
        """The program's actions for these values, and their tensors in one flat list (``measuring``: without
        the final permutation and global phases, which ``measure_signs`` accounts for)."""
        actions: list[Action] = []
        tensors: list[torch.Tensor] = []

        def add(kind, info, *ts, real=False):
            actions.append(Action(kind, info, len(tensors), len(tensors) + len(ts), real))
            tensors.extend(ts)

        steps = self.steps[:-1] if measuring and self.steps[-1].kind == "monomial" else self.steps
        for step in steps:
            if step.kind == "product":
                add("product", None, *self._product_vectors(values, step.data))
            elif step.kind == "local":
                self._local(values, step.data, add, sparse_ok)
            elif step.kind == "monomial":
                data = monomial_on(step, values.device)
                if data is not None:
                    add("monomial", data)
            elif step.kind == "permute":
                add("permute", step.data)
            elif step.kind == "diagonal":
                add("diagonal", diagonal.RunCall(step.data), *step.data.tensors(values, self._diagonal_lead))
            else:
                self._gate(values, step.data, add)
        for si in () if measuring else self.phases:
            add("phase", None, _lead(values.slot(si), 0, si in self.stacked, self.structure.slots[si].batched))
        _build_krons(tensors)
        return actions, tensors

    def _matrix(self, values, si):
        """(matrix with lead normalised to [] or [S|1, B|1], lead present?)"""
        slot = self.structure.slots[si]
        m = values.matrix(si)
        stacked, batched = si in self.stacked, slot.batched
        if not stacked and not batched:
            return m, False
        return _lead(m, 2, stacked, batched), True

    def _diagonal_lead(self, si, d):
        return _lead(d, 1, si in self.stacked, self.structure.slots[si].batched)

    def _fused(self, values, slots: list[int]):
        """Product of a wire's waiting single-qubit gates (last applied leftmost)."""
        m, lead = None, False
        for si in slots:
            g, g_lead = self._matrix(values, si)
            lead = lead or g_lead
            m = g if m is None else torch.matmul(g, m)
        return m, lead

    def _product_vectors(self, values, pending) -> list[torch.Tensor]:
        """One ``[2, S|1, B|1]`` column per wire: the first column of its fused gates."""
        out, bits = [], basis_bits(values, self.basis_slots, self.structure)
        for w in range(self.n):
            slots, b = pending.get(w, []), bits.get(w, 0)
            if slots:
                m, lead = self._fused(values, slots)
                col = m[..., :, b]  # [2] or [S|1, B|1, 2]
                out.append(col.movedim(-1, 0) if lead else col[:, None, None])
            else:
                out.append(basis_ket(b, values.dtype, values.device))
        return out

    def _local(self, values, pending, add, sparse_ok: bool) -> None:
        plain, leaded, sparse = [], [], []
        for w, slots in pending.items():
            m, lead = self._fused(values, slots)
            rows = self._sparse_rows(values, slots) if lead and sparse_ok else None
            if rows is not None:  # stacked variants that differ here in a few rows only
                sparse.append((w, m, rows))
                plain.append((w, m[0, 0]))
            else:
                (leaded if lead else plain).append((w, m))
        blocks = self._kron_blocks(plain, self.kron_wires)
        if sparse:
            idx = literal(tuple(sorted(set().union(*(r for _, _, r in sparse)))), values.device, torch.long)
            mine = {w for w, _, _ in sparse}
            sub = self._kron_blocks([(w, m) for w, m in plain if w not in mine], self.kron_wires)
            info = ([(q, k) for q, k, _ in blocks], [(q, k) for q, k, _ in sub], [w for w, _, _ in sparse], idx)
            add("redo", info, *(K for _, _, K in blocks), *(K for _, _, K in sub), *(m for _, m, _ in sparse))
        else:
            real = {w for w, slots in pending.items() if self.real_slots.issuperset(slots)}
            for q, k, K in blocks:
                add("plain", (q, k), K, real=real.issuperset(range(q, q + k)))
        for w, m in leaded:
            add("lead", (w, 1), m)

    @staticmethod
    def _kron_blocks(plain, width: int):
        """(first wire, wires, matrix) of runs of adjacent plain wires, up to ``width`` each. A run of
        several wires gets a ``_Kron`` placeholder: ``actions`` builds all of them together at its end."""
        matrices = dict(plain)
        blocks = []
        for group in kron_groups(sorted(matrices), width):
            members = [matrices[w] for w in group]
            blocks.append((group[0], len(members), members[0] if len(members) == 1 else _Kron(members)))
        return blocks

    def _sparse_rows(self, values, slots) -> set | None:
        """Stack rows where a wire's fused gates differ from row 0's, when they are few (else None).

        Parameter-shift stacks differ from their first variant in one parameter each, so a gate is
        row 0's gate in all but a handful of rows: applying row 0's gate as a plain (Kronecker-fused)
        matmul and redoing those rows beats an element-wise gate over every row."""
        if self.stack_size < 2:
            return None
        rows: set = set()
        for si in slots:
            if self.structure.slots[si].batched:
                return None
            if si in self.stacked:
                r = values.changed_rows(si)
                if r is None:
                    return None
                rows |= r
        if not rows or len(rows) * SPARSE_MAX_FRACTION > self.stack_size:
            return None
        return rows

    def _gate(self, values, si, add) -> None:
        slot = self.structure.slots[si]
        m, lead = self._matrix(values, si)
        if not lead and slot.name in TWO_LEVEL:  # an excitation: on the amplitudes it mixes (excitations.py)
            return add("two_level", two_level(self._two_level, si, slot, self.n), m)
        wires = list(slot.wires)
        k = len(wires)
        order = sorted(range(k), key=lambda i: wires[i])
        if order != list(range(k)):
            lead_dims = m.shape[:-2]
            t = m.reshape(*lead_dims, *(2,) * (2 * k))
            nl = len(lead_dims)
            perm = list(range(nl)) + [nl + i for i in order] + [nl + k + i for i in order]
            m = t.permute(perm).reshape(*lead_dims, 2**k, 2**k)
            wires = sorted(wires)
        if wires == list(range(wires[0], wires[0] + k)):
            add("lead" if lead else "plain", (wires[0], k), m, real=si in self.real_slots)
        else:
            add("scattered", (tuple(wires), lead), m)


def _lead(m: torch.Tensor, core: int, stacked: bool, batched: bool) -> torch.Tensor:
    """``m`` with lead axes ``[S|1, B|1]`` (``core`` trailing axes are the gate's own)."""
    if stacked and batched:
        return m
    if stacked:
        return m.unsqueeze(m.ndim - core)
    return m.unsqueeze(0)



"""The mixed-state program of one circuit structure: its operators sorted at plan time into a product stage and a
list of steps on the full density matrix, then run on one group's operand values.

* **Product stage.** Single-wire operators (gates and channels) that come before a wire's first multi-wire
  operator act on that wire's own ``2 x 2`` density matrix (an embedding and the noise after it cost nothing on
  the full state); state preparations give their wires' block. The blocks' outer product is the first full state.
* **Fusion.** Later single-wire operators wait on their wire and are composed (unitaries as one ``2 x 2`` matrix,
  a run with a channel in it as one ``4 x 4`` superoperator) until a multi-wire operator touches the wire.
* **Monomials.** Parameter-free gates with one non-zero per row (CNOT, CZ, SWAP, Toffoli) are basis
  permutations with phases found at plan time; consecutive ones compose, and each run costs two gathers
  (one gather of ``rho``'s rows) instead of two matmuls per gate.
* **Steps.** A unitary is applied to the ket and bra wires (``evolve.apply_unitary``), a channel as its
  superoperator. Everything is torch ops: backprop (and the device's VJP, torch reverse mode through this
  program) differentiates gates and channel parameters alike, to any order.

Memory: the state is ``4**n x S x B`` complex numbers; the program refuses, before allocating, one that exceeds
the device's ``max_memory``. Reverse mode keeps the state before each step (``steps + 1`` states at most).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

from .....errors import ContractionTooLargeError
from ..network.plan import _fmt_bytes
from .channels import superoperator
from ..statevector.blocks import _full_monomial, _monomial
from .evolve import apply_monomial, monomial_rows, apply_superoperator, apply_unitary, local_superoperator, local_unitary, product_density
from .heisenberg import heisenberg_applies, heisenberg_expvals
from ...._constants import literal
from ..._gates import real_gate
from .report import engine_choices
from .measure import DensityReader
from .pauli import PAULI_WALK_MAX_WIRES, PauliWalk
from ..lightcone.program import holds_matrix, scalar_data


DENSITY_PEAK_MATRICES = 6
"""Density-matrix-sized buffers a run holds at its peak: a step's input and output, its permuted operand and the
readout's (measured at 11 wires, forward and adjoint: 5.4 matrices of growth; the check counted one, and a 14-wire
circuit the default max_memory admitted was killed at 19 GB)."""


class MixedProgram:
    """A structure with channels compiled to a product stage and full-state steps (see the module notes).

    >>> import qhybrid
    >>> dev = qhybrid.device("tensornet", wires=1)
    >>> tape = qml.tape.QuantumScript([qml.BitFlip(0.25, 0)], [qml.expval(qml.Z(0))])
    >>> float(dev.execute(tape))
    0.5
    """

    reads_observable_data = False

    def __init__(self, structure, stacked: frozenset, stack_size: int, opts, tape):
        self.n = n = len(structure.sim_wires)
        self.structure, self.stacked = structure, stacked
        self.max_memory, self.itemsize = opts.max_memory, opts.dtype.itemsize
        lead = max(stack_size, 1) * (structure.batch_size or 1)
        # (where a matrix inside a measured term's cone kept the light cones off, the refusal says so)
        self._matrices = None if scalar_data(structure, tape) else _matrix_names(tape)
        if n > PAULI_WALK_MAX_WIRES:  # no Pauli walk either: refused before the plan's 2**n tables are built
            self._check_density(lead)
        self.local: dict[int, list[int]] = {w: [] for w in range(n)}  # wire -> slots on its own density matrix
        self.preps: list[int] = []
        self.steps: list[tuple] = []  # ("unitary" | "channel" | "fused", slots, wires)
        started: set[int] = set()
        pending: dict[int, list[int]] = {}

        def flush(wires):
            for w in wires:
                slots = pending.pop(w, None)
                if slots:
                    self.steps.append(("fused", tuple(slots), (w,)))

        for si, slot in enumerate(structure.slots):
            if slot.kind == "phase":
                continue  # a global phase cancels in U rho U^dagger
            if slot.kind == "prep":
                self.preps.append(si)
                started.update(slot.wires)
                continue
            if len(slot.wires) == 1:
                w = slot.wires[0]
                (pending.setdefault(w, []) if w in started else self.local[w]).append(si)
                continue
            mono = _monomial(np.asarray(qml.matrix(tape.operations[slot.op_index]))) if slot.kind == "const" else None
            # a permutation that waits on some wire flushes every waiting wire, so the rest of a CNOT ring
            # composes with it into one gather instead of being split by the fused steps of the wires it reaches
            waits = any(w in pending for w in slot.wires)
            flush(sorted(pending) if mono is not None and waits else slot.wires)
            started.update(slot.wires)
            if mono is not None:  # a permutation with phases: two gathers, composed with the one before
                src, vals = _full_monomial(n, slot.wires, *mono)
                if self.steps and self.steps[-1][0] == "monomial":
                    src0, vals0 = self.steps[-1][1]
                    src, vals = src0[src], vals * vals0[src]
                    self.steps.pop()
                self.steps.append(("monomial", (src, vals), ()))  # rows of rho built at the first run
                continue
            self.steps.append(("channel" if slot.kind == "channel" else "unitary", (si,), slot.wires))
        flush(sorted(pending))
        self._monomials: dict = {}
        self._pauli_walk = None
        self._ran: set[str] = set()  # "forward" and/or "walk": what run() chose (plan_cache_info reports it)
        self.matrix_slots = [si for si, s in enumerate(structure.slots) if s.kind in ("fast", "const", "matrix")]
        ops = tape.operations
        self.real_slots = frozenset(si for si in self.matrix_slots if real_gate(structure.slots[si].kind, ops[structure.slots[si].op_index]))

    # --- run ----------------------------------------------------------------------------------------

    def run(self, values, variant, structure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(self.matrix_slots)
        measurements = variant.tape.measurements
        if heisenberg_applies(self, measurements, int(np.prod(lead_shape, dtype=int))):
            self._ran.add("walk")
            return heisenberg_expvals(self, values, measurements, lead_shape)
        self._ran.add("forward")
        rho = self.final_state(values, lead_shape)
        reader = DensityReader(rho, self.n, lead_shape, structure.sim_wires, values.dtype)
        return [reader.measure(mp) for mp in variant.tape.measurements]

    @property
    def engine_choices(self) -> tuple:
        """What ran (``dev.plan_cache_info().engines``): the density matrix forward, the observables walked back
        (``heisenberg``), or both (runs of different batch sizes); before a run, the plan."""
        return engine_choices(self)

    def pauli_walk(self) -> PauliWalk:
        """The Heisenberg walk's Pauli-basis form of this program (its Clifford tables built at the first use)."""
        if self._pauli_walk is None:
            self._pauli_walk = PauliWalk(self)
        return self._pauli_walk

    def density_bytes(self, lead: int) -> int:
        """Memory of the ``[4**n, lead]`` density matrix."""
        return (1 << (2 * self.n)) * lead * self.itemsize

    def peak_bytes(self, lead: int) -> int:
        """Memory a run of the density matrix takes at its peak (``DENSITY_PEAK_MATRICES`` of them)."""
        return DENSITY_PEAK_MATRICES * self.density_bytes(lead)

    def final_state(self, values, lead_shape) -> torch.Tensor:
        """The ``[4**n, S, B]`` density matrix after every operator (``S``, ``B``: 1 where absent); refused with
        its size, before it is allocated, where it exceeds ``max_memory``."""
        self._check_density(int(np.prod(lead_shape, dtype=int)))
        S = lead_shape[0] if self.stacked else 1
        B = self.structure.batch_size or 1
        rho = product_density(self._blocks(values), self.n, S, B)
        for step in self.steps:
            rho = self.apply_step(rho, values, step, transpose=False)
        return rho

    def _check_density(self, lead: int) -> None:
        if self.peak_bytes(lead) > self.max_memory:
            n = self.n
            raise ContractionTooLargeError(
                f"The density matrix of this noisy circuit on {n} wires needs about {_fmt_bytes(self.peak_bytes(lead))} "
                f"at its peak ({DENSITY_PEAK_MATRICES} matrices of 4**{n} x {lead} lead x {self.itemsize} bytes), above "
                f"max_memory={_fmt_bytes(self.max_memory)}. "
                "Use fewer wires or a smaller batch, or raise the device's max_memory (expectation values of Pauli "
                "sentences with the data in a per-wire embedding walk back as observables instead: see docs/NOISE.md)."
                + ("" if not self._matrices else f" Light cones, which measure each term on its own wires, were not "
                   f"used: they take scalar parameters only, and {self._matrices} in the measured wires' cone holds a "
                   "matrix (write a channel as PennyLane's named channels where it is one).")
            )

    def apply_step(self, rho: torch.Tensor, values, step, transpose: bool) -> torch.Tensor:
        """One step on ``rho``; ``transpose``: its transpose instead (the Heisenberg picture's step back on an
        observable ``vec(O^T)``: ``Tr(O S(rho)) = vec(O^T) . S vec(rho)``)."""
        kind, slots, wires = step
        if kind == "monomial":
            return apply_monomial(rho, *self._monomial_tensors(step, values, transpose), self.n)
        if kind == "fused":
            kind, m = self._fused(values, slots)
        else:
            m = self._operator(values, slots[0])
        if transpose:
            m = m.mT
        apply = apply_unitary if kind == "unitary" else apply_superoperator
        lead = m.shape[0] != 1 or m.shape[1] != 1
        real = kind == "unitary" and self.real_slots.issuperset(slots)  # RY, CNOT: known from the plan
        return apply(rho, m if lead else m[0, 0], wires, self.n, lead, real)

    def _monomial_tensors(self, step, values, transpose: bool):
        key = (id(step), transpose, values.dtype, str(values.device))
        hit = self._monomials.get(key)
        if hit is None:
            src, vals = monomial_rows(*step[1], self.n)
            if transpose:  # o'[src[x]] = v[x] o[x]
                inv = np.argsort(src)
                src, vals = inv, vals[inv]
            phases = None if np.allclose(vals, 1) else torch.as_tensor(vals, dtype=values.dtype, device=values.device)
            hit = self._monomials[key] = (torch.as_tensor(src, device=values.device), phases)
        return hit

    def _operator(self, values, si: int) -> torch.Tensor:
        """A slot's matrix (gate) or superoperator (channel) with lead axes ``[S|1, B|1]``."""
        return _lead4(self._raw_operator(values, si), self, si)

    def _raw_operator(self, values, si: int) -> torch.Tensor:
        slot = self.structure.slots[si]
        if slot.kind != "channel":
            return values.matrix(si)
        op = values.group[0].tape.operations[slot.op_index]
        # stacked rows that differ come as columns with a leading stack axis: the superoperator broadcasts
        return superoperator(op, values._params(si), values.dtype, values.device)

    def _fused(self, values, slots) -> tuple[str, torch.Tensor]:
        """Single-wire operators in order as one unitary, or (a channel among them) one superoperator."""
        kinds = [self.structure.slots[si].kind == "channel" for si in slots]
        mats = [self._operator(values, si) for si in slots]
        if not any(kinds):
            out = mats[0]
            for m in mats[1:]:
                out = m @ out
            return "unitary", out
        out = None
        for m, is_channel in zip(mats, kinds):
            s = m if is_channel else _unitary_superoperator(m)
            out = s if out is None else s @ out
        return "channel", out

    def _blocks(self, values) -> list[tuple[tuple[int, ...], torch.Tensor]]:
        """Each wire's (or prepared block's) density matrix after its local operators, ``[S|1, B|1, D, D]``."""
        dtype, device = values.dtype, values.device
        blocks = []
        for si in self.preps:
            psi = values.slot(si)
            k = len(self.structure.slots[si].wires)
            psi = _lead4(psi.reshape(*psi.shape[: psi.ndim - k], 1 << k, 1), self, si)
            blocks.append((self.structure.slots[si].wires, psi @ psi.mH))
        prepared = {w for si in self.preps for w in self.structure.slots[si].wires}
        zero = literal(((1, 0), (0, 0)), device, dtype).reshape(1, 1, 2, 2)  # |0><0| once per device (never written)
        for w in range(self.n):
            if w in prepared:
                continue
            rho = zero
            for si in self.local[w]:
                m = self._operator(values, si)
                if self.structure.slots[si].kind == "channel":
                    rho = local_superoperator(rho, m)
                else:
                    rho = local_unitary(rho, m)
            blocks.append(((w,), rho))
        return blocks


def _unitary_superoperator(u: torch.Tensor) -> torch.Tensor:
    """``U (x) conj(U)`` of a one-qubit unitary (a 4 x 4 matrix: cheaper than two passes where a run has a
    channel anyway), lead axes kept."""
    d = u.shape[-1]
    return (u[..., :, None, :, None] * u.conj()[..., None, :, None, :]).reshape(*u.shape[:-2], d * d, d * d)


def _lead4(t: torch.Tensor, program: MixedProgram, si: int) -> torch.Tensor:
    """A slot tensor with trailing core axes (two of them) and lead axes reshaped to ``[S|1, B|1]``."""
    lead = t.shape[:-2]
    core = t.shape[-2:]
    if len(lead) == 2:
        return t
    if len(lead) == 0:
        return t.reshape(1, 1, *core)
    stacked = si in program.stacked
    batched = program.structure.slots[si].batched
    if stacked and not batched:
        return t.reshape(lead[0], 1, *core)
    return t.reshape(1, lead[0], *core)


def _matrix_names(tape) -> str:
    """The operators of ``tape`` that hold a matrix, named (``QubitChannel on wires [3]``)."""
    names = [f"{op.name} on wires {op.wires.tolist()}" for op in tape.operations if holds_matrix(op)]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

"""Several cone classes as ONE stacked state: the plan (gather tables made once), run by ``stacked_node``.

Each state-vector cone class ran its own bound node (``bound_class``): ~200 aten ops a class and step (Q100 p=2:
six classes, 1,354 ops a step), though the arithmetic of a 14-wire class is well under a millisecond. Classes
whose bound programs have the same sequence of steps (a QAOA cone: constant product, cost run, mixer, cost run,
mixer) run here as the rows of one ``[S, 2**N]`` state, N the widest class's width: a narrower class's extra
wires are appended last and stay in ``|0>`` (no gate touches them; its tables ignore them). Per step:

* a diagonal run is one ``bmm`` of the rows' angle tables ``[S, 2**N, G]`` (a class with fewer gates has zero
  rows: an angle times a zero row adds nothing and gets a zero cotangent) with their angles ``[S, G, 1]``;
* a local step is the union of the classes' local wires, in Kronecker blocks of adjacent wires: each row's
  factor on a wire is its class's gate there, a constant, or the identity (a class without a gate there), so
  every block is one ``[S, D, D]`` batch for all rows, all blocks of one size built by one gather and one
  product (``kron_tables``);
* every gate's angles are gathered straight from the cone program's parameter row (``params``) by one index
  table per gate kind, and every cotangent goes back to it by one scatter over (gate angle, member) pairs, so
  that each member of a class gets its own gradient (members of a class read equal parameters: one row of the
  stack serves them all, as ``shared.run_distinct``).

Where a class does not fit (its bound program has other steps, a chain of several gates on a wire, a batch,
...) it runs as before. ``plan_stack`` returns None where fewer than two classes fit.
"""

from __future__ import annotations

import numpy as np
import torch

from ..._gates import constant_matrix
from ..statevector import phase_factors
from ..statevector.phase_factors import factored
from ..statevector.kron_blocks import kron_groups

STACK_MAX_AMPLITUDES = 1 << 18
"""A stack holds at most this many amplitudes (rows times ``2**N``: 4 MiB a state in complex128); more classes
go to further stacks, narrowest widths together."""

STACK_MAX_WASTE = 1.5
"""A stack's padded amplitudes are at most this many times its classes' own. On the CPU the padding's arithmetic
costs more than the ops it saves beyond that (Q100 p=2, one thread, CPU time a step: every class alone 39 ms,
one stack padding 2.4x 39-50 ms and 231 ops, two stacks within 1.5x 34-35 ms and 422 ops); on a GPU, where each op
is a launch, a larger bound may pay (not measured yet)."""

class Entry:
    """One row of the stack: a class (its bound program, its steps) and the member whose parameter row it runs."""

    __slots__ = ("c", "bp", "row", "skeleton")

    def __init__(self, c, bp, row: int, skeleton: list):
        self.c, self.bp, self.row, self.skeleton = c, bp, row, skeleton


class Member:
    """A stacked class: ``first[k]``, the member whose row stack row ``k`` of the class runs; ``inverse[m]``,
    member m's ``k``."""

    __slots__ = ("c", "bp", "skeleton", "first", "inverse")

    def __init__(self, c, bp, skeleton: list, first: list[int], inverse: list[int]):
        self.c, self.bp, self.skeleton, self.first, self.inverse = c, bp, skeleton, first, inverse


def skeleton(bp) -> list | None:
    """The bound program's steps as [("product", {wire: member}) | ("diagonal", (run, angle columns)) |
    ("local", {wire: member})], a member being ("gate", name, columns) or ("const", op); None where it has
    anything else (the stack runs only these)."""
    if bp.signs is None or bp.signs.shape[0] != 1 or bp.structure.batch_size is not None:
        return None
    out = []
    for kind, data in bp.steps:
        if kind == "product0":
            out.append(("product", {w: _const_member(bp, ref) for w, ref in data.items()}))
        elif kind == "diagonal":
            run, ri = data
            if run.vectors or not run.angles:
                return None
            out.append(("diagonal", (run, [int(row[0][1].reshape(-1)[0]) for row in bp.runs[ri]])))
        elif kind in ("local", "product"):
            refs = data if kind == "product" else _local_refs(data)
            if refs is None:
                return None
            members = {}
            for w, ref in refs.items():
                m = _member(bp, ref)
                if m is None:
                    return None
                members[w] = m
            if kind == "product":
                out.append(("product", {}))
            out.append(("local", members))
        else:
            return None
    if not out or out[0][0] != "product":
        return None
    return out


def _local_refs(plan) -> dict | None:
    refs = {}
    for item in plan:
        if item[0] == "block":
            _, q, size, _, members = item
            refs.update({q + i: members[i] for i in range(size)})
        elif item[0] == "single":
            refs[item[1]] = item[2]
        else:
            return None
    return refs


def _const_member(bp, ref):
    ci, e = ref
    chain = bp.chains[ci]
    return ("const", [ops[e] for _, ops in chain.elems])


def _member(bp, ref):
    ci, e = ref
    chain = bp.chains[ci]
    if chain.const:
        return _const_member(bp, ref)
    if len(chain.elems) != 1:
        return None
    _, gid, positions = chain.elems[0]
    name, _, spec = bp.groups[gid]
    pos = int(positions[e])
    return ("gate", name, tuple(int(col[pos][1].reshape(-1)[0]) for col in spec))


def kinds_of(sk: list) -> tuple:
    return tuple(kind for kind, _ in sk)


class StackPlan:
    """The stacked run of ``entries`` (see the module notes): host tables, moved to a device once."""

    def __init__(self, classes: list[Member], total_params: int, sources: torch.Tensor | None = None):
        self.classes = classes
        entries, row_of = [], []  # row_of[class][k]: the class's k-th stack row
        for cm in classes:
            row_of.append([len(entries) + k for k in range(len(cm.first))])
            entries.extend(Entry(cm.c, cm.bp, r, cm.skeleton) for r in cm.first)
        self.entries = entries
        S = self.S = len(entries)
        N = self.N = max(e.bp.n for e in entries)
        self.total_params = total_params
        dim = 1 << N
        x = np.arange(dim)
        shift = [N - e.bp.n for e in entries]
        # the classes' members, class by class in member order: member -> its row of the stack
        self.member_row = np.array([rows[k] for cm, rows in zip(classes, row_of) for k in cm.inverse], dtype=np.int64)
        self.sizes = [len(cm.inverse) for cm in classes]
        self.shares = S < len(self.member_row)
        """Whether some rows serve several members (members with equal parameters run once)."""
        self._rows = row_of
        # product state: each row's constant product (wires beyond its class: |0>)
        psi0 = np.zeros((S, dim), dtype=np.complex128)
        ops_table: list = []  # constant 2x2 factors (op lists to multiply), deduplicated by key below
        const_index: dict = {}
        kinds: dict = {}  # gate name -> [(row, columns)]
        self.steps: list = []
        runs: list = []
        blocks: dict = {}  # size -> [[row -> [factor refs]]] per block
        angle_sources: list = []  # per run: [S, G] class columns (-1: padding)
        sums: list = []  # per run: [S, 2**N] its gates' tables summed (``_shared_phases``), None with constants
        first = entries[0].skeleton
        for t, (kind, _) in enumerate(first):
            if kind == "product":
                if t == 0:
                    for s, e in enumerate(entries):
                        vec = np.ones(1, dtype=np.complex128)
                        for w in range(e.bp.n):
                            m = e.skeleton[0][1].get(w)
                            v = np.array([1, 0], dtype=np.complex128) if m is None else _const_np(m)[:, 0]
                            vec = np.kron(vec, v)
                        psi0[s] = np.kron(vec, np.eye(1 << shift[s], dtype=np.complex128)[0])
                continue
            if kind == "diagonal":
                G = max(len(e.skeleton[t][1][1]) for e in entries)
                table = np.zeros((S, G, dim))
                cols = -np.ones((S, G), dtype=np.int64)
                const = None
                for s, e in enumerate(entries):
                    run, columns = e.skeleton[t][1]
                    T = run.table
                    table[s, : T.shape[0]] = T[:, x >> shift[s]]
                    cols[s, : len(columns)] = columns
                    if run.const is not None:
                        const = np.zeros((S, dim)) if const is None else const
                        const[s] = run.const[x >> shift[s]]
                self.steps.append(("diagonal", len(runs)))
                runs.append((factored(table, N), const))
                angle_sources.append(cols)
                sums.append(table.sum(1) if const is None else None)
                continue
            wires = sorted(set().union(*(e.skeleton[t][1] for e in entries)))
            items = []
            for q, k in _blocks(wires, entries[0].bp.program.kron_wires):
                per_row = []
                for s, e in enumerate(entries):
                    refs = []
                    for w in range(q, q + k):
                        m = e.skeleton[t][1].get(w)
                        if m is None or m[0] == "const":
                            key = "I" if m is None else _const_key(m)
                            if key not in const_index:
                                const_index[key] = len(ops_table)
                                ops_table.append(None if m is None else m[1])
                            refs.append(("c", const_index[key]))
                        else:
                            at = kinds.setdefault(m[1], [])
                            refs.append(("g", m[1], len(at)))
                            at.append((s, m[2]))
                    per_row.append(refs)
                size_blocks = blocks.setdefault(k, [])
                items.append((q, k, len(size_blocks)))
                size_blocks.append(per_row)
            self.steps.append(("local", items))
        self.psi0 = psi0
        self.const_ops = ops_table
        self.kinds = sorted(kinds)
        offsets, at = {}, 0
        for name in self.kinds:
            offsets[name] = at
            at += len(kinds[name])
        self.const_offset = at
        # per gate kind: [k, gates] flat parameter positions (the entry's member row); per block size: factor rows
        self.kind_index = [np.array([[self._position(s, c[j]) for s, c in kinds[name]]
                                     for j in range(len(kinds[name][0][1]))], dtype=np.int64) for name in self.kinds]
        self.block_tables = {}
        for k, bl in blocks.items():
            rows = [[[offsets[r[1]] + r[2] if r[0] == "g" else at + r[1] for r in refs] for refs in per_row] for per_row in bl]
            self.block_tables[k] = np.array(rows, dtype=np.int64).reshape(-1)  # [blocks * S * k]
        self.runs = runs
        self.run_index = [np.where(cols >= 0, self._positions(cols), 0) for cols in angle_sources]
        where = None if sources is None else sources.cpu().numpy()
        self.shared = [_shared_phases(index, cols, C, where)
                       for index, cols, C in zip(self.run_index, angle_sources, sums)]
        signs = np.stack([np.asarray(e.bp.signs.detach().cpu().double())[0][x >> shift[s]] for s, e in enumerate(entries)])
        self.signs = 2.0 * signs  # the cotangent of |psi|^2 carries the 2
        self.half_signs = signs
        self._scatter(kinds, angle_sources)
        self._device: dict = {}

    def _position(self, s: int, column: int) -> int:
        e = self.entries[s]
        return int(e.c.table[e.row, column])

    def _positions(self, cols):
        return np.array([[self._position(s, c) if c >= 0 else 0 for c in row] for s, row in enumerate(cols)], dtype=np.int64)

    def _scatter(self, kinds, angle_sources) -> None:
        """(target parameter, member, angle) for every gate angle and every member of its row: the member's
        cotangent times the angle's (``ga``, the angle cotangents in ``stacked_node`` order) into its parameter."""
        per_angle = []  # (row, class column) in ga order
        for name in self.kinds:
            k = len(kinds[name][0][1])
            per_angle.extend((s, cols[j]) for j in range(k) for s, cols in kinds[name])
        for cols, shared in zip(angle_sources, self.shared):
            if shared is not None:  # one cotangent a row, the run's whole, onto its first gate's angle (the others
                # read the same input: its gradient is their sum)
                per_angle.extend((s, int(row[row >= 0][0]) if (row >= 0).any() else -1) for s, row in enumerate(cols))
                continue
            per_angle.extend((s, int(c)) for s in range(cols.shape[0]) for c in cols[s])
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        members_of = {}  # stack row -> [(member's output position, its class table row)]
        for ci, (cm, rows) in enumerate(zip(self.classes, self._rows)):
            for m, k in enumerate(cm.inverse):
                members_of.setdefault(rows[k], []).append((int(starts[ci]) + m, m))
        target, member, angle = [], [], []
        for a, (s, col) in enumerate(per_angle):
            if col < 0:
                continue
            table = self.entries[s].c.table
            for out, m in members_of[s]:
                target.append(int(table[m, col]))
                member.append(out)
                angle.append(a)
        self.target = np.array(target, dtype=np.int64)
        self.member = np.array(member, dtype=np.int64)
        self.angle = np.array(angle, dtype=np.int64)

    def on(self, dtype, device) -> dict:
        """The plan's tensors in ``dtype`` (complex) on ``device``, made once per pair."""
        key = (dtype, str(device))
        hit = self._device.get(key)
        if hit is None:
            real = dtype.to_real()
            long = lambda a: torch.as_tensor(a, dtype=torch.long, device=device)  # noqa: E731
            as_real = lambda a: torch.as_tensor(a, dtype=real, device=device)  # noqa: E731
            consts = [torch.eye(2, dtype=dtype, device=device) if ops is None else _const_tensor(ops, dtype, device)
                      for ops in self.const_ops]
            hit = self._device[key] = {
                "psi0": torch.as_tensor(self.psi0, dtype=dtype, device=device),
                "consts": torch.stack(consts) if consts else None,
                "kind_index": [long(i) for i in self.kind_index],
                "blocks": {k: long(t) for k, t in self.block_tables.items()},
                "tables": [(_run_tensors(factors, as_real), None if L0 is None else as_real(L0))
                           for factors, L0 in self.runs],
                "run_index": [long(i) for i in self.run_index],
                "shared": [None if sh is None else (long(sh[0]), as_real(sh[1]), long(sh[2]), as_real(sh[3]))
                           for sh in self.shared],
                "signs_pairs": as_real(np.repeat(self.half_signs, 2, axis=-1)[:, None, :]),
                "signs2": as_real(self.signs),
                "member_row": long(self.member_row),
                "target": long(self.target), "member": long(self.member), "angle": long(self.angle),
            }
        return hit


def _shared_phases(index: np.ndarray, cols: np.ndarray, C: np.ndarray | None, sources: np.ndarray | None):
    """A run whose gates read one parameter source in each row (``sources``: where each parameter position is
    gathered from) as ``(positions [S * D], values [S * D], codes [S, 2**N], weights [S, 2 * 2**N, 1])``: its
    phases are ``exp(i theta values)`` (``theta`` read at ``positions``, row s's angle D times) taken at ``codes``,
    and the angle's cotangent is ``w . weights`` (``w`` a cotangent product's real view). None where a row's gates
    read several, the run has constant phases (``C`` None), or ``C`` has more than
    ``phase_factors.PHASE_TABLE_MAX_VALUES`` values in a row."""
    if sources is None or C is None:
        return None
    S = cols.shape[0]
    position = np.zeros(S, dtype=np.int64)
    for s in range(S):
        real = index[s][cols[s] >= 0]
        if real.size and len(set(sources[real].tolist())) != 1:
            return None
        position[s] = real[0] if real.size else 0  # no gate in this row: C is zero there, any angle gives 1
    found = [phase_factors.phase_values(C[s]) for s in range(S)]
    D = max(len(v) for v, _ in found)
    if D > phase_factors.PHASE_TABLE_MAX_VALUES:
        return None
    values = np.zeros((S, D))
    codes = np.empty(C.shape, dtype=np.int64)
    for s, (v, inverse) in enumerate(found):
        values[s, : len(v)] = v
        codes[s] = inverse + s * D
    weights = np.zeros((S, C.shape[1], 2))
    weights[..., 1] = -C  # ``-sum_x C Im(w)`` as one dot with a complex product's interleaved real view
    return np.repeat(position, D), values.reshape(-1), codes, weights.reshape(S, -1, 1)


def _run_tensors(factors: tuple, as_real) -> tuple:
    """What ``stacked_node`` reads of a run: ``(T, -T)`` for a dense table; for factors ``(U^T, V, U, W)`` with
    ``W [S, G, 2 * 2**l]`` holding ``-V`` at the imaginary slots of an interleaved complex row (so the backward
    reads ``-sum_x T Im(w)`` with one product and one sum)."""
    if len(factors) == 1:
        return as_real(factors[0]), as_real(-factors[0])
    U, V = factors
    W = np.zeros((*V.shape, 2))
    W[..., 1] = -V
    return (as_real(np.ascontiguousarray(U.transpose(0, 2, 1))), as_real(V), as_real(U),
            as_real(W.reshape(*V.shape[:2], -1)))


def _const_key(m) -> tuple:
    return tuple((op.name, tuple(np.asarray(op.matrix()).reshape(-1).round(15).tolist())) for op in m[1])


def _const_np(m) -> np.ndarray:
    out = np.eye(2, dtype=np.complex128)
    for op in m[1]:
        out = np.asarray(op.matrix()) @ out
    return out


def _const_tensor(ops, dtype, device) -> torch.Tensor:
    out = torch.eye(2, dtype=dtype, device=device)
    for op in ops:
        out = constant_matrix(op, dtype, device) @ out
    return out


def _blocks(wires: list[int], width: int) -> list[tuple[int, int]]:
    """(first wire, size) of Kronecker blocks of adjacent wires, up to ``width`` each (``kron_groups``)."""
    return [(group[0], len(group)) for group in kron_groups(wires, width)]


__all__ = ["Entry", "Member", "StackPlan", "skeleton", "kinds_of", "STACK_MAX_AMPLITUDES", "STACK_MAX_WASTE"]

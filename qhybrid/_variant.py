"""A tape paired with the flat parameter list to run it with: the unit every launcher and JPC moves."""

from __future__ import annotations

import copy

from dataclasses import dataclass, field

import pennylane as qml
import torch

from .devices._observable_key import refresh_pauli_reps


@dataclass(eq=False)
class Gather:
    """How a tape's parameters are gathered from a few input tensors (found by preprocessing).

    ``maps[j]`` is ``(input position, flat indices)`` or ``("const", value)`` for parameter ``j``. Gradients
    can then be taken with respect to the inputs themselves (one autograd leaf each) and parameters of one
    gate kind read from an input with one indexing op, instead of one scalar tensor per gate parameter.
    """

    inputs: tuple
    maps: tuple
    _groups: dict | None = field(default=None, repr=False)
    memo: dict = field(default_factory=dict, repr=False)
    """Indexes derived from ``maps`` by the simulator (shared by every rebound copy)."""

    def groups(self) -> dict:
        """Per input: the parameter positions it feeds, their concatenated flat indices, sizes and shapes."""
        if self._groups is None:
            groups: dict[int, list] = {}
            for pos, m in enumerate(self.maps):
                if m[0] != "const":
                    groups.setdefault(m[0], []).append((pos, m[1]))
            out = {}
            for src, items in groups.items():
                positions = [pos for pos, _ in items]
                index = torch.cat([idx.reshape(-1) for _, idx in items])
                out[src] = (positions, index, [idx.numel() for _, idx in items], [tuple(idx.shape) for _, idx in items])
            self._groups = out
        return self._groups

    def params(self, inputs) -> list:
        """The parameters gathered from ``inputs`` (differentiable: one indexing op per input)."""
        new: list = [m[1] if m[0] == "const" else None for m in self.maps]
        for src, (positions, index, sizes, shapes) in self.groups().items():
            values = inputs[src].reshape(-1)[self.index_on(index, inputs[src].device)]
            if all(s == 1 for s in sizes) and all(not sh for sh in shapes):
                for pos, v in zip(positions, values.unbind(0)):
                    new[pos] = v
            else:
                for pos, v, sh in zip(positions, values.split(sizes), shapes):
                    new[pos] = v.view(sh)
        return new

    def index_on(self, index: torch.Tensor, device: torch.device) -> torch.Tensor:
        """``index`` on ``device``, copied there once: a copy per call would also stop CUDA-graph capture."""
        if index.device == device:
            return index
        key = ("index", id(index), device)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = (index, index.to(device))
        return found[1]

    def __getstate__(self):  # the memo is a cache of device objects (held by weak reference): rebuilt after loading
        return {**self.__dict__, "memo": {}}

    def rebound(self, inputs) -> "Gather":
        """The same gather over other inputs (shares the cached groups)."""
        return Gather(tuple(inputs), self.maps, self.groups(), self.memo)


_ROW_OF = "_qhybrid_row_of"


def mark_rows(whole: torch.Tensor, rows) -> None:
    """Mark ``rows`` (``whole.unbind(0)``, ``whole`` contiguous) as rows of ``whole``: a gather over them reads
    ``whole`` instead (``through_rows``). What a lazily recorded qnode hands its gates (``workflow._lazy``)."""
    for m, r in enumerate(rows):
        setattr(r, _ROW_OF, (whole, m))


def through_rows(g: Gather) -> Gather:
    """``g`` with inputs that are marked rows (``mark_rows``) read from their whole tensors: one input, one
    indexing op and one gradient for a whole group of gate parameters, not one each. ``g`` itself where none is.

    >>> w = torch.arange(6.0).reshape(3, 2)
    >>> rows = w.unbind(0); mark_rows(w, rows)
    >>> h = through_rows(Gather(rows[::-1], ((0, torch.tensor(1)), (2, torch.tensor(0)))))
    >>> len(h.inputs), [float(p) for p in h.params(h.inputs)]
    (1, [5.0, 0.0])
    """
    # a lazily recorded tape's inputs are a few tensors, each read by many gates (Q1000 p=2: four, 5,000 times):
    # each distinct one is looked at once, and the layout's key holds their numbers
    inputs, slot, seen, distinct, numbers = [], {}, {}, [], []
    for x in g.inputs:
        n = seen.get(id(x))
        if n is None:
            o = getattr(x, _ROW_OF, None)
            whole, m = (x, None) if o is None else o
            k = slot.get(id(whole))
            if k is None:
                k = slot[id(whole)] = len(inputs)
                inputs.append(whole)
            n = seen[id(x)] = len(distinct)
            distinct.append((k, m, x.numel() if o is not None else 0))
        numbers.append(n)
    if all(m is None for _, m, _ in distinct):
        return g
    key = ("rows", tuple(distinct), tuple(numbers))
    template = g.memo.get(key)
    if template is None:  # once per layout (the memo is shared by rebound copies)
        maps = []
        for m in g.maps:
            if m[0] == "const":
                maps.append(m)
            else:
                k, row, size = distinct[numbers[m[0]]]
                maps.append((k, m[1]) if row is None else (k, m[1] + row * size))
        template = g.memo[key] = Gather((), tuple(maps))
    return template.rebound(inputs)


class Variant:
    """``tape`` run with ``params`` in place of its data (``tape_parameters`` order).

    Shifted copies of a tape for parameter-shift, or the detached leaves the adjoint method
    differentiates, are variants of one tape: no operator is copied. ``gather``: where ``params`` come
    from, when preprocessing found that they are gathers of inputs; ``params=None`` then gathers them at
    first use (the adjoint path reads whole columns from the inputs and never needs them one by one).
    """

    __slots__ = ("tape", "_params", "gather")

    def __init__(self, tape: qml.tape.QuantumScript, params: list | None, gather: Gather | None = None):
        if params is None and gather is None:
            raise ValueError("Variant needs params or a gather to take them from")
        self.tape = tape
        self._params = params
        self.gather = gather

    @property
    def params(self) -> list:
        if self._params is None:
            self._params = self.gather.params(self.gather.inputs)
        return self._params

    @params.setter
    def params(self, value: list) -> None:
        self._params = value

    def trainable_positions(self) -> list[int]:
        """Positions of the parameters that need a gradient (read from the gather's inputs when the
        parameters have not been gathered yet; under grad mode a gather of such an input needs one)."""
        if self._params is None:
            g = self.gather
            grads = tuple(isinstance(x, torch.Tensor) and x.requires_grad for x in g.inputs)
            key = ("trainable", grads)  # the maps are shared by every rebound copy, and so is the memo
            found = g.memo.get(key)
            if found is None:
                found = g.memo[key] = [j for j, m in enumerate(g.maps) if m[0] != "const" and grads[m[0]]]
            return list(found)
        return [j for j, p in enumerate(self._params) if isinstance(p, torch.Tensor) and p.requires_grad]

    def __repr__(self) -> str:
        shown = "<not gathered>" if self._params is None else self._params
        return f"Variant(tape={self.tape!r}, params={shown!r}, gather={self.gather!r})"

    @classmethod
    def of(cls, tape: qml.tape.QuantumScript) -> "Variant":
        return cls(tape, tape_parameters(tape))

    def bound_tape(self, *, detach: bool = False) -> qml.tape.QuantumScript:
        """The tape with ``params`` bound in, for devices that only take tapes (the tape itself if unchanged)."""
        params = [p.detach() if detach and hasattr(p, "detach") else p for p in self.params]
        current = tape_parameters(self.tape)
        if len(current) == len(params) and all(a is b for a, b in zip(params, current)):
            return self.tape
        try:
            return self.tape.bind_new_parameters(params, list(range(len(params))))
        except IndexError:  # PennyLane rebuilds an operator as ``type(op)(*data)``: a QubitChannel of ONE Kraus
            if not any(isinstance(op, qml.QubitChannel) for op in self.tape.operations):  # matrix takes that
                raise  # matrix for the list of them
            return _bound_in_copies(self.tape, params)

    def with_observables_bound(self, n_op_params: int | None = None, memo: dict | None = None) -> "Variant":
        """This variant with its tape's measured observables carrying the variant's own observable
        parameters (readers take coefficients and matrices from the tape, e.g. after the adjoint JPC
        detached them). The tape is copied only where they differ; ``memo`` shares the copies among
        variants that pass the same parameter objects. ``n_op_params``: the operators' parameter count,
        when the caller knows it.

        >>> tape = qml.tape.QuantumScript([], [qml.expval(qml.Hermitian([[1.0, 0.0], [0.0, -1.0]], 0))])
        >>> v = Variant(tape, [qml.numpy.array([[0.0, 1.0], [1.0, 0.0]])]).with_observables_bound()
        >>> v.tape.measurements[0].obs.data[0] is v.params[0]
        True
        """
        tape = self.tape
        if n_op_params is None:
            n_op_params = sum(len(op.data) for op in tape.operations)
        if self._params is None and len(self.gather.maps) == n_op_params:
            return self  # the tape's observables carry no data (and nothing needs gathering to see it)
        if self._params is None and self._constant_observables(n_op_params):
            return self  # the observables' data are the tape's own constants (a Hamiltonian's coefficients)
        theirs = self.params[n_op_params:]
        if not theirs:
            return self  # no observable carries data
        ours = [p for mp in tape.measurements if mp.obs is not None for p in mp.obs.data]
        if len(theirs) == len(ours) and all(a is b for a, b in zip(theirs, ours)):
            return self
        key = (id(tape), tuple(map(id, theirs)))
        new = None if memo is None else memo.get(key)
        if new is None:
            mps, k = [], 0
            for mp in tape.measurements:
                if mp.obs is not None and mp.obs.data:
                    n = len(mp.obs.data)
                    obs = qml.ops.functions.bind_new_parameters(mp.obs, theirs[k : k + n])
                    refresh_pauli_reps(obs)  # a number times a tensor coefficient: exact, not through float32
                    mp = type(mp)(obs=obs)
                    k += n
                mps.append(mp)
            new = tape.copy(measurements=mps)
            if memo is not None:
                memo[key] = new
        return Variant(new, self.params, self.gather)

    def _constant_observables(self, n_op_params: int) -> bool:
        """Whether every observable parameter is a constant of the gather (remembered in its memo)."""
        memo = self.gather.memo
        key = ("constant observables", n_op_params)
        if key not in memo:
            memo[key] = all(m[0] == "const" for m in self.gather.maps[n_op_params:])
        return memo[key]

    def regathered(self, inputs) -> "Variant":
        """This variant with its parameters gathered anew from ``inputs`` (in place of ``gather.inputs``)."""
        return Variant(self.tape, None, self.gather.rebound(inputs))


def tape_parameters(tape: qml.tape.QuantumScript) -> list:
    """Operator data in order, then each measured observable's data (PennyLane's own order)."""
    params = [p for op in tape.operations for p in op.data]
    for mp in tape.measurements:
        if mp.obs is not None:
            params.extend(mp.obs.data)
    return params


def parameter_owners(tape: qml.tape.QuantumScript) -> list[tuple[int, int]]:
    """For each flat parameter, (operator index, index within the operator); observables get (-1, k)."""
    owners = []
    for i, op in enumerate(tape.operations):
        owners.extend((i, k) for k in range(len(op.data)))
    for mp in tape.measurements:
        if mp.obs is not None:
            owners.extend((-1, k) for k in range(len(mp.obs.data)))
    return owners


def _bound_in_copies(tape, params) -> qml.tape.QuantumScript:
    """``tape`` with ``params`` bound: each operator a copy holding its new data (the measurements PennyLane's way)."""
    ops, k = [], 0
    for op in tape.operations:
        n = len(op.data)
        new = copy.copy(op)
        new.data = tuple(params[k : k + n])
        ops.append(new)
        k += n
    rest = tape.copy(operations=[])
    rest = rest.bind_new_parameters(params[k:], list(range(len(params) - k))) if k < len(params) else rest
    return tape.copy(operations=ops, measurements=rest.measurements)

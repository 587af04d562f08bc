"""Trainable Hamiltonian coefficients: an observable's data as the coefficient vector of its words' table.

``qml.expval(qml.dot(c, words))`` (or ``qml.Hamiltonian(c, words)``) with a tensor ``c`` that requires a
gradient hands the device a new observable every call whose data are the coefficients. Binding them into a
copy of the cached tape rebuilt the 10^3-term operator every call (2 s for H2O's 1,079 words), and the table
lookup hashed every word again. Here the plan holds, per measurement, the table of the words (made once, by
the words' structure) and how the observable's data land on them (``SentenceMap``), so a call with new
coefficient values reads them from the variant's parameters as one ``[K]`` vector (one indexing op where
preprocessing gathered them from one input) and re-plans nothing.

>>> import pennylane as qml, torch
>>> c = torch.tensor([0.5, -0.25], dtype=torch.float64)
>>> H = qml.dot(c, [qml.X(0) @ qml.Y(1), qml.Z(1)])
>>> m = sentence_map(H, 0, {0: 0, 1: 1})
>>> m.words_coefficients(list(H.data), torch.float64, "cpu").tolist()
[0.5, -0.25]
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import torch

from .pauli_tables import PauliTable, pauli_table


class SentenceMap:
    """How the data of one measured observable (tape parameters from ``offset``) become the coefficients of
    the words of ``table``: its tensor data (at ``tensors``, relative to ``offset``) as a vector ``d``, then
    ``coefficient[word[r]] += factor[r] * d[datum[r]]`` for every row ``r``, plus ``constant`` (the terms
    without tensor data)."""

    def __init__(self, offset: int, tensors: list, table: PauliTable, rows: np.ndarray, constant: np.ndarray):
        self.offset, self.tensors, self.table = offset, list(tensors), table
        self._rows, self._constant = rows, constant  # rows: [R, 3] (datum, word, factor)
        self._memo: dict = {}

    def _on(self, real, device):
        key = (real, str(device))
        hit = self._memo.get(key)
        if hit is None:
            datum, word, factor = self._rows[:, 0].astype(np.int64), self._rows[:, 1].astype(np.int64), self._rows[:, 2]
            plain = (len(word) == len(self.table.words) == len(self.tensors) and np.array_equal(datum, word)
                     and np.array_equal(word, np.arange(len(word))) and np.all(factor == 1) and not self._constant.any())
            hit = self._memo[key] = (torch.as_tensor(datum, device=device), torch.as_tensor(word, device=device),
                                     torch.as_tensor(factor, dtype=real, device=device),
                                     torch.as_tensor(self._constant, dtype=real, device=device), plain)
        return hit

    def words_coefficients(self, data, real, device) -> torch.Tensor:
        """The words' coefficient vector (``[K]``) from the observable's tensor data (a vector or a list)."""
        datum, word, factor, constant, plain = self._on(real, device)
        d = data if isinstance(data, torch.Tensor) else _stacked(data, real, device)
        d = d.to(device=device, dtype=real)
        if plain:  # one datum per word, in order (qml.dot of distinct words)
            return d
        return constant.index_add(0, word, d[datum] * factor)

    def coefficients(self, variant, real, device) -> torch.Tensor:
        """The words' coefficients for ``variant``'s parameters."""
        d = observable_vector(variant, [self.offset + j for j in self.tensors], real, device)
        return self.words_coefficients(d, real, device)


def _stacked(data, real, device) -> torch.Tensor:
    return torch.stack([torch.as_tensor(x, device=device).real.to(real) if isinstance(x, torch.Tensor)
                        else torch.tensor(float(np.real(x)), dtype=real, device=device) for x in data])


def observable_vector(variant, positions: list, real, device) -> torch.Tensor:
    """Parameters ``positions`` of ``variant`` as one real vector: one indexing op into the gather's input
    where they all come from one (packed scalars, a coefficient tensor), else a stack."""
    g = variant.gather
    if not positions:  # an observable with constant data only (beside one with tensors)
        return torch.zeros(0, dtype=real, device=device)
    if variant._params is None and g is not None:
        key = ("observable vector", tuple(positions))
        hit = g.memo.get(key)
        if hit is None or hit[0] is not g.maps:
            maps = [g.maps[j] for j in positions]
            sources = {m[0] for m in maps}
            one = len(sources) == 1 and "const" not in sources and all(m[1].numel() == 1 for m in maps)
            flat = torch.cat([m[1].reshape(-1) for m in maps]) if one else None
            hit = g.memo[key] = (g.maps, maps[0][0] if one else None, flat)
        if hit[2] is not None:
            x = g.inputs[hit[1]]
            return x.reshape(-1)[g.index_on(hit[2], x.device)].to(device=device).real.to(real)
    params = variant.params
    return _stacked([params[j] for j in positions], real, device)


def _is_tensor(d) -> bool:
    return isinstance(d, torch.Tensor)


def _terms(op, j: int):
    """(``[(datum index or None, word, factor)]``, the next datum index) of ``op``'s sentence, its data
    starting at index ``j``; None unless its tensor data are scalars multiplying constant Pauli sentences
    (sums of them, nested or not; ``LinearCombination``)."""
    data = op.data
    if not any(map(_is_tensor, data)):
        ps = op.pauli_rep
        return None if ps is None else ([(None, w, c) for w, c in ps.items()], j + len(data))
    if isinstance(op, qml.ops.LinearCombination):
        coeffs, ops = data, op.ops  # (not ``op.coeffs``: kept from construction, where ``data`` follows ``H.data = ...``)
        if len(data) != len(ops) or any(o.data or o.pauli_rep is None for o in ops):
            return None
        rows = [(j + k if _is_tensor(c) else None, w, f if _is_tensor(c) else c * f)
                for k, (c, o) in enumerate(zip(coeffs, ops)) for w, f in o.pauli_rep.items()]
        return rows, j + len(data)
    if isinstance(op, qml.ops.SProd):
        base, scalar = op.base, data[0]
        if not _is_tensor(scalar):  # a number times a sentence with tensor coefficients: its rows, scaled
            if np.ndim(scalar) != 0:
                return None
            got = _terms(base, j + 1)
            return None if got is None else ([(k, w, c * scalar) for k, w, c in got[0]], got[1])
        if scalar.ndim != 0 or any(map(_is_tensor, base.data)) or base.pauli_rep is None:
            return None
        return [(j, w, c) for w, c in base.pauli_rep.items()], j + len(data)
    if isinstance(op, qml.ops.Sum):
        rows = []
        for o in op.operands:
            got = _terms(o, j)
            if got is None:
                return None
            rows.extend(got[0])
            j = got[1]
        return rows, j
    return None


def sentence_map(obs, offset: int, positions: dict) -> SentenceMap | None:
    """The ``SentenceMap`` of observable ``obs`` whose data start at tape parameter ``offset`` (None where its
    tensor data are not coefficients of Pauli words, or its table would be too large)."""
    got = _terms(obs, 0)
    if got is None or not got[0] or got[1] != len(obs.data):
        return None
    tensors = sorted({j for j, _, _ in got[0] if j is not None})
    slot = {j: i for i, j in enumerate(tensors)}
    words, rows, constant = {}, [], []
    for j, word, c in got[0]:
        if _is_tensor(c) or np.iscomplexobj(c) and np.imag(c) != 0:
            return None
        k = words.setdefault(word, len(words))
        if j is None:
            constant.append((k, float(np.real(c))))
        else:
            rows.append((slot[j], k, float(np.real(c))))
    table = pauli_table(qml.pauli.PauliSentence(dict.fromkeys(words, 1.0)), positions, z_only=True)
    if table is None or table.words != list(words):
        return None
    const = np.zeros(len(words))
    for k, c in constant:
        const[k] += c
    return SentenceMap(offset, tensors, table, np.asarray(rows, dtype=float).reshape(-1, 3), const)

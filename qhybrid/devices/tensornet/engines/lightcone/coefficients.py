"""Term coefficients read straight from a variant's parameters: a Hamiltonian's coefficients are the
observable's data, and each term's coefficient is a fixed linear function of them.

Binding the variant's coefficients into a copy of a 150-term Hamiltonian every step (what a reader of the
tape's observables needs) costs more than the whole cone simulation; a ``[terms, data]`` matrix built once
per structure gives the same coefficients, differentiable in the data, from one matrix product.
"""

from __future__ import annotations

import pennylane as qml
import torch

from ...._constants import literal


class DataMap:
    """``coefficients = A @ data`` and ``constant = a0 @ data`` for one measured ``LinearCombination``
    whose operators are data-free Pauli words; ``data`` starts at ``offset`` in the variant's parameters."""

    def __init__(self, offset: int, n_data: int, matrix: torch.Tensor, constant: torch.Tensor):
        self.offset, self.n_data, self.matrix, self.constant = offset, n_data, matrix, constant
        self._on: dict = {}

    def _tensors(self, dtype, device):
        key = (dtype, device)
        if key not in self._on:
            self._on[key] = (self.matrix.to(device=device, dtype=dtype), self.constant.to(device=device, dtype=dtype))
        return self._on[key]

    def coefficients(self, params, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(``[terms]`` coefficient vector, constant) from a variant's flat parameters."""
        data = params[self.offset : self.offset + self.n_data]
        if any(isinstance(d, torch.Tensor) for d in data):
            data = torch.stack([d if isinstance(d, torch.Tensor) else torch.as_tensor(d, dtype=dtype) for d in data])
            data = data.to(device=device, dtype=dtype)
        else:  # plain numbers (the usual fixed Hamiltonian): one tensor, one call
            data = literal(tuple(d.real if isinstance(d, complex) else d for d in data), device, dtype)  # once per device
        matrix, constant = self._tensors(dtype, device)
        return matrix @ data, constant @ data


def data_map(obs, offset: int, position, n_terms: int) -> DataMap | None:
    """The DataMap of ``obs`` (None unless it is a LinearCombination of data-free Pauli words);
    ``position(word)``: the index among ``n_terms`` of a Pauli word's term, or None when it is none."""
    if not isinstance(obs, qml.ops.LinearCombination):
        return None
    ops = obs.ops
    if len(obs.data) != len(ops) or any(op.data or op.pauli_rep is None for op in ops):
        return None
    matrix = torch.zeros(n_terms, len(ops), dtype=torch.float64)
    constant = torch.zeros(len(ops), dtype=torch.float64)
    for k, op in enumerate(ops):
        for word, c in op.pauli_rep.items():
            c = c.real if isinstance(c, complex) else float(c)
            if not word:
                constant[k] += c
                continue
            t = position(word)
            if t is None:
                return None
            matrix[t, k] += c
    return DataMap(offset, len(ops), matrix, constant)


__all__ = ["DataMap", "data_map"]

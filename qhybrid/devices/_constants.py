"""Constants of a steady step, made once per device and dtype: never a host-to-device copy in a step.

A plan is built on the host, before it knows where its tensors will run; a step that moved the plan's
tables with ``.to(device)``, or built ``torch.tensor([...], device=...)``, would copy host data to the GPU on
every call (which no CUDA graph can capture). :func:`on_device` keeps each plan-time table's copy per device
and dtype beside it (dropped with the table); :func:`literal` keeps small constants from Python numbers.

>>> import torch
>>> table = torch.tensor([1.0, -1.0])
>>> on_device(table, torch.device("cpu"), torch.complex128) is on_device(table, torch.device("cpu"), torch.complex128)
True
>>> literal((-1j, 1j), torch.device("cpu"), torch.complex128)
tensor([-0.-1.j, 0.+1.j], dtype=torch.complex128)
"""

from __future__ import annotations

import threading

import torch
from torch.utils.weak import WeakIdKeyDictionary

_COPIES: WeakIdKeyDictionary = WeakIdKeyDictionary()
_LITERALS: dict = {}
_LOCK = threading.Lock()

MAX_LITERALS = 4096
"""Distinct literal constants kept (a plan makes a handful; past this the oldest are dropped)."""


def on_device(table: torch.Tensor, device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``table`` (a plan-time constant, never written) on ``device`` as ``dtype``: copied on first use, then
    the same tensor while ``table`` lives. Returns ``table`` itself where nothing changes."""
    dtype = dtype or table.dtype
    device = torch.device(device)
    if table.device == device and table.dtype == dtype:
        return table
    copies = _COPIES.get(table)
    hit = None if copies is None else copies.get((device, dtype))
    if hit is None:
        hit = table.to(device=device, dtype=dtype)
        with _LOCK:
            _COPIES.setdefault(table, {})[(device, dtype)] = hit
    return hit


def literal(values: tuple, device, dtype: torch.dtype) -> torch.Tensor:
    """``torch.tensor(values, dtype=dtype, device=device)``, made once per (values, device, dtype); never write it."""
    key = (repr(values), torch.device(device), dtype)  # repr: -0.0 is not 0.0, and nan finds itself
    hit = _LITERALS.get(key)
    if hit is None:
        hit = torch.tensor(values, dtype=dtype, device=device)
        with _LOCK:
            if len(_LITERALS) >= MAX_LITERALS:
                _LITERALS.pop(next(iter(_LITERALS)))
            _LITERALS[key] = hit
    return hit

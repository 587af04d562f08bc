"""How single-qubit gates waiting on adjacent wires are grouped into Kronecker blocks, each one matmul on the state.

A block of ``k`` wires is a ``2**k x 2**k`` matrix applied in one pass over the state; its backward reads each gate's
cotangent out of the block's (``block_cotangent``), which costs ``O(k 4**k)``. On the CPU four wires balance the two;
on a GPU each block is also a kernel launch and a pass over a large state, so wider blocks pay up to six wires
(H200, 2026-11-28, ``benchmarks/gpu_kron.py``, captured steps: W5 5.52 -> 4.49 ms at width 6, 7.03 ms at 8; G16
0.94 -> 0.78 ms at 6, 1.60 ms at 8).
"""

from __future__ import annotations

import torch

KRON_MAX_WIRES = 4
"""Pending single-qubit gates on this many adjacent wires are applied as one Kronecker-product matmul (CPU)."""

KRON_MAX_WIRES_CUDA = 6
"""The same on a GPU, where each block is a kernel launch and a pass over the state (module notes)."""


def kron_max_wires(device) -> int:
    """The widest Kronecker block for states on ``device`` (a program's width is fixed when it is planned: plans are
    kept per device).

    >>> kron_max_wires("cpu") == KRON_MAX_WIRES
    True
    """
    return KRON_MAX_WIRES_CUDA if torch.device(device).type == "cuda" else KRON_MAX_WIRES


def kron_groups(wires: list[int], width: int) -> list[list[int]]:
    """Sorted ``wires`` in Kronecker blocks: each run of adjacent wires in as few blocks of at most ``width`` as it
    takes, of sizes as equal as that allows (8 wires at width 6: 4 + 4, not 6 + 2, which costs a layout more).

    >>> kron_groups([0, 1, 2, 3, 4, 5, 6, 7, 9], 6)
    [[0, 1, 2, 3], [4, 5, 6, 7], [9]]
    """
    runs: list = []
    for w in wires:
        if runs and runs[-1][-1] + 1 == w:
            runs[-1].append(w)
        else:
            runs.append([w])
    out = []
    for run in runs:
        count = -(-len(run) // width)
        size, extra = divmod(len(run), count)
        start = 0
        for i in range(count):
            stop = start + size + (i < extra)
            out.append(run[start:stop])
            start = stop
    return out

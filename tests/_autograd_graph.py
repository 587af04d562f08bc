"""The autograd graph behind a tensor, for tests that check how many nodes a circuit records."""

from __future__ import annotations

import torch


def autograd_node_names(t: torch.Tensor) -> list[str]:
    """Type names of every node reachable from ``t.grad_fn`` (each node once)."""
    seen, names, stack = set(), [], [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(n for n, _ in node.next_functions)
    return names

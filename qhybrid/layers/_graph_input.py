"""Graph connectivity from the forms users hold: edge lists, ``edge_index``, CSC arrays, networkx/rustworkx.

Every form becomes one :class:`Graph`: ``n_nodes`` and an ordered tuple of undirected edges ``(u, v)``
with ``u < v``. The edge order is the order of first appearance, which is also the order of edge weights
and of per-edge outputs; a reverse pair (``edge_index`` in torch_geometric lists both directions) is one
edge. Two graphs with equal ``key`` build identical circuits and share one plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class Graph:
    """An undirected simple graph on nodes ``0 .. n_nodes - 1``.

    >>> Graph.from_any([(0, 1), (2, 1)]).edges
    ((0, 1), (1, 2))
    """

    n_nodes: int
    edges: tuple[tuple[int, int], ...]

    @property
    def key(self) -> tuple:
        return (self.n_nodes, self.edges)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    def neighbours(self) -> list[set[int]]:
        adj: list[set[int]] = [set() for _ in range(self.n_nodes)]
        for u, v in self.edges:
            adj[u].add(v)
            adj[v].add(u)
        return adj

    @classmethod
    def from_any(cls, graph: Any, n_nodes: int | None = None) -> "Graph":
        """Parse ``graph`` (see :func:`as_graph`)."""
        return as_graph(graph, n_nodes)


def as_graph(graph: Any, n_nodes: int | None = None) -> Graph:
    """A :class:`Graph` from an edge list ``[(u, v), ...]``, an ``edge_index`` ``[2, E]`` tensor/array, a CSC
    pair ``(offsets, indices)`` of 1-D tensors or arrays (column ``j``'s rows are ``indices[offsets[j]:offsets[j+1]]``), a networkx
    graph or a rustworkx graph. Nodes of a networkx graph are numbered in ``graph.nodes`` order.

    Args:
        graph: the connectivity.
        n_nodes: the node count, for isolated nodes an edge list cannot show (default: largest label + 1).

    >>> as_graph(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])).edges
    ((0, 1), (1, 2))
    >>> as_graph((torch.tensor([0, 1, 2]), torch.tensor([1, 0]))).edges   # CSC: column 0 holds row 1, column 1 holds row 0
    ((0, 1),)
    """
    if isinstance(graph, Graph):
        return graph if n_nodes is None else _build(list(graph.edges), n_nodes, "graph")
    module = type(graph).__module__.split(".")[0]
    if module == "networkx":
        order = {node: i for i, node in enumerate(graph.nodes)}
        if graph.is_directed():
            graph = graph.to_undirected()
        return _build([(order[u], order[v]) for u, v in graph.edges], n_nodes or len(order), "networkx graph")
    if module == "rustworkx":
        indices = list(graph.node_indices())
        order = {node: i for i, node in enumerate(indices)}
        return _build([(order[u], order[v]) for u, v in graph.edge_list()], n_nodes or len(order), "rustworkx graph")
    if isinstance(graph, tuple) and len(graph) == 2 and all(_is_vector(x) for x in graph):
        return _from_csc(graph, n_nodes)
    if isinstance(graph, (torch.Tensor, np.ndarray)):
        arr = _int_array(graph, "edge_index")
        if arr.ndim == 2 and arr.shape[0] == 2:
            return _build(list(zip(arr[0].tolist(), arr[1].tolist())), n_nodes, "edge_index")
        if arr.ndim == 2 and arr.shape[1] == 2:
            return _build([tuple(e) for e in arr.tolist()], n_nodes, "edge list")
        raise ValueError(
            f"edge_index must have shape [2, E] (torch_geometric style) or [E, 2], got {tuple(arr.shape)}."
        )
    if isinstance(graph, Sequence) and not isinstance(graph, (str, bytes)):
        edges = []
        for k, e in enumerate(graph):
            if not (isinstance(e, Sequence) and len(e) == 2):
                raise ValueError(f"edge list entry {k} is {e!r}; each edge must be a pair (u, v) of node indices.")
            edges.append((e[0], e[1]))
        return _build(edges, n_nodes, "edge list")
    raise TypeError(
        f"Cannot read a graph from {type(graph).__name__}; give an edge list [(u, v), ...], an edge_index [2, E] "
        "tensor, a CSC pair (offsets, indices), or a networkx / rustworkx graph."
    )


def _is_vector(x) -> bool:
    return isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 1


def _int_array(x, name: str) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer node indices, got dtype {arr.dtype}.")
    return arr.astype(np.int64)


def _from_csc(pair, n_nodes) -> Graph:
    offsets = _int_array(pair[0], "CSC offsets").reshape(-1)
    indices = _int_array(pair[1], "CSC indices").reshape(-1)
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(indices) or np.any(np.diff(offsets) < 0):
        raise ValueError(
            "CSC offsets must start at 0, never decrease and end at len(indices) "
            f"(= {len(indices)}); got offsets {offsets.tolist()[:10]}..."
        )
    cols = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return _build(list(zip(indices.tolist(), cols.tolist())), n_nodes or len(offsets) - 1, "CSC graph")


def _build(pairs: list, n_nodes: int | None, what: str) -> Graph:
    seen: dict[tuple[int, int], None] = {}
    for k, (u, v) in enumerate(pairs):
        if not all(isinstance(x, (int, np.integer)) for x in (u, v)):
            raise TypeError(f"{what}: edge {k} is ({u!r}, {v!r}); node labels must be integers (number them 0..N-1).")
        u, v = int(u), int(v)
        if u < 0 or v < 0:
            raise ValueError(f"{what}: edge {k} = ({u}, {v}) has a negative node index.")
        if u == v:
            raise ValueError(f"{what}: edge {k} = ({u}, {v}) is a self-loop; a two-qubit coupling needs two nodes.")
        seen.setdefault((min(u, v), max(u, v)), None)
    edges = tuple(seen)
    largest = max((v for _, v in edges), default=-1) + 1
    if n_nodes is None:
        n_nodes = largest
    if n_nodes < largest:
        raise ValueError(f"{what}: n_nodes={n_nodes} but an edge touches node {largest - 1}.")
    if n_nodes < 1:
        raise ValueError(f"{what}: the graph has no nodes; give at least one edge or n_nodes.")
    return Graph(int(n_nodes), edges)


__all__ = ["Graph", "as_graph"]

"""GraphQLayer: QAOA and quantum-graph-neural-network circuits whose connectivity is a graph."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Literal, Sequence

import torch
from torch import nn

from ..typing import DiffMethod
from ._graph_circuits import qaoa_template, qgnn_template
from ._graph_input import Graph, as_graph
from ._graph_ordered import ordered_sum, share_columns, share_rows
from ._graph_plan import GraphPlan, make_plan, run_groups

PLAN_CACHE_SIZE = 64
"""Graph structures whose plans a layer keeps (least recently used dropped)."""

QAOA_INIT_SCALE = 0.5
"""QAOA angles start as a linear ramp (gamma rising, beta falling) scaled by this: the Trotterised anneal
that is the usual warm start (Zhou et al., PRX 10, 021067)."""

_COMPLEX_FOR_REAL = {torch.float64: torch.complex128}
_OUTPUTS = {"qaoa": ("edges", "cost"), "qgnn": ("nodes", "edges")}


class GraphQLayer(nn.Module):
    """A circuit on one qubit per node whose two-qubit gates follow the edges of a graph.

    Args:
        graph: the connectivity: an edge list ``[(u, v), ...]``, an ``edge_index`` ``[2, E]`` tensor
            (torch_geometric style; both directions of an edge count once), a CSC pair ``(offsets,
            indices)`` of 1-D tensors, or a networkx / rustworkx graph. Edges are numbered in order of first
            appearance (``layer.graph.edges``); edge weights and per-edge outputs follow that order.
        n_layers: circuit depth ``p``.

    Keyword Args:
        kind: ``"qaoa"``: ``H``, then per layer ``exp(-i gamma_l sum_e w_e Z_u Z_v)`` and
            ``exp(-i beta_l sum_v X_v)`` (parameters ``gamma``, ``beta``, shape ``(n_layers,)``).
            ``"qgnn"``: node features as ``RY``/``RZ`` angles, then per layer ``IsingZZ(c[l,e,0] w_e)`` and
            ``IsingXX(c[l,e,1] w_e)`` on every edge and ``RY(r[l,v,0])``, ``RZ(r[l,v,1])`` on every node
            (parameters ``coupling`` ``(n_layers, E, 2)`` and ``rotation`` ``(n_layers, N, 2)``).
        output: ``"edges"`` (``<Z_u Z_v>`` per edge) or ``"cost"`` (``sum_e w_e <Z_u Z_v>``) for QAOA;
            ``"nodes"`` (``<Z_v>`` per node, the default) or ``"edges"`` for QGNN.
        n_features: node features per node (QGNN).
        device: the quantum device; None: a ``qhybrid.device("tensornet")`` whose precision follows the
            inputs (complex128 for float64).
        diff_method: ``"best"``, ``"adjoint"``, ``"parameter-shift"`` or ``"backprop"``.
        deterministic: gradients bitwise identical run to run and whatever batch a sample sits in: each
            sample runs as its own execution (as it would alone) and every sum over gates and samples is a
            left fold in a fixed order. Slower on big batches. On CUDA it also needs
            ``torch.use_deterministic_algorithms(True)``.
        light_cone: ``"auto"``, True or False: measure each output on its reverse light cone only, with
            isomorphic cones sharing one broadcast sub-circuit ("auto": graphs of 17+ nodes whose cones are
            narrower than the graph).

    >>> import torch, qhybrid
    >>> layer = qhybrid.GraphQLayer([(0, 1), (1, 2), (2, 0)], n_layers=2, output="cost")
    >>> layer().shape, layer(torch.rand(8, 3)).shape    # edge weights (batch, E)
    (torch.Size([]), torch.Size([8]))
    """

    def __init__(
        self,
        graph: Any,
        n_layers: int = 1,
        *,
        kind: Literal["qaoa", "qgnn"] = "qaoa",
        output: Literal["edges", "nodes", "cost"] | None = None,
        n_features: int = 1,
        device=None,
        diff_method: DiffMethod = "best",
        deterministic: bool = False,
        light_cone: bool | Literal["auto"] = "auto",
    ) -> None:
        super().__init__()
        if kind not in _OUTPUTS:
            raise ValueError(f"kind must be 'qaoa' or 'qgnn', got {kind!r}.")
        output = output or _OUTPUTS[kind][0]
        if output not in _OUTPUTS[kind]:
            raise ValueError(f"output={output!r} is not offered for kind={kind!r}; choose one of {_OUTPUTS[kind]}.")
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"n_layers must be a positive int, got {n_layers!r}.")
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
            raise ValueError(f"n_features must be a positive int, got {n_features!r}.")
        if light_cone not in ("auto", True, False):
            raise ValueError(f"light_cone must be 'auto', True or False, got {light_cone!r}.")
        self.graph = as_graph(graph)
        self.kind, self.output, self.n_layers, self.n_features = kind, output, n_layers, n_features
        self.qdevice, self.diff_method = device, diff_method
        self.deterministic, self.light_cone = bool(deterministic), light_cone
        n, e = self.graph.n_nodes, self.graph.n_edges
        if kind == "qaoa":
            self.gamma = nn.Parameter(torch.empty(n_layers))
            self.beta = nn.Parameter(torch.empty(n_layers))
        else:
            self.coupling = nn.Parameter(torch.empty(n_layers, e, 2))
            self.rotation = nn.Parameter(torch.empty(n_layers, n, 2))
        self._plans: OrderedDict = OrderedDict()
        self._auto_devices: dict = {}
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """QAOA: the linear-ramp anneal; QGNN: angles uniform in ``[0, 2*pi)``."""
        with torch.no_grad():
            if self.kind == "qaoa":
                ramp = (torch.arange(self.n_layers, dtype=torch.float64) + 0.5) / self.n_layers
                self.gamma.copy_(QAOA_INIT_SCALE * ramp)
                self.beta.copy_(QAOA_INIT_SCALE * (1 - ramp))
            else:
                nn.init.uniform_(self.coupling, 0, 2 * math.pi)
                nn.init.uniform_(self.rotation, 0, 2 * math.pi)

    # --- plans and devices ---------------------------------------------------------------------
    def plan(self, graph: Graph) -> GraphPlan:
        """The (cached) plan of ``graph``'s structure."""
        key = graph.key
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        roots = graph.edges if self.output in ("edges", "cost") else tuple((v,) for v in range(graph.n_nodes))
        if self.kind == "qaoa":
            template = qaoa_template(graph, self.n_layers, roots)
        else:
            template = qgnn_template(graph, self.n_layers, self.n_features, roots)
        plan = self._plans[key] = make_plan(template, self.light_cone)
        if len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan

    def quantum_device(self, dtype: torch.dtype, n_wires: int):
        if self.qdevice is not None:
            wires = getattr(self.qdevice, "wires", None)
            if wires is not None and not set(range(n_wires)) <= set(wires.labels):
                raise ValueError(
                    f"device has wires {list(wires.labels)[:8]}... but this graph's circuits need wires 0..{n_wires - 1}; "
                    f"create it with wires={n_wires} or wires=None."
                )
            return self.qdevice
        complex_dtype = _COMPLEX_FOR_REAL.get(dtype, torch.complex64)
        dev = self._auto_devices.get(complex_dtype)
        if dev is None:
            from .._device_factory import device as make_device

            dev = self._auto_devices[complex_dtype] = make_device("tensornet", dtype=complex_dtype)
        return dev

    # --- forward -------------------------------------------------------------------------------
    def forward(self, edge_weight=None, x=None, *, graphs: Sequence | None = None):
        """Run the circuit for one sample, a batch on the layer's graph, or a list of graphs.

        Args:
            edge_weight: ``(E,)`` or ``(batch, E)`` (default: all ones); differentiable.
            x: QGNN node features ``(N, n_features)`` or ``(batch, N, n_features)`` (``(N,)`` when
                ``n_features == 1``); differentiable.
            graphs: a list of graphs (any form ``graph`` takes) for a batch of different graphs; then
                ``edge_weight`` / ``x`` are lists with one entry per graph (or None) and the result is a list.
                Graphs of one structure run as one batched execution. QGNN's per-edge couplings tie it to
                graphs with the layer's own edges.

        Returns:
            ``(batch, E)`` / ``(batch, N)`` expectation values, or ``(batch,)`` costs; without a batch axis
            for one sample; in the inputs' dtype.
        """
        if graphs is None:
            w, feats, batched = self._inputs(self.graph, edge_weight, x, "")
            (out,) = self._run([(self.graph, w, feats)])
            return out if batched else out[0]
        graphs = [as_graph(g) for g in graphs]
        ws = _per_graph(edge_weight, len(graphs), "edge_weight")
        xs = _per_graph(x, len(graphs), "x")
        items, flags = [], []
        for k, (g, wk, xk) in enumerate(zip(graphs, ws, xs)):
            w, feats, batched = self._inputs(g, wk, xk, f"[{k}]")
            items.append((g, w, feats))
            flags.append(batched)
        return [o if b else o[0] for o, b in zip(self._run(items), flags)]

    def _inputs(self, graph: Graph, w, x, where: str):
        """Edge weights as ``(B, E)`` and features as ``(B, N, F)`` in the compute dtype; whether batched."""
        if self.kind == "qgnn" and graph.edges != self.graph.edges:
            raise ValueError(
                f"graphs{where}: a qgnn layer has one trainable coupling per edge of its own graph "
                f"({self.graph.n_edges} edges); it cannot run a graph with other edges. Build a layer per graph."
            )
        params = next(iter(self.parameters()))
        batched = None
        if w is not None:
            w = _real_tensor(w, f"edge_weight{where}")
            if w.ndim not in (1, 2) or w.shape[-1] != graph.n_edges:
                raise ValueError(f"edge_weight{where} must be (E,) or (batch, E) with E={graph.n_edges}, got {tuple(w.shape)}.")
            batched = w.ndim == 2
        if self.kind == "qgnn":
            if x is None:
                raise ValueError(f"x{where}: a qgnn layer needs node features (N, n_features) = ({graph.n_nodes}, {self.n_features}).")
            x = _real_tensor(x, f"x{where}")
            if x.ndim == 1 and self.n_features == 1:
                x = x[:, None]
            if x.ndim not in (2, 3) or tuple(x.shape[-2:]) != (graph.n_nodes, self.n_features):
                raise ValueError(
                    f"x{where} must be (N, n_features) or (batch, N, n_features) = (..., {graph.n_nodes}, "
                    f"{self.n_features}), got {tuple(x.shape)}."
                )
            if batched is not None and batched != (x.ndim == 3):
                raise ValueError(f"edge_weight{where} and x{where} disagree on the batch axis: give both batched or neither.")
            batched = x.ndim == 3
        elif x is not None:
            raise ValueError("x (node features) is for kind='qgnn'; a qaoa layer takes edge weights only.")
        batched = bool(batched)
        dtype = params.dtype
        for t in (w, x):
            if t is not None:
                dtype = torch.promote_types(dtype, t.dtype)
        B = (w.shape[0] if w is not None and w.ndim == 2 else x.shape[0] if x is not None and x.ndim == 3 else 1)
        if w is None:
            w = torch.ones(B, graph.n_edges, dtype=dtype, device=params.device)
        w = w.to(dtype).reshape(-1, graph.n_edges)
        if x is not None:
            x = x.to(dtype).reshape(-1, graph.n_nodes, self.n_features)
            if x.shape[0] != w.shape[0]:
                raise ValueError(f"edge_weight{where} has batch {w.shape[0]} but x{where} has batch {x.shape[0]}.")
        return w, x, batched

    def _run(self, items) -> list[torch.Tensor]:
        det = self.deterministic
        if det and any(p.is_cuda for p in self.parameters()) and not torch.are_deterministic_algorithms_enabled():
            raise RuntimeError(
                "GraphQLayer(deterministic=True) on CUDA needs torch.use_deterministic_algorithms(True) (and "
                "CUBLAS_WORKSPACE_CONFIG=:4096:8) so that the backward pass has no atomics."
            )
        dtype = torch.promote_types(next(iter(self.parameters())).dtype, items[0][1].dtype)
        # the batch of every structure group, in the order of the items (one row per sample)
        groups: OrderedDict = OrderedDict()
        for k, (g, w, x) in enumerate(items):
            groups.setdefault(g.key, []).append(k)
        total = sum(w.shape[0] for _, w, _ in items)
        shared = self._shared(total, det)
        starts, s = [], 0
        for _, w, _ in items:
            starts.append(s)
            s += w.shape[0]
        work = []
        for key, ks in groups.items():
            g = items[ks[0]][0]
            w = torch.cat([items[k][1].to(dtype) for k in ks]) if len(ks) > 1 else items[ks[0]][1].to(dtype)
            x = None
            if self.kind == "qgnn":
                x = torch.cat([items[k][2].to(dtype) for k in ks]) if len(ks) > 1 else items[ks[0]][2].to(dtype)
            rows = torch.cat([torch.arange(starts[k], starts[k] + items[k][1].shape[0]) for k in ks])
            params = [p.index_select(0, rows.to(p.device)).to(dtype) for p in shared]
            work.append((g, ks, w, self.plan(g), self._angles(g, params, w, x, det)))
        n_wires = max(plan.n_wires for *_, plan, _ in work)
        device = self.quantum_device(dtype, n_wires)
        outs = run_groups([(plan, angles) for *_, plan, angles in work], device, self.diff_method, det)
        results: list = [None] * len(items)
        for (g, ks, w, plan, _), out in zip(work, outs):
            if self.output == "cost":
                out = ordered_sum(w * out) if det else (w * out).sum(-1)
            out = out.to(items[ks[0]][1].dtype if items[ks[0]][1].is_floating_point() else dtype)
            start = 0
            for k in ks:
                b = items[k][1].shape[0]
                results[k] = out[start : start + b]
                start += b
        return results

    def _shared(self, total: int, det: bool) -> list[torch.Tensor]:
        """The trainable parameters repeated once per sample (their gradient folds over samples in order)."""
        if self.kind == "qaoa":
            return [share_rows(self.gamma, total, det), share_rows(self.beta, total, det)]
        return [share_rows(self.coupling, total, det), share_rows(self.rotation, total, det)]

    def _angles(self, g: Graph, params, w, x, det: bool) -> list:
        """One ``(B, n_gates)`` angle tensor per block of the template (None for ``H``)."""
        n = g.n_nodes
        if self.kind == "qaoa":
            gamma, beta = params  # (B, L)
            angles: list = [None]
            for l in range(self.n_layers):
                angles.append(2 * share_columns(gamma[:, l], g.n_edges, det) * w)
                angles.append(2 * share_columns(beta[:, l], n, det))
            return angles
        coupling, rotation = params  # (B, L, E, 2), (B, L, N, 2)
        angles = [x[:, :, f] for f in range(self.n_features)]
        for l in range(self.n_layers):
            angles += [coupling[:, l, :, 0] * w, coupling[:, l, :, 1] * w, rotation[:, l, :, 0], rotation[:, l, :, 1]]
        return angles

    def __getstate__(self):
        state = super().__getstate__()
        state["_auto_devices"] = {}
        return state

    def extra_repr(self) -> str:
        return (
            f"kind={self.kind!r}, n_layers={self.n_layers}, n_nodes={self.graph.n_nodes}, n_edges={self.graph.n_edges}, "
            f"output={self.output!r}" + (", deterministic=True" if self.deterministic else "")
        )


def _real_tensor(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    if t.is_complex() or not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must be a real tensor, got dtype {t.dtype}.")
    if not bool(torch.isfinite(t.detach()).all()):
        raise ValueError(f"{name} holds NaN or inf; clean it (e.g. torch.nan_to_num) before the layer.")
    return t


def _per_graph(values, n: int, name: str) -> list:
    if values is None:
        return [None] * n
    if isinstance(values, torch.Tensor) or len(values) != n:
        raise ValueError(f"with graphs=, {name} must be a list with one entry per graph ({n}), or None.")
    return list(values)


__all__ = ["GraphQLayer"]

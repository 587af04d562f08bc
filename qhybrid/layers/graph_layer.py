"""GraphQLayer: QAOA and quantum-graph-neural-network circuits whose connectivity is a graph."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Literal, Sequence

import numpy as np
import torch
from torch import nn

from ..devices._device_assert import assert_on_device
from ..typing import DiffMethod
from ._graph_circuits import qaoa_template, qgnn_template
from ._graph_input import Graph, as_graph
from ._graph_ordered import ordered_sum, share_columns, share_rows
from ._graph_plan import GraphPlan, run_groups
from ..workflow._functorch import call_under_transforms, transforms_active

PLAN_CACHE_SIZE = 64
"""Graph structures whose plans a layer keeps (least recently used dropped)."""

QAOA_INIT_SCALE = 0.5
"""QAOA angles start as a linear ramp scaled by this, gamma rising from 0 and beta rising to 0 from below:
the Trotterised anneal from |+...+> towards the low-cost states of ``sum_e w_e Z_u Z_v`` (the usual warm
start, Zhou et al., PRX 10, 021067), which already cuts well above a random assignment."""

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
        light_cone: accepted for compatibility (``"auto"``, True or False); light cones are the device's
            choice now: the tensornet device measures each output on its reverse light cone, isomorphic
            cones as one stacked program, where that costs less than the whole state vector (always above
            the memory a state vector may take; never at 16 nodes or fewer: see docs/ENGINES.md).
            ``layer.plan(graph).classes`` shows the cone classes a graph runs as.

    The layer builds its circuit once per graph structure (and per angle signature: which blocks carry one
    angle, one per sample or one per gate) and hands it to the device with every gate angle gathered from
    one concatenation of the blocks' angles, so a step costs no operator recording or preprocessing.

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
        """QAOA: the linear-ramp anneal (``QAOA_INIT_SCALE``); QGNN: angles uniform in ``[0, 2*pi)``."""
        with torch.no_grad():
            if self.kind == "qaoa":
                ramp = (torch.arange(self.n_layers, dtype=torch.float64) + 0.5) / self.n_layers
                self.gamma.copy_(QAOA_INIT_SCALE * ramp)
                self.beta.copy_(-QAOA_INIT_SCALE * (1 - ramp))
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
        plan = self._plans[key] = GraphPlan(template)
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
            from ..workflow._device_factory import device as make_device

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
        if transforms_active():  # torch.func: the whole forward as one autograd Function (workflow._functorch)
            params = dict(self.named_parameters())
            return call_under_transforms(_module_call, (self, params, edge_weight, x), {"graphs": graphs})
        if graphs is None:
            item, batched = self._inputs(self.graph, edge_weight, x, "")
            (out,) = self._run([item])
            return out if batched else out[0]
        graphs = [as_graph(g) for g in graphs]
        ws = _per_graph(edge_weight, len(graphs), "edge_weight")
        xs = _per_graph(x, len(graphs), "x")
        items, flags = [], []
        for k, (g, wk, xk) in enumerate(zip(graphs, ws, xs)):
            item, batched = self._inputs(g, wk, xk, f"[{k}]")
            items.append(item)
            flags.append(batched)
        return [o if b else o[0] for o, b in zip(self._run(items), flags)]

    def _inputs(self, graph: Graph, w, x, where: str):
        """``(graph, weights (B, E) or None for all ones, features (B, N, F) or None, B)``; whether batched."""
        if self.kind == "qgnn" and graph.key != self.graph.key:
            raise ValueError(
                f"graphs{where}: a qgnn layer has one trainable coupling per edge of its own graph "
                f"({self.graph.n_edges} edges); it cannot run a graph with other edges. Build a layer per graph."
            )
        batched = None
        if w is not None:
            w = _real_tensor(w, f"edge_weight{where}", self._dtype())
            if w.ndim not in (1, 2) or w.shape[-1] != graph.n_edges:
                raise ValueError(f"edge_weight{where} must be (E,) or (batch, E) with E={graph.n_edges}, got {tuple(w.shape)}.")
            batched = w.ndim == 2
        if self.kind == "qgnn":
            if x is None:
                raise ValueError(f"x{where}: a qgnn layer needs node features (N, n_features) = ({graph.n_nodes}, {self.n_features}).")
            x = _real_tensor(x, f"x{where}", self._dtype())
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
        if w is not None:
            w = w.reshape(-1, graph.n_edges)
        if x is not None:
            x = x.reshape(-1, graph.n_nodes, self.n_features)
            if w is not None and x.shape[0] != w.shape[0]:
                raise ValueError(f"edge_weight{where} has batch {w.shape[0]} but x{where} has batch {x.shape[0]}.")
        size = w.shape[0] if w is not None else x.shape[0] if x is not None else 1
        return (graph, w, x, size), batched

    def _run(self, items) -> list[torch.Tensor]:
        det = self.deterministic
        if det and any(p.is_cuda for p in self.parameters()) and not torch.are_deterministic_algorithms_enabled():
            raise RuntimeError(
                "GraphQLayer(deterministic=True) on CUDA needs torch.use_deterministic_algorithms(True) (and "
                "CUBLAS_WORKSPACE_CONFIG=:4096:8) so that the backward pass has no atomics."
            )
        dtype = next(iter(self.parameters())).dtype
        for _, w, x, _ in items:
            for t in (w, x):
                if t is not None:
                    dtype = torch.promote_types(dtype, t.dtype)
        starts, total = [], 0
        for *_, size in items:
            starts.append(total)
            total += size
        # deterministic: every parameter repeated once per sample, so its gradient folds over samples in order
        shared = [share_rows(p.to(dtype), total, det) for p in self._parameters.values()] if det else None
        groups: OrderedDict = OrderedDict()
        for k, item in enumerate(items):
            groups.setdefault(item[0].key, []).append(k)
        work = []
        for ks in groups.values():
            g = items[ks[0]][0]
            size = sum(items[k][3] for k in ks)
            w = None
            if any(items[k][1] is not None for k in ks):
                w = torch.cat([_weights(items[k], dtype, self._device()) for k in ks])
            x = torch.cat([items[k][2].to(dtype) for k in ks]) if self.kind == "qgnn" else None
            if det:
                rows = torch.cat([torch.arange(starts[k], starts[k] + items[k][3]) for k in ks])
                params = [p.index_select(0, rows.to(p.device)) for p in shared]
            else:
                params = [p.to(dtype) for p in self._parameters.values()]
            work.append((g, ks, w, size, self.plan(g), self._angles(g, params, w, x, size, det)))
        n_wires = max(plan.n_wires for *_, plan, _ in work)
        device = self.quantum_device(dtype, n_wires)
        # the unweighted cost is measured as ONE observable (its sum over edges in the device)
        summed = [self.output == "cost" and w is None for _, _, w, *_ in work]
        groups = [(plan, angles, size, s) for (_, _, _, size, plan, angles), s in zip(work, summed)]
        outs = run_groups(groups, device, self.diff_method, det)
        results: list = [None] * len(items)
        for (g, ks, w, size, plan, _), out, s in zip(work, outs, summed):
            if self.output == "cost" and not s:
                weighted = out if w is None else w * out
                out = ordered_sum(weighted) if det else weighted.sum(-1)
            start = 0
            for k in ks:
                results[k] = out[start : start + items[k][3]]
                start += items[k][3]
        return results

    def _device(self) -> torch.device:
        return next(iter(self.parameters())).device

    def _dtype(self) -> torch.dtype:
        return next(iter(self.parameters())).dtype

    def _angles(self, g: Graph, params, w, x, size: int, det: bool) -> list:
        """One angle entry per block of the template (see ``build_tape``): per gate ``(B, n_gates)`` where
        they differ between gates, else one angle per block (0-dim, or ``(B,)`` per sample when deterministic)."""
        if self.kind == "qaoa":
            gamma, beta = params  # (L,), or (B, L) per sample when deterministic
            angles: list = [None]
            for l in range(self.n_layers):
                gl, bl = gamma[..., l], beta[..., l]
                if w is None:
                    angles.append(2 * gl)
                elif det:
                    angles.append(2 * share_columns(gl, g.n_edges, det) * w)
                else:
                    angles.append(2 * gl * w)
                angles.append(2 * bl)
            return angles
        coupling, rotation = params
        if not det:
            coupling, rotation = coupling.expand(size, *coupling.shape), rotation.expand(size, *rotation.shape)
        angles = [x[:, :, f] for f in range(self.n_features)]
        for l in range(self.n_layers):
            zz, xx = coupling[:, l, :, 0], coupling[:, l, :, 1]
            if w is not None:
                zz, xx = zz * w, xx * w
            angles += [zz, xx, rotation[:, l, :, 0], rotation[:, l, :, 1]]
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


def _weights(item, dtype, device) -> torch.Tensor:
    g, w, _, size = item
    return torch.ones(size, g.n_edges, dtype=dtype, device=device) if w is None else w.to(dtype)


def _module_call(module, params, *args, **kwargs):
    """``module(*args, **kwargs)`` with ``params`` in place of its parameters (the torch.func entry's body)."""
    return torch.func.functional_call(module, params, args, kwargs)


def _real_tensor(t, name: str, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(t, np.ndarray):
        t = torch.as_tensor(t)
    elif not isinstance(t, torch.Tensor):  # Python numbers: in the layer's dtype (torch's default dtype rounded a
        t = torch.as_tensor(t, dtype=dtype)  # list to float32 before a float64 layer read it)
    if t.is_complex() or not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must be a real tensor, got dtype {t.dtype}.")
    # checked where the tensor lives (no host read a call: a captured step may hold it)
    assert_on_device(torch.isfinite(t.detach()), f"{name} holds NaN or inf; clean it (e.g. torch.nan_to_num) before the layer.")
    return t


def _per_graph(values, n: int, name: str) -> list:
    if values is None:
        return [None] * n
    if isinstance(values, torch.Tensor) or len(values) != n:
        raise ValueError(f"with graphs=, {name} must be a list with one entry per graph ({n}), or None.")
    return list(values)


__all__ = ["GraphQLayer"]

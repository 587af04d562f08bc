"""Light-cone sub-circuits of a graph template, grouped into isomorphism classes.

``<Z_u Z_v>`` after a depth-p QAOA circuit depends only on the gates in its reverse light cone: walking the
blocks from the last to the first, a block's gates that touch the current support are kept and widen it;
the rest commute with everything kept after them and cancel (every block's gates commute with each other,
so the whole block sees the support as it stands at the block's end). On a 3-regular graph that is at most
6 qubits at p=1 and 14 at p=2, whatever the graph's size.

Many cones are the same circuit up to a relabelling of wires (a random regular graph is locally a tree).
Each cone becomes a labelled graph (node label: root or not, and which single-qubit blocks act on it; edge
label: which two-qubit blocks act on it); cones whose labelled graphs are isomorphic (a Weisfeiler-Lehman
hash to bucket, VF2 to confirm and give the mapping) share one sub-template on wires ``0 .. k-1``, run as
one broadcast execution over all members (and all samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from ._graph_circuits import Block, Template


@dataclass(frozen=True)
class ConeClass:
    """Cones sharing one sub-template.

    ``index[b]`` is ``(n_members, n_gates in sub-block b)``: the position in the full template's block ``b``
    of each member's gate; ``members`` are the roots (output positions) of the members in order.
    """

    template: Template
    members: tuple[int, ...]
    index: tuple[np.ndarray, ...]


def light_cone(template: Template, root: tuple[int, ...]) -> tuple[set[int], list[list[int]]]:
    """The support and, per block, the positions of the gates kept for measuring ``Z`` on ``root``."""
    support = set(root)
    kept: list[list[int]] = [[] for _ in template.blocks]
    for b in range(len(template.blocks) - 1, -1, -1):
        block = template.blocks[b]
        kept[b] = [g for g, w in enumerate(block.wires) if support.intersection(w)]
        if block.two_qubit:
            for g in kept[b]:
                support.update(block.wires[g])
    return support, kept


def max_cone_width(template: Template) -> int:
    return max((len(light_cone(template, r)[0]) for r in template.roots), default=0)


def _labelled(template: Template, root: tuple[int, ...], support: set[int], kept) -> nx.Graph:
    g = nx.Graph()
    singles: dict[int, list[int]] = {v: [] for v in support}
    pairs: dict[tuple[int, int], list[int]] = {}
    for b, positions in enumerate(kept):
        block = template.blocks[b]
        for p in positions:
            w = block.wires[p]
            if block.two_qubit:
                pairs.setdefault((min(w), max(w)), []).append(b)
            else:
                singles[w[0]].append(b)
    for v in support:
        g.add_node(v, label=f"{int(v in root)}:{singles[v]}")
    for (u, v), blocks in pairs.items():
        g.add_edge(u, v, label=str(blocks))
    return g


def _same_label(a, b) -> bool:
    return a["label"] == b["label"]


def cone_classes(template: Template) -> list[ConeClass]:
    """Every root's light cone, grouped by isomorphism (classes in order of their first member)."""
    positions = [{w: g for g, w in enumerate(block.wires)} for block in template.blocks]
    buckets: dict[str, list[int]] = {}
    reps: list[tuple[nx.Graph, tuple, list]] = []  # (labelled graph, root, rep wire order per block)
    members: list[list[tuple[int, dict]]] = []
    for r, root in enumerate(template.roots):
        support, kept = light_cone(template, root)
        graph = _labelled(template, root, support, kept)
        h = nx.weisfeiler_lehman_graph_hash(graph, node_attr="label", edge_attr="label")
        found = None
        for c in buckets.get(h, []):
            matcher = nx.algorithms.isomorphism.GraphMatcher(reps[c][0], graph, node_match=_same_label, edge_match=_same_label)
            if matcher.is_isomorphic():
                found = c
                mapping = dict(matcher.mapping)  # rep wire -> this cone's wire
                break
        if found is None:
            found = len(reps)
            buckets.setdefault(h, []).append(found)
            order = list(root) + sorted(support.difference(root))
            relabel = {w: i for i, w in enumerate(order)}
            # canonical gate order inside each block: by the relabelled wires
            wires = [sorted((template.blocks[b].wires[p] for p in kept[b]), key=lambda w: tuple(sorted(relabel[x] for x in w))) for b in range(len(kept))]
            reps.append((graph, root, wires, relabel))
            members.append([])
            mapping = {w: w for w in support}
        members[found].append((r, mapping))
    classes = []
    for (graph, root, wires, relabel), mem in zip(reps, members):
        blocks = []
        index = []
        for b, block in enumerate(template.blocks):
            blocks.append(Block(block.gate, tuple(tuple(sorted(relabel[x] for x in w)) for w in wires[b])))
            rows = []
            for _, mapping in mem:
                row = []
                for w in wires[b]:
                    mapped = tuple(mapping[x] for x in w)
                    key = mapped if len(mapped) == 1 else (min(mapped), max(mapped))
                    row.append(positions[b][key])
                rows.append(row)
            index.append(np.asarray(rows, dtype=np.int64).reshape(len(mem), len(wires[b])))
        sub = Template(len(relabel), tuple(blocks), (tuple(relabel[w] for w in root),))
        classes.append(ConeClass(sub, tuple(r for r, _ in mem), tuple(index)))
    return classes


__all__ = ["ConeClass", "light_cone", "max_cone_width", "cone_classes"]

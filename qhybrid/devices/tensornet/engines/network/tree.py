"""A linear contraction path as a binary tree (``_binary_tree``), cut into ``torch.einsum`` calls of a few
letters each (``_chunks``): what a ``ContractionPlan`` replays."""

from __future__ import annotations

from dataclasses import dataclass
from string import ascii_letters as _EINSUM_CHARS  # einsum's index letters

CHUNK_LETTERS = 8
"""A subtree of the contraction tree runs as one ``torch.einsum`` call (its pairwise steps in C++) while its
tensors name at most this many indices: C++ einsum aligns every operand to all of a call's indices, so
wide calls cost more than they save (a Q100 p=3 light cone: 6-10 letters 1.5x faster than pairwise, 52
letters 4x slower)."""


@dataclass(frozen=True)
class _Step:
    """One ``torch.einsum`` call: a subtree of the contraction tree whose tensors name at most 52 indices,
    run by torch's C++ einsum along the subtree's own pairwise order (``pairs``, a flat linear path)."""

    operands: tuple[int, ...]  # positions in the working list, popped in descending order
    equation: str  # "" for a step too wide for einsum (refused when contracted)
    order: tuple[int, ...] | None = None  # the popped tensors in the equation's order (None: as popped)
    pairs: tuple[int, ...] = ()  # the subtree's pairwise order over its operands (empty: two operands)

def _binary_tree(inputs, output, path) -> tuple[dict, dict]:
    """A linear path (steps of two or more working-list positions; a longer step contracts left to right in
    its order) as a binary tree: ``nodes[id] = (left, right)`` for ids from ``len(inputs)`` on, and every
    node's indices (a result keeps those the output or a tensor not yet contracted holds)."""
    indices = {k: tuple(ix) for k, ix in enumerate(inputs)}
    holders: dict[int, int] = dict.fromkeys(output, 1)
    for ix in inputs:
        for i in set(ix):
            holders[i] = holders.get(i, 0) + 1
    working = list(range(len(inputs)))
    nodes: dict[int, tuple[int, int]] = {}
    last = len(path) - 1
    for n_step, step in enumerate(path):
        if len(step) == 2 and n_step != last:
            done = _pair_step(step, working, indices, holders)
            if done is not None:
                nodes[done[0]] = done[1]
                continue
        ids = [working[p] for p in step]
        for p in sorted(step, reverse=True):
            working.pop(p)
        for t in ids:
            for i in set(indices[t]):
                holders[i] -= 1
        acc = ids[0]
        for k, t in enumerate(ids[1:], 2):
            later = {i for u in ids[k:] for i in indices[u]}
            node = len(indices)
            if n_step == last and k == len(ids):
                result = tuple(output)
            else:
                every = dict.fromkeys((*indices[acc], *indices[t]))
                result = tuple(i for i in every if holders[i] > 0 or i in later)
            nodes[node] = (acc, t)
            indices[node] = result
            acc = node
        if len(ids) == 1:  # a one-tensor network: its traces and the output's order
            node = len(indices)
            nodes[node] = (acc, -1)
            indices[node] = tuple(output) if n_step == last else indices[acc]
            acc = node
        for i in set(indices[acc]):
            holders[i] += 1
        working.append(acc)
    return nodes, indices


def _pair_step(step, working: list, indices: dict, holders: dict) -> tuple | None:
    """``_binary_tree``'s pairwise step (not the last), index by index in one pass: an index one operand
    holds stays where another tensor or the output holds it too (its holders unchanged), one both hold
    where a third does (one holder less). Returns (the new node's id, its operands' ids), its indices
    stored; None where an operand repeats an index (the general step handles it). 2x faster than counting
    every index down and the result's up."""
    p, q = step
    ta, tb = working[p], working[q]
    a, b = indices[ta], indices[tb]
    sa, sb = set(a), set(b)
    if len(sa) != len(a) or len(sb) != len(b):
        return None
    for r in sorted(step, reverse=True):
        working.pop(r)
    result = []
    for i in a:
        h = holders[i]
        if i in sb:
            if h > 2:
                result.append(i)
                holders[i] = h - 1
            else:
                holders[i] = 0
        elif h > 1:
            result.append(i)
        else:
            holders[i] = 0
    for i in b:
        if i not in sa:
            if holders[i] > 1:
                result.append(i)
            else:
                holders[i] = 0
    node = len(indices)
    indices[node] = tuple(result)
    working.append(node)
    return node, (ta, tb)


def _chunks(n_inputs: int, nodes: dict, indices: dict) -> list[_Step]:
    """Einsum calls covering the tree bottom-up: a subtree becomes one call while its tensors name at most
    52 indices (one Python call and C++ steps where there were as many Python steps as tensors)."""
    if not nodes:
        return []
    root = max(nodes)
    leaves: dict[int, list[int]] = {}  # per node: the tensors its call would take (inputs or earlier calls)
    letters: dict[int, set] = {}
    cut: list[int] = []  # nodes that become calls, children before parents

    def leaf(t: int) -> tuple[list[int], set]:
        if t in nodes and t not in cut:
            cut.append(t)  # the child's subtree becomes a call of its own; its result a tensor
        return [t], set(indices[t])

    for node in sorted(nodes):  # ids grow bottom-up: children are numbered before their parents
        left, right = nodes[node]
        if right == -1:
            leaves[node], letters[node] = leaf(left) if left in nodes else ([left], set(indices[left]))
            continue
        parts = []
        for child in (left, right):
            if child in nodes and nodes[child][1] == -1:
                parts.append(leaf(child))  # a one-tensor step (a trace) is a call of its own
            elif child in nodes:
                parts.append((leaves[child], letters[child]))
            else:
                parts.append(([child], set(indices[child])))
        union = parts[0][1] | parts[1][1] | set(indices[node])
        if len(union) <= CHUNK_LETTERS:
            leaves[node], letters[node] = parts[0][0] + parts[1][0], union
        else:  # too many letters: the children are contracted first, each as a call of its own
            (l_leaves, l_letters), (r_leaves, r_letters) = (
                leaf(child) if child in nodes else ([child], set(indices[child])) for child in (left, right)
            )
            leaves[node], letters[node] = l_leaves + r_leaves, l_letters | r_letters | set(indices[node])
    cut.append(root)
    working = list(range(n_inputs))
    steps = []
    for node in cut:
        taken_ids = leaves[node]
        positions = [working.index(t) for t in taken_ids]
        popped = sorted(positions, reverse=True)
        order = tuple(popped.index(p) for p in positions)
        for p in popped:
            working.pop(p)
        working.append(node)
        pairs = _inner_path(node, taken_ids, nodes) if len(taken_ids) > 2 else ()
        equation = _equation([indices[t] for t in taken_ids], indices[node])
        steps.append(_Step(tuple(popped), equation, order, pairs))
    return steps


def _inner_path(node: int, taken: list[int], nodes: dict) -> tuple[int, ...]:
    """The subtree under ``node`` over its call's tensors ``taken``, as a flat linear path."""
    local = list(taken)
    stop = set(taken)
    order: list[int] = []

    def walk(t):
        if t in stop:
            return
        left, right = nodes[t]
        walk(left)
        walk(right)
        order.append(t)

    walk(node)
    flat: list[int] = []
    for t in order:
        left, right = nodes[t]
        i, j = local.index(left), local.index(right)
        flat += [i, j]
        for p in sorted((i, j), reverse=True):
            local.pop(p)
        local.append(t)
    return tuple(flat)


def _equation(taken, result) -> str:
    """The einsum equation of one pairwise step, or "" when it needs more than 52 letters."""
    local: dict[int, str] = {}
    for ix in (*taken, result):
        for i in ix:
            if i not in local:
                if len(local) == len(_EINSUM_CHARS):
                    return ""
                local[i] = _EINSUM_CHARS[len(local)]
    equation = ",".join("".join(local[i] for i in ix) for ix in taken)
    return equation + "->" + "".join(local[i] for i in result)


__all__ = ["CHUNK_LETTERS", "_Step", "_binary_tree", "_chunks"]

"""``qhybrid.workflow._call_args.CallArgs``: the one flattening of a qnode call's arguments (static traces, CUDA graphs)."""

from __future__ import annotations

import torch

from qhybrid.workflow._call_args import CallArgs


def test_tensors_in_order_positional_then_keywords_by_name_and_substituted_back():
    a, b, c = torch.zeros(2), torch.ones(3), torch.full((1,), 2.0)
    call = CallArgs((a, 5, b), {"z": c, "flag": True})
    assert [t is u for t, u in zip(call.tensors, (a, b, c))] == [True, True, True]
    assert call.static == ((1, 5), (3, True))  # "flag" sorts before "z"
    new = [torch.ones(2), torch.zeros(3), torch.zeros(1)]
    args, kwargs = call.with_tensors(new)
    assert args[0] is new[0] and args[1] == 5 and args[2] is new[1]
    assert kwargs == {"flag": True, "z": new[2]}


def test_a_call_without_tensors():
    call = CallArgs((1, "x"), {})
    assert call.tensors == [] and call.with_tensors([]) == ([1, "x"], {})

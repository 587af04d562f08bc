"""The boundary torch.compile sees: a qhybrid circuit call is one opaque step, not traced.

Dynamo cannot usefully trace a circuit call (tapes, PennyLane operators, plan caches, data-dependent
index maps): it fails building guards on PennyLane objects or breaks the graph in many places. The
circuit call is instead left out of the compiled graph as a whole, so a compiled model is
``classical graph -> quantum call (run eagerly, differentiated by qhybrid's own autograd Function) ->
classical graph``: exactly one graph break per circuit call. ``fullgraph=True`` cannot hold a graph
break; the reason given here is what torch then shows.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

import torch

from .._inference import outside_inference_mode

F = TypeVar("F", bound=Callable)

COMPILE_BREAK_REASON = (
    "qhybrid: a quantum circuit call (qnode, qhybrid.execute or a circuit layer's forward) runs as one "
    "opaque step outside torch.compile's graph, so a compiled model holding one has a graph break there. "
    "Compile with fullgraph=False (the default): the classical parts around the circuit are still "
    "compiled, and the circuit runs as one batched device call with qhybrid's gradients."
)


def quantum_boundary(fn: F) -> F:
    """``fn`` as a call torch.compile leaves out of its graph (run eagerly; autograd still flows).

    ``torch.compiler.disable`` imports ``torch._dynamo`` (about 1 s, most of ``import qhybrid``), so it is
    applied at the first call made once something has imported Dynamo; until then nothing can be compiling
    and ``fn`` runs as it is. The wrapper carries Dynamo's disable marks, so a compiled caller breaks its graph
    here rather than tracing in.
    """
    disabled = None
    fn = outside_inference_mode(fn)

    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        nonlocal disabled
        if disabled is None:
            if "torch._dynamo" not in sys.modules:
                return fn(*args, **kwargs)
            disabled = torch.compiler.disable(fn, reason=COMPILE_BREAK_REASON)
        return disabled(*args, **kwargs)

    boundary._torchdynamo_disable = True  # what Dynamo reads of a disabled callee (not inlined, a graph break)
    boundary._torchdynamo_disable_msg = COMPILE_BREAK_REASON
    return boundary

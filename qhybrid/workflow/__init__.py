"""The path of one call: ``@qhybrid.qnode`` (and the layers built on it) down to one device execution.

::

    circuit(x, w)                                   QNode.__call__                        (qnode.py)
      │  inside torch.func (grad, jacrev, jacfwd, vmap)? ──► one autograd Function over the call (_functorch.py):
      │        this same path on the plain values, VJPs by re-running it, vmap one call per element
      │  capture="cuda-graph" and a graph for this call's key?  ──► replay it            (_capture.py)
      │  static_structure and a trace for this signature?       ──► gather x, w into it  (_static.py)
      │        (the arguments are flattened once: _call_args.CallArgs gives the key, tensors, device;
      │        a first call's lazy recording is its trace where it used no value: _static_lazy.py)
      ▼
    record the function into a tape                  QNode.construct
      │  floating tensor arguments handed over as LazyParams: indexing and constant arithmetic stay
      │  index tables (_lazy.py), each group of gate parameters then made by one take (_lazy_resolve.py)
      │  user transforms (qml.transform, metric_tensor, ...)?   ──► their tapes          (_transforms.py)
      ▼
    qhybrid.interfaces.torch.execute(tapes)          one opaque step to torch.compile    (interfaces/_compile.py)
      │  device preprocessing, once per tape structure           (interfaces/_preprocess.py)
      ▼
    interfaces.torch.run_prepared(variants, postprocess)        a static trace enters here too
      │  get_jpc(diff_method) ──► gradients._execute.execute_variants ──► ExecuteTapes (autograd Function)
      ▼                                                    or the device's one-node path
    device.simulate_variants(variants)                devices/ (tensornet, aer)
      ▲ backward: jpc.compute_vjp(variants, dy)        gradients/ (adjoint, parameter-shift, backprop)

``qhybrid.device`` (``_device_factory.py``) builds devices by short name; :func:`qhybrid.cuda_graph`
(``cuda_graph.py``) captures any step built from these as CUDA graphs.
"""

from ._device_factory import device
from .cuda_graph import cuda_graph
from .qnode import QNode, qnode

__all__ = ["QNode", "qnode", "device", "cuda_graph"]

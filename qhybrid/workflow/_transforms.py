"""PennyLane's QNode face of ``@qhybrid.qnode``: the compile pipeline that ``qml.transform`` appends to, and the
attributes ``qml.draw``, ``qml.specs`` and the classical cotransforms of
``qml.metric_tensor`` / ``qml.gradients.*`` read.

A qhybrid QNode is a ``qml.QNode`` subclass, so every transform dispatches to it as to PennyLane's own QNode
(a copy with the transform appended to ``compile_pipeline``). It does not run ``qml.QNode.__init__`` (about
60 us, and a device check qhybrid makes itself at call time): :meth:`PennyLaneQNodeFace._init_pennylane`
sets what PennyLane reads. A call with a non-empty pipeline runs it the way PennyLane's QNode does: tape
-> user transforms -> tapes -> one ``qhybrid.execute`` (differentiable) -> the transforms' postprocessing.
"""

from __future__ import annotations

from typing import Callable

import pennylane as qml
from pennylane.math import Interface
from pennylane.measurements import Shots
from pennylane.transforms.core import CompilePipeline
from pennylane.workflow.qnode import _to_qfunc_output_type

_UPDATABLE = ("device", "diff_method", "max_diff", "gradient_device")


class PennyLaneQNodeFace(qml.QNode):
    """The state PennyLane's transforms and drawing tools read from a QNode (torch interface)."""

    def _init_pennylane(self, func: Callable, device, max_diff: int) -> None:
        self.func = func
        self.device = device
        self._interface = Interface.TORCH
        self.static_argnums = []
        self.execute_kwargs = {
            "grad_on_execution": "best",
            "cache": "auto",
            "cachesize": 10000,
            "max_diff": max_diff,
            # qhybrid's adjoint is a VJP in the backward pass: said so, so that what asks the device for its
            # configuration (qml.add_noise, qml.workflow.construct_batch) gets no note to pass device_vjp=True
            "device_vjp": getattr(self, "diff_method", None) == "adjoint",
            "postselect_mode": None,
            "mcm_method": None,
            "executor_backend": None,
        }
        self.gradient_kwargs = {}
        self._tape = None
        self._qfunc_output = None
        self._gradient_fn = None
        self._qfunc_uses_shots_arg = False
        self._shots = getattr(device, "shots", None) or Shots(None)
        self._shots_override_device = False
        self._compile_pipeline = CompilePipeline()

    def __copy__(self):
        # PennyLane's __copy__ builds a plain qml.QNode; a transformed qhybrid qnode must stay one
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.execute_kwargs = dict(self.execute_kwargs)
        new.gradient_kwargs = dict(self.gradient_kwargs)
        new._compile_pipeline = CompilePipeline(self.compile_pipeline)
        new._fresh_caches()  # traces and graphs are keyed by arguments, not transforms: the copy needs its own
        return new

    def update(self, **kwargs):
        """A copy with other settings (any of ``device``, ``diff_method``, ``max_diff``, ``gradient_device``),
        keeping the transforms and shots.

        >>> import qhybrid
        >>> q = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])
        >>> q.update(diff_method="parameter-shift").diff_method
        'parameter-shift'
        """
        unknown = sorted(set(kwargs) - set(_UPDATABLE))
        if unknown or not kwargs:
            raise ValueError(
                f"A qhybrid qnode updates {', '.join(_UPDATABLE)}; got {unknown or 'nothing'}. For PennyLane's "
                "other QNode options use qml.qnode(qml.device('qhybrid.tensornet', ...), interface='torch')."
            )
        new = type(self)(
            self.func,
            kwargs.get("device", self.device),
            kwargs.get("diff_method", self.diff_method),
            max_diff=kwargs.get("max_diff", self.max_diff),
            gradient_device=kwargs.get("gradient_device", self.gradient_device),
            static_structure=self.static_structure,
            capture=self.capture,
        )
        new._compile_pipeline = CompilePipeline(self.compile_pipeline)
        return new

    def update_shots(self, shots):
        """Refused: a qhybrid qnode samples with its device's shots (``qml.set_shots`` lands here)."""
        kind = "aer" if "aer" in str(getattr(self.device, "name", "")) else "tensornet"  # (the qnode's own device)
        raise ValueError(
            f"qml.set_shots({shots!r}) does not apply to a qhybrid qnode: it runs with its device's shots. Give the "
            f"device the shots (qhybrid.device('{kind}', wires=..., shots=N)), or use qml.set_shots on "
            f"qml.qnode(qml.device('qhybrid.{kind}', ...), interface='torch')."
        )


def run_pipeline(qnode: PennyLaneQNodeFace, tape: qml.tape.QuantumScript, out, args, kwargs, run: Callable):
    """The result of ``tape`` through ``qnode.compile_pipeline`` (``run``: tapes -> results, differentiable),
    shaped like the quantum function's return as PennyLane's QNode shapes it."""
    params = tape.get_parameters(trainable_only=False)
    tape.trainable_params = qml.math.get_trainable_indices(params)
    pipeline = qnode.compile_pipeline
    pipeline.set_classical_component(qnode, args, kwargs)  # classical Jacobians for metric_tensor, param_shift
    tapes, post = pipeline((tape,))
    if pipeline.is_informative:  # e.g. adjoint_metric_tensor: its postprocessing reads the tapes themselves
        (result,) = post(tapes)
        return result
    (result,) = post(tuple(run(list(tapes))))
    shots = tape.shots if tape.shots else getattr(qnode.device, "shots", tape.shots)  # the device's, where the tape has none
    return _to_qfunc_output_type(result, out, shots.has_partitioned_shots)


__all__ = ["PennyLaneQNodeFace", "run_pipeline"]

"""``@qhybrid.qnode``: a quantum function as a torch-differentiable function."""

from __future__ import annotations

import functools
from typing import Callable

import pennylane as qml
from pennylane.measurements import MeasurementProcess

from ._capture import Graphs, check_capture, qnode_call
from ._compile import quantum_boundary
from .interfaces._placement import call_device
from .interfaces.torch import execute
from .typing import DiffMethod


class QNode:
    """A quantum function bound to a device and a gradient method.

    Calling it records the function into a PennyLane tape (torch tensors stay its parameters; a leading
    batch axis on data arguments broadcasts the whole circuit in one execution), executes it and returns
    what a PennyLane torch QNode returns for the same function.

    >>> import qhybrid, torch
    >>> dev = qhybrid.device("tensornet", wires=2)
    >>> @qhybrid.qnode(dev, diff_method="adjoint")
    ... def circuit(x):
    ...     qml.RY(x, wires=0)
    ...     qml.CNOT(wires=[0, 1])
    ...     return qml.expval(qml.Z(1))
    >>> circuit(torch.tensor([0.0, 3.14159]))
    tensor([ 1., -1.], dtype=torch.float64)
    """

    def __init__(
        self,
        func: Callable,
        device,
        diff_method: DiffMethod = "best",
        *,
        max_diff: int = 1,
        gradient_device=None,
        capture: str | None = None,
    ):
        tdev = getattr(device, "torch_device", None)
        capture = check_capture(capture, "qnode", torch_device=tdev, diff_method=diff_method)
        self._graphs = Graphs("qnode") if capture else None
        self.func = func
        self.device = device
        self.diff_method = diff_method
        self.max_diff = max_diff
        self.gradient_device = gradient_device
        self.tape: qml.tape.QuantumScript | None = None
        """The tape recorded by the last call (for drawing and inspection); it holds that call's parameters."""
        functools.update_wrapper(self, func)

    def construct(self, args, kwargs) -> tuple[qml.tape.QuantumScript, object]:
        """Record the quantum function into a tape; also returns what the function returned."""
        with qml.queuing.AnnotatedQueue() as q:
            out = self.func(*args, **kwargs)
        tape = qml.tape.QuantumScript.from_queue(q)
        if isinstance(out, MeasurementProcess):
            measurements = [out]
        elif isinstance(out, (list, tuple)) and all(isinstance(m, MeasurementProcess) for m in out):
            measurements = list(out)
        else:
            raise TypeError(
                f"A qhybrid qnode must return a measurement or a list/tuple of measurements, got {type(out).__name__}."
            )
        if measurements != list(tape.measurements):
            tape = tape.copy(measurements=measurements)
        self.tape = tape
        return tape, out

    @quantum_boundary
    def __call__(self, *args, **kwargs):
        if self._graphs is not None and not self._graphs.running:  # capture="cuda-graph": replay
            return qnode_call(self, self._graphs, args, kwargs)
        tape, out = self.construct(args, kwargs)
        (result,) = execute(
            [tape],
            self.device,
            self.diff_method,
            max_diff=self.max_diff,
            gradient_device=self.gradient_device,
            result_device=call_device(args, kwargs) or call_device(tape.get_parameters(trainable_only=False)),
        )
        if isinstance(out, (list, tuple)):
            result = (result,) if len(out) == 1 else result
            return type(out)(result)
        return result


def qnode(
    device, diff_method: DiffMethod = "best", *, max_diff: int = 1, gradient_device=None, capture: str | None = None
):
    """Decorator form of :class:`QNode`; ``capture="cuda-graph"`` captures each call shape's forward and
    backward as CUDA graphs and replays them (GPU only, see docs/GPU.md).

    >>> import qhybrid
    >>> @qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")
    ... def f(x):
    ...     qml.RX(x, wires=0)
    ...     return qml.expval(qml.Z(0))
    """

    def wrap(func: Callable) -> QNode:
        return QNode(func, device, diff_method, max_diff=max_diff, gradient_device=gradient_device, capture=capture)

    return wrap

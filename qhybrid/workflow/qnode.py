"""``@qhybrid.qnode``: a quantum function as a torch-differentiable function."""

from __future__ import annotations

import copy
import functools
from typing import Callable

import pennylane as qml
from pennylane.measurements import MeasurementProcess
from pennylane.transforms.core import CompilePipeline
from torch.utils._pytree import tree_map

from ._capture import capture_graphs, qnode_call, replaying
from ._functorch import call_under_transforms, dual_arguments, transforms_active
from . import _lazy, _lazy_arguments
from ._lazy_resolve import measured_proxies, resolve
from ._plain_replay import UNRESOLVED, PlainReplays
from ._fast_operators import fast_gates
from ._recording_queue import RecordingQueue
from ._returns import returned_measurements, shaped_like
from ..devices._collector import collector_paused
from ..interfaces._compile import quantum_boundary
from ._transforms import PennyLaneQNodeFace, run_pipeline
from ..interfaces._placement import call_device
from ..interfaces.torch import execute
from ..gradients.jpc import check_diff_method
from ..typing import DiffMethod


class QNode(PennyLaneQNodeFace):
    """A quantum function bound to a device and a gradient method.

    Calling it records the function into a PennyLane tape (torch tensors stay its parameters; a leading
    batch axis on data arguments broadcasts the whole circuit in one execution; ``2 * gamma[l]`` per gate
    costs no op per gate: ``workflow/_lazy.py``), executes it (a recording exactly equal to an earlier one runs
    that one's trace: ``workflow/_plain_replay.py``) and returns what a PennyLane torch QNode returns for the same
    function. It is a ``qml.QNode`` to PennyLane's tools:
    transforms (``@qml.transform``, ``qml.metric_tensor``, ``qml.gradients.param_shift``)
    apply to it, and ``qml.draw`` / ``qml.specs`` read it.

    >>> import qhybrid, torch
    >>> dev = qhybrid.device("tensornet", wires=2)
    >>> @qhybrid.qnode(dev, diff_method="adjoint")
    ... def circuit(x):
    ...     qml.RY(x, wires=0)
    ...     qml.CNOT(wires=[0, 1])
    ...     return qml.expval(qml.Z(1))
    >>> circuit(torch.tensor([0.0, torch.pi])).round(decimals=12)
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
        static_structure: bool | str = False,
        capture: str | None = None,
    ):
        check_diff_method(diff_method)  # a typo raises here, naming the valid methods, not at the first call
        pipeline = None
        if isinstance(func, qml.QNode):  # qhybrid.qnode(dev, ...)(a QNode): its quantum function and transforms
            # run with this qnode's device and settings (wrapping it would copy its own over them)
            func, pipeline = func.func, func.compile_pipeline
        tdev = getattr(device, "torch_device", None)
        self._graphs = capture_graphs(capture, "qnode", torch_device=tdev, diff_method=diff_method)
        self.capture = capture
        self.func = func
        self.device = device
        self.diff_method = diff_method
        self.max_diff = max_diff
        self.gradient_device = gradient_device
        self._init_pennylane(func, device, max_diff)
        if pipeline:
            self._compile_pipeline = CompilePipeline(pipeline)
        self._tape: qml.tape.QuantumScript | None = None
        self._unresolved: tuple | None = None  # (a replayed call's recording, its arguments' versions)
        self.static_structure = static_structure
        self._record_real = False  # set once lazy recording could not serve this function: record from the tensors
        self._fresh_caches()
        functools.update_wrapper(self, func)

    @property
    def tape(self) -> qml.tape.QuantumScript | None:
        """The tape recorded by the last call (for drawing and inspection); it holds that call's parameters
        (with ``static_structure``, those of the last call that recorded one: a trace or a check). After a replayed
        call its parameters are made when it is first read, from that call's arguments: a RuntimeError says so
        where those were changed in place since."""
        if self._unresolved is not None:  # a replayed call's recording: its parameters made when first read
            tape, versions = self._unresolved
            if any(t._version != v for t, v in versions):
                raise RuntimeError(
                    "qhybrid: the arguments of this qnode's last call were changed in place since (an optimizer "
                    "step, say), and its tape, made when first read, would show the new values. Read qnode.tape "
                    "before changing them, or record the call again: qml.workflow.construct_tape(qnode)(*args)."
                )
            self._tape, self._unresolved = resolve(tape), None
        tape = self._tape
        if tape is not None and getattr(tape, "_trainable_params", 0) is None:
            # (as PennyLane's QNode marks its tape for torch: the parameters that require grad)
            params = tape.get_parameters(trainable_only=False)
            tape.trainable_params = [i for i, p in enumerate(params) if getattr(p, "requires_grad", False)]
        return tape

    @tape.setter
    def tape(self, tape: qml.tape.QuantumScript | None) -> None:
        self._tape, self._unresolved = tape, None

    def _fresh_caches(self) -> None:
        """Empty static traces, plain replays and CUDA graphs."""
        self._static = _static_cache(self.static_structure)
        self._replays = PlainReplays()
        self._graphs = None if self._graphs is None else self._graphs.fresh()

    def traced(self) -> "QNode":
        """This qnode with ``static_structure=True``: itself where it is so already, else a copy (same function,
        device, transforms and ``capture``) with traces of its own.

        >>> import qhybrid
        >>> q = qhybrid.qnode(qhybrid.device("tensornet", wires=1))(lambda x: (qml.RX(x, 0), qml.expval(qml.Z(0)))[1])
        >>> q.traced().static_structure, q.static_structure
        (True, False)
        """
        if self.static_structure:
            return self
        new = copy.copy(self)  # keeps the transforms; fresh caches
        new.static_structure = True
        new._fresh_caches()
        return new

    def __getstate__(self):  # traces and graphs hold tapes and GPU memory of this process: a copy makes its own
        state = dict(self.__dict__)
        state["_static"] = _static_cache(self.static_structure)
        state["_replays"] = PlainReplays()
        try:  # (lazy parameters do not travel)
            state["_tape"] = self.tape
        except RuntimeError:  # arguments changed since: no tape
            state["_tape"] = None
        state["_unresolved"] = None
        state["_graphs"] = None if self._graphs is None else self._graphs.fresh()
        return state

    def construct(
        self, args, kwargs, record: bool = True, lazy: bool = False, recorded=None, groups: dict | None = None
    ) -> tuple[qml.tape.QuantumScript, object]:
        """Record the quantum function into a tape; also returns what the function returned
        (``record=False``: without keeping it as ``self.tape``). ``lazy``: the tensor arguments recorded as
        index tables and their gate parameters made with one op per group (``_lazy``), not one per gate;
        then ``recorded(tape, session, out)`` sees the tape before its proxies are resolved and ``groups`` receives
        their groups (a static trace reads both: ``_static_lazy``); where ``recorded`` returns ``UNRESOLVED`` the
        tape is returned as recorded (a plain replay runs a trace instead: ``_plain_replay``) and ``self.tape``
        resolves when it is read."""
        lazy = lazy and _lazy.ENABLED
        # the cyclic collector paused: a recording allocates ~20 tracked objects a gate that live until the step
        # ends, and counted as new they set off full passes over every object alive (Q1000 p=2's 6,000 gates:
        # ~0.1 s of PennyLane's 0.3 s recording); they are freed by reference counts, and ``_lazy``'s proxies'
        # cycles are broken below
        with collector_paused():
            if lazy:
                proxy_args, proxy_kwargs, session = _lazy_arguments.proxied(args, kwargs)
                try:
                    tape, out = self._record(proxy_args, proxy_kwargs)
                    if recorded is not None and recorded(tape, session, out) is UNRESOLVED:
                        if record:  # resolved when read, from the arguments as they are now (versions kept)
                            roots = session.roots()
                            if any(t.is_inference() for t in roots):  # no version counter: made now
                                self.tape = resolve(tape)
                            else:
                                self._unresolved = (tape, [(t, t._version) for t in roots])
                        return tape, out
                    if measured_proxies(tape):
                        # an observable built from the arguments (trainable Hamiltonian coefficients) would be
                        # rebuilt term by term on every call to take its values: later calls record from the tensors
                        self._record_real = True
                    tape = resolve(tape, groups)
                except _lazy.Unrecordable:
                    # an op torch runs past ``__torch_function__`` (``torch.as_tensor(x, dtype=...)``) met a proxy,
                    # or a template keeps an operator made from one: this call and later ones record from the
                    # real tensors
                    self._record_real, lazy = True, False
                finally:
                    session.close()
            if not lazy:
                tape, out = self._record(args, kwargs)
        if record:
            self.tape = tape
        return tape, out

    def _record(self, args, kwargs) -> tuple[qml.tape.QuantumScript, object]:
        """The function's operators and measurements as recorded (lazy parameters unresolved), and its result."""
        with fast_gates(), RecordingQueue() as q:
            out = self.func(*args, **kwargs)
        tape = q.tape()
        measurements = returned_measurements(out)
        if measurements is None:
            raise TypeError(
                "A qhybrid qnode must return a measurement, a list or tuple of measurements, or a dict or nested "
                f"lists of them (as PennyLane's QNode), got {type(out).__name__}: {out!r:.200}."
            )
        if measurements != list(tape.measurements):
            tape = tape.copy(measurements=measurements)
        return tape, out

    @quantum_boundary
    def __call__(self, *args, **kwargs):
        if qml.QueuingManager.recording():
            # called inside another quantum function: what this call makes (its tape's copies, the device's
            # decompositions) is not the caller's to queue, as with PennyLane's QNode; the caller's lazy arguments
            # are handed over as their values (a static trace read them as constants: no gradient reached them)
            args, kwargs = tree_map(_lazy._used, (args, kwargs))
            with qml.QueuingManager.stop_recording():
                return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        if transforms_active() or dual_arguments(args, kwargs):  # torch.func, forward AD: see _functorch
            return call_under_transforms(self, args, kwargs)
        if replaying(self._graphs):  # capture="cuda-graph": replay
            return qnode_call(self, self._graphs, args, kwargs)
        if self._static is not None:  # the trace of this signature, where one is kept
            return self._static.call(self, args, kwargs)
        return self._call_recorded(args, kwargs)

    def _call_recorded(self, args, kwargs):
        """The function recorded and executed: its result, shaped like what the function returned."""
        # lazily recorded where the tape goes straight to the device (transforms read the tape's parameters)
        lazy = not self.compile_pipeline and not self._record_real
        if lazy and _lazy.ENABLED:  # a recording equal to an earlier one runs that one's trace
            return self._replays.call(self, args, kwargs)
        tape, out = self.construct(args, kwargs, lazy=lazy)
        if self.compile_pipeline:  # PennyLane transforms applied to this qnode
            run = lambda tapes: self._execute(tapes, args, kwargs)  # noqa: E731
            return run_pipeline(self, tape, out, args, kwargs, run)
        return self._shaped(tape, out, args, kwargs)

    def _shaped(self, tape, out, args, kwargs):
        """The result of a recorded ``tape``, shaped like ``out`` (what the function returned)."""
        (result,) = self._execute([tape], args, kwargs)
        return shaped_like(result, out, (tape.shots or self.device.shots).has_partitioned_shots)

    def _execute(self, tapes, args, kwargs) -> tuple:
        return execute(
            tapes,
            self.device,
            self.diff_method,
            max_diff=self.max_diff,
            gradient_device=self.gradient_device,
            result_device=call_device(args, kwargs),  # else execute places by the tapes' parameters
        )


def _static_cache(static_structure):
    if static_structure in (False, None):
        return None
    if static_structure not in (True, "verify"):
        raise ValueError(f"static_structure must be True, False or 'verify', got {static_structure!r}.")
    from ._static import StaticCache

    return StaticCache(verify_always=static_structure == "verify")


def _refuse_options(options: dict) -> None:
    """A PennyLane QNode option (``shots=``, ``interface=``, ...) given to ``qhybrid.qnode``: a TypeError that names
    it and what qhybrid does instead (Python's own said only "unexpected keyword argument")."""
    for name, value in options.items():
        if name == "interface" and str(getattr(value, "value", value)) in ("torch", "pytorch", "auto"):
            continue  # (what a qhybrid qnode is anyway: a PennyLane user's interface="torch" carries over)
        instead = {
            "shots": f"give the device its shots: qhybrid.device('tensornet', wires=..., shots={value!r})",
            "interface": "qhybrid's results are torch tensors (qml.QNode on a qhybrid device takes other interfaces)",
        }.get(name, "qhybrid.qnode takes diff_method, max_diff, gradient_device, static_structure and capture")
        raise TypeError(f"qhybrid.qnode got {name}={value!r}, a PennyLane QNode option it does not take: {instead}.")


def qnode(
    device,
    diff_method: DiffMethod = "best",
    *,
    max_diff: int = 1,
    gradient_device=None,
    static_structure: bool | str = False,
    capture: str | None = None,
    **pennylane_options,
):
    """Decorator form of :class:`QNode` (a PennyLane QNode option it does not take is refused by name);
    ``capture="cuda-graph"`` captures each call shape's forward and backward as CUDA graphs and replays them (GPU
    only, see docs/GPU.md).

    >>> import qhybrid
    >>> @qhybrid.qnode(qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")
    ... def f(x):
    ...     qml.RX(x, wires=0)
    ...     return qml.expval(qml.Z(0))

    ``static_structure=True`` traces the function once per argument signature (tensor shapes, dtypes,
    devices, ``requires_grad``; other arguments by value) and reuses the trace with the new values, like
    ``jax.jit``; a changed structure is detected and re-traced (what is checked, and when: ``qhybrid.workflow._static``).
    ``"verify"`` also re-records and compares on every call (debugging).

    >>> @qhybrid.qnode(qhybrid.device("tensornet", wires=2), static_structure=True)
    ... def g(x, w):
    ...     qml.AngleEmbedding(x, wires=[0, 1])
    ...     qml.BasicEntanglerLayers(w, wires=[0, 1])
    ...     return qml.expval(qml.Z(1))
    """

    _refuse_options(pennylane_options)

    def wrap(func: Callable) -> QNode:
        return QNode(
            func,
            device,
            diff_method,
            max_diff=max_diff,
            gradient_device=gradient_device,
            static_structure=static_structure,
            capture=capture,
        )

    return wrap

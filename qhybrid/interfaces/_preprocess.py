"""The device's preprocessing (template decomposition, validation), done once per tape structure.

PennyLane decomposes templates such as StronglyEntanglingLayers on every call (milliseconds per step).
Most decompositions only *index* their inputs (``weights[l, i, k]``), so the decomposed tape of a
structure is fixed and its parameters are a gather from the inputs. On the first call of a structure the
preprocessing runs normally and twice more on probe inputs (each input element replaced by its own
position, then by an affine image of it); when every output parameter is found to be a gather of one
input, in both probes, the decomposed tape is cached with those index maps. Later calls of the structure
gather their parameters (one indexing op per input, differentiable) and reuse the cached tape and
postprocessing. Anything else (non-tensor inputs, arithmetic on inputs, tapes that split) is
preprocessed normally every time, and so are tapes with shots.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Sequence

import numpy as np
import pennylane as qml
import torch

from .._variant import Gather, Variant, tape_parameters, through_rows
from ..devices._observable_key import Inexact, constants_key, observable_data, observable_key, own_attributes
from ..devices._observable_key import tape_parameters_fast
from ..devices.tensornet._rebound import rebound

PREPROCESS_CACHE_SIZE = 256
"""Tape structures whose preprocessing is remembered (least recently used dropped)."""

_PROBE_SCALE, _PROBE_OFFSET = 3.0, 7.0

_CACHE: OrderedDict = OrderedDict()
_UNCACHEABLE = object()


# PennyLane's named controlled gates: their settings (control wires and values, base, no work wires) follow
# from their kind and wires alone, which the structure key holds already; building and printing the settings
# of W3's 126 CNOTs took a tenth of its step
_SETTINGS_BY_WIRES = frozenset(
    (qml.CNOT, qml.CZ, qml.CY, qml.CH, qml.Toffoli, qml.CSWAP, qml.CRX, qml.CRY, qml.CRZ, qml.CRot,
     qml.ControlledPhaseShift)
)


def settings_key(op) -> str:
    """An operator's settings without its values: an operator among them (the base of a controlled gate)
    stands as its kind and wires, so that e.g. CRX(0.1) and CRX(0.2) share one key. A user's operator class's own
    instance attributes are settings too (``own_attributes``)."""
    own = own_attributes(op)
    if type(op) in _SETTINGS_BY_WIRES or not op.hyperparameters:
        return repr(own) if own else ""
    return repr(
        sorted(
            (k, (type(v).__name__, tuple(v.wires), settings_key(v)) if isinstance(v, qml.operation.Operator) else repr(v))
            for k, v in op.hyperparameters.items()
        )
    ) + (repr(own) if own else "")



# PennyLane's gates whose settings follow from their kind and wires (those above, or none) and whose number of data
# is fixed: kind, name and wires are their whole structure (the name is kept: PennyLane lets a user rename an
# operator). Q1000 p=2's key: 3.6 -> 2.4 ms
_PLAIN_GATES = _SETTINGS_BY_WIRES | frozenset(
    (qml.RX, qml.RY, qml.RZ, qml.Rot, qml.PhaseShift, qml.U1, qml.U2, qml.U3, qml.IsingXX, qml.IsingYY, qml.IsingZZ,
     qml.IsingXY, qml.Hadamard, qml.PauliX, qml.PauliY, qml.PauliZ, qml.S, qml.T, qml.SX, qml.SWAP, qml.ISWAP,
     qml.Identity, qml.MultiRZ, qml.PSWAP, qml.SingleExcitation, qml.DoubleExcitation)
)


def _structure_key(device, tape: qml.tape.QuantumScript, params: Sequence[torch.Tensor]):
    plain = _PLAIN_GATES
    ops = tuple(
        (kind, op.name, op.wires.labels) if (kind := type(op)) in plain
        else (kind, op.name, op.wires.labels, settings_key(op), len(op.data))
        for op in tape.operations
    )
    meas = tuple(observable_key(mp) for mp in tape.measurements)
    # a lazily recorded tape's parameters are a few tensors read by many gates (Q1000 p=2: four, 5,000 times):
    # each distinct one is described once and the key holds its number
    described: dict = {}
    shapes = tuple(_described(described, p) for p in params)
    # constants (a BasisState's bits, numbers) are held by the cached tape: their values key it (an observable's
    # own are in its key, computed once per observable object)
    n_ops = len(params) - sum(len(observable_data(mp.obs)) for mp in tape.measurements if mp.obs is not None)
    constants = constants_key([p for p in params[:n_ops] if not isinstance(p, torch.Tensor)])
    # None (every parameter trainable) read without PennyLane's par_info, which walks every observable's data
    trainable = getattr(tape, "_trainable_params", None)
    return (
        id(device), ops, meas, shapes, tuple(described.values()), constants, repr(tape.shots),
        None if trainable is None else repr(list(trainable)),
    )


def _described(described: dict, p) -> int | None:
    """The number of tensor ``p`` among the distinct tensors ``described`` so far (its shape, dtype, device and
    whether it requires grad entered on first sight); None for a constant."""
    if not isinstance(p, torch.Tensor):
        return None
    at = described.get(id(p))
    if at is None:
        at = described[id(p)] = (len(described), p.shape, p.dtype, p.device, p.requires_grad)
    return at[0]


def _probe_values(inputs, scale, offset) -> list[torch.Tensor]:
    """Each input with every element replaced by ``scale * (its flat position among all inputs) + offset``."""
    probes, start = [], 0
    for p in inputs:
        n = p.numel()
        probes.append((torch.arange(start, start + n, dtype=torch.float64) * scale + offset).reshape(p.shape))
        start += n
    return probes


def gather_maps(probe, inputs: Sequence[torch.Tensor], real: Sequence) -> list | None:
    """Per parameter of ``real``: (source input, flat indices) or ("const", value); None if some parameter
    is not a gather of one input. ``probe(probe_inputs)`` returns the parameters the same computation gives
    for probe inputs (or None when it takes another structure); it is called twice, on two affine probes."""
    bounds, start = [], 0
    for p in inputs:
        bounds.append((start, start + p.numel()))
        start += p.numel()
    outs = []
    for scale, offset in ((1.0, 0.0), (_PROBE_SCALE, _PROBE_OFFSET)):
        got = probe(_probe_values(inputs, scale, offset))
        if got is None:
            return None
        outs.append(got)
    if not (len(outs[0]) == len(outs[1]) == len(real)):
        return None
    maps = []
    for r, a, b in zip(real, outs[0], outs[1]):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            if a is r and b is r or (not isinstance(r, torch.Tensor) and _same_constant(a, r) and _same_constant(b, r)):
                maps.append(("const", r))
                continue
            return None
        if a.dtype != torch.float64 or a.is_complex() or not isinstance(r, torch.Tensor) or a.shape != r.shape:
            return None
        idx = a.round()
        if not torch.equal(idx, a) or not torch.equal(idx * _PROBE_SCALE + _PROBE_OFFSET, b):
            return None
        idx = idx.long()
        if idx.numel() == 0:
            return None
        lo, hi = int(idx.min()), int(idx.max())
        src = next((k for k, (s, e) in enumerate(bounds) if s <= lo and hi < e), None)
        if src is None:
            return None
        maps.append((src, idx - bounds[src][0]))
    return maps


def _same_constant(a, r) -> bool:
    """Whether a probe's non-tensor parameter ``a`` equals the real run's ``r`` (numbers or arrays)."""
    if isinstance(a, torch.Tensor):
        return False
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(r)))
    except (TypeError, ValueError):
        return False


def _identity_maps(params, new_tape) -> list | None:
    """The gather maps when the program handed the tape's own parameters through (the very objects, in
    order): each is read whole from itself. Probing a 1000-gate QAOA tape took 0.2-0.45 s of its first call."""
    out = tape_parameters_fast(new_tape)  # (observables' data remembered per object: a Sum walks its terms)
    if len(out) != len(params) or not all(a is b for a, b in zip(out, params)):
        return None
    maps, k = [], 0
    for p in params:
        if isinstance(p, torch.Tensor):
            maps.append((k, torch.arange(p.numel()).reshape(p.shape)))
            k += 1
        else:
            maps.append(("const", p))
    return maps


def _index_maps(program, tape, params, new_tape):
    """``gather_maps`` of the device program's output parameters over the tape's own tensor parameters
    (constant data stay as they are in the probes)."""
    slots = [j for j, p in enumerate(params) if isinstance(p, torch.Tensor)]
    real = tape_parameters_fast(new_tape)
    light, tail = _light_tape(tape, params, new_tape, real)

    def probe(values):  # only the tensors are rebound: a Hamiltonian's 10^3 constant terms are not rebuilt
        probed, _ = program([light.bind_new_parameters(list(values), slots)])
        return tape_parameters(probed[0]) + tail if len(probed) == 1 else None

    return gather_maps(probe, [params[j] for j in slots], real)


def _light_tape(tape, params, new_tape, real):
    """(the tape to probe, parameters to append to a probe's): where the observables carry only constants,
    which the program passes through, the probes measure ``Identity`` in their place and the real run's
    observable data are appended, so the program does not copy a 10^3-term Hamiltonian twice more (PennyLane's
    decompose copies every measurement: 0.2-0.4 s for H2O's). Else the tape itself."""
    n_ops = sum(len(op.data) for op in tape.operations)
    n_out = sum(len(op.data) for op in new_tape.operations)
    if n_ops == len(params) or any(isinstance(p, torch.Tensor) for p in params[n_ops:]):
        return tape, []
    if len(new_tape.measurements) != len(tape.measurements):
        return tape, []
    tail = real[n_out:]
    if len(tail) != len(params) - n_ops or not all(a is b for a, b in zip(tail, params[n_ops:])):
        return tape, []
    light = [type(mp)(obs=qml.Identity(mp.obs.wires)) if mp.obs is not None and observable_data(mp.obs) else mp
             for mp in tape.measurements]
    return tape.copy(measurements=light), tail


def _cacheable(tape, params, constants: bool = False) -> bool:
    """Whether a tape with these parameters can be served from the cache: real tensors (gathered each call),
    at least one, and constants (numbers, arrays: part of the key) only where they rarely change: observables'
    data (a Hamiltonian's coefficients) and state preparations (a Hartree-Fock BasisState). A gate angle given
    as a number may change every call, which would make every call a new structure, probed anew; ``constants``:
    the caller keeps what it gets for these constants (a static trace; a plain qnode's recording seen twice:
    ``workflow/_plain_replay``)."""
    tensors = [p for p in params if isinstance(p, torch.Tensor)]
    # each distinct tensor asked once (a lazily recorded tape's few tensors are read by thousands of gates)
    if not tensors or any(p.is_complex() for p in {id(p): p for p in tensors}.values()):
        return False
    try:
        for op in tape.operations:
            own_attributes(op)
    except Inexact:  # a user's operator keeps a setting that cannot be keyed by value: preprocessed every call
        return False
    if len(tensors) == len(params):
        return True
    if not constants:
        for op in tape.operations:
            if not isinstance(op, qml.operation.StatePrepBase) and not all(isinstance(p, torch.Tensor) for p in op.data):
                return False
    return all(isinstance(p, (torch.Tensor, int, float, complex, np.ndarray, np.generic)) for p in params)


def preprocess(device, tapes: Sequence[qml.tape.QuantumScript], constants: bool = False):
    """(variants of the device-ready tapes, postprocessing) — from the structure cache where possible
    (``constants``: tapes whose gates hold constants too, see ``_cacheable``)."""
    compiled = []

    def program(batch):  # built only when some tape is not served from the cache
        if not compiled:
            compiled.append(device.preprocess_transforms())
        return compiled[0](batch)

    entries = []
    for tape in tapes:
        params = tape_parameters_fast(tape)
        if tape.shots or not _cacheable(tape, params, constants):
            entries.append(None)
            continue
        key = _structure_key(device, tape, params)
        owned = _CACHE.get(key)
        # the key holds the device's id, not the device: a device made where a dropped one lay (the same id) must
        # not take the dropped one's tape (its wire order, its decompositions)
        entry = None if owned is None or owned[0]() is not device else owned[1]
        if entry is None:
            new_tapes, post = program([tape])
            entry = _UNCACHEABLE
            if len(new_tapes) == 1:
                try:
                    maps = _identity_maps(params, new_tapes[0]) or _index_maps(program, tape, params, new_tapes[0])
                except Exception:  # a transform that rejects probe values: no cache for this structure
                    maps = None
                if maps is not None:
                    entry = _frozen(new_tapes[0], post, maps, params)
            _CACHE[key] = (weakref.ref(device), entry)
            _CACHE.move_to_end(key)
            if len(_CACHE) > PREPROCESS_CACHE_SIZE:
                _CACHE.popitem(last=False)
            if entry is _UNCACHEABLE:  # a tape split in several goes the plain way, with the others
                entries.append((new_tapes, post) if len(new_tapes) == 1 else None)
                continue
            # the first call already runs the cached form: later calls gather their parameters, and a
            # gathered variant's backward sums in another order than this call's own tape would, so
            # deterministic layers get the same bits on their first call as on every later one
            entries.append(_gathered(entry, params))
            continue
        _CACHE.move_to_end(key)
        if entry is _UNCACHEABLE:
            entries.append(None)
            continue
        entries.append(_gathered(entry, params))
    # tapes without a cached form go through the program together, as before
    plain = [i for i, e in enumerate(entries) if e is None]
    plain_post = None
    if plain:
        plain_tapes, plain_post = program([tapes[i] for i in plain])
        if len(plain_tapes) != len(plain):  # a transform split tapes: run everything the plain way
            new_tapes, post = program(list(tapes))
            return [Variant.of(t) for t in new_tapes], post
        for i, t in zip(plain, plain_tapes):
            entries[i] = ([t], None)
    variants, posts = [], []
    for e in entries:
        new_tapes, post = e
        if isinstance(new_tapes, Variant):
            variants.append(new_tapes)
        else:
            variants.append(Variant.of(new_tapes[0]))
        posts.append(post)

    def postprocess(results):
        out = []
        plain_results = []
        for r, post, i in zip(results, posts, range(len(posts))):
            if post is None:
                plain_results.append(r)
                out.append(None)
            else:
                out.append(post((r,))[0])
        if plain_results:
            processed = list(plain_post(tuple(plain_results)))
            k = 0
            for i, post in enumerate(posts):
                if post is None:
                    out[i] = processed[k]
                    k += 1
        return tuple(out)

    return variants, postprocess


def _frozen(template, post, maps, params) -> tuple:
    """The cache entry ``(template, post, gather)``, its constant arrays copied where the tape holds any: the key
    holds their values, and the user's array, changed in place after this call, would otherwise change the cached
    tape under a key of the old values (a later array equal to the old one then ran the new values)."""
    if not any(isinstance(p, np.ndarray) for p in params):
        return template, post, Gather((), tuple(maps))
    copied: dict = {}

    def frozen(d):
        if not isinstance(d, np.ndarray):
            return d
        found = copied.get(id(d))
        if found is None:
            found = copied[id(d)] = d.copy()
        return found

    def rebuilt(op):
        data = [frozen(d) for d in op.data]
        if all(a is b for a, b in zip(data, op.data)):
            return op
        return rebound(op, data)  # (PennyLane's binding, mended where it loses something: a one-Kraus channel)

    ops = [rebuilt(op) for op in template.operations]
    mps = [
        mp if mp.obs is None or rebuilt(mp.obs) is mp.obs else type(mp)(obs=rebuilt(mp.obs))
        for mp in template.measurements
    ]
    maps = [("const", frozen(m[1])) if m[0] == "const" else m for m in maps]
    return template.copy(operations=ops, measurements=mps), post, Gather((), tuple(maps))


def _gathered(entry, params):
    template, post, gather = entry
    # a lazily recorded qnode's gate parameters are rows of a few tensors: the gather reads those (_variant)
    g = through_rows(gather.rebound([p for p in params if isinstance(p, torch.Tensor)]))
    return Variant(template, None, g), post

"""The cone classes of one step spread over the ranks of ``torch.distributed``: ``spread_terms``.

The classes of a ``ConeProgram`` are independent programs. With the device option ``spread_classes`` and a
process group of two or more ranks, each rank runs only the classes assigned to it (longest first to the
least loaded rank, by a cost estimate every rank computes alike from the same circuit and parameters, so
no message decides it), and one all-gather hands every rank every class's values: each rank returns the
same full result, bit for bit.

Every rank must make the same device calls, call for call, with the same circuits and parameters (a
replicated model): this splits one evaluation's work, it is not data parallelism. Only the classes are
split; building tapes, coefficients and the autograd glue still run on every rank, so it pays where class
programs dominate a step (Q100 at p=3: 21-27-wire closed networks), hardly at all where they do not (Q100
at p=2: the six classes are about 30% of a step's CPU time). A small all-gather of each rank's structure and a bitwise
fingerprint of its parameters comes first and refuses ranks that disagree (a payload all-gather of
mismatched sizes would abort the process).

Gradients: every rank computes the same loss from the same full result, so every rank's backward brings the
same cotangent ``dy`` of the gathered terms. Class ``c``'s values depend on the parameters only through its
own program, so the gradient is ``sum_c J_c^T dy_c``: each rank forms the products of its own classes
(autograd over the graph its forward recorded on a leaf of its own) and one all-reduce sums them, so every
rank holds the whole gradient. (``torch.distributed.nn.functional.all_gather`` would be wrong here: its
backward sums every rank's cotangent, ``world_size`` times the gradient of a replicated loss.) Each
backward through a spread node is exactly one collective, and the nodes outside the local graphs are the
same on every rank, so every rank's autograd engine meets the collectives in the same order.
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

import torch

from .....errors import GradientError, QhybridWarning, UnsupportedOperationError

COST_MAX_WIRES = 20
"""The cost estimate of a class counts at most this many wires (a wider class is a closed network, whose
cost does not double with every wire)."""

SPREAD_BACKENDS = ("gloo", "nccl")
"""Process-group backends whose all-gather and all-reduce the spread is written for."""

_SPREADS = {"spread_classes": "every cone class", "spread_slices": "every slice of a sliced contraction"}
"""What each spread device option spreads (for its messages)."""

_WARNED: list = []
"""The options whose "not initialised" warning this process has given."""


def _dist():
    import torch.distributed as dist

    return dist


def check_spread_option(option, name: str = "spread_classes") -> object:
    """``option`` if it is a valid value of the device option ``name`` (``spread_classes``, ``spread_slices``:
    a bool or a process group), else a ValueError.

    >>> check_spread_option(False)
    False
    """
    if isinstance(option, bool):
        return option
    dist = _dist()
    if dist.is_available() and isinstance(option, dist.ProcessGroup):
        return option
    raise ValueError(
        f"{name} must be True (spread {_SPREADS[name]} over torch.distributed's default group), False, or a "
        f"torch.distributed.ProcessGroup, got {option!r}."
    )


def check_spread_options(classes, slices) -> tuple:
    """The device options ``spread_classes`` and ``spread_slices``, each checked, refused together: a class
    runs on one rank, and its sliced contractions would wait for the other ranks.

    >>> check_spread_options(True, False)
    (True, False)
    """
    classes, slices = check_spread_option(classes), check_spread_option(slices, "spread_slices")
    if classes is not False and slices is not False:
        raise ValueError(
            "spread_classes and spread_slices cannot both be on: a class runs on one rank, and its sliced "
            "contractions would wait for the other ranks. Choose spread_classes (many cone classes) or "
            "spread_slices (a few large sliced contractions)."
        )
    return classes, slices


def spread_group(option, name: str = "spread_classes"):
    """The process group the work of the device option ``name`` is spread over, or None to run it all here:
    the option is off, the group has one rank, or ``torch.distributed`` is not initialised (said once per
    process and option)."""
    if option is False or option is None:
        return None
    dist = _dist()
    if not (dist.is_available() and dist.is_initialized()):
        if name not in _WARNED:
            _WARNED.append(name)
            warnings.warn(
                f"{name} is set but torch.distributed is not initialised: {_SPREADS[name]} runs in this "
                "process. Call torch.distributed.init_process_group (gloo or nccl) before the first circuit.",
                QhybridWarning,
                stacklevel=2,
            )
        return None
    group = dist.group.WORLD if option is True else option
    if dist.get_world_size(group) < 2:
        return None
    backend = str(dist.get_backend(group))
    if not any(b in backend for b in SPREAD_BACKENDS):
        raise UnsupportedOperationError(
            f"{name} runs over a gloo or nccl process group; this group's backend is {backend!r}. "
            "Initialise torch.distributed with backend='gloo' (CPU) or 'nccl' (one GPU per rank), or pass "
            f"{name} a group of one of those."
        )
    return group


# --- collectives shared by the spreads ------------------------------------------------------------


def comm_device(group, device: torch.device) -> torch.device:
    """Where ``group``'s collectives take their tensors: CUDA tensors stay put under nccl, gloo takes CPU
    ones, and nccl takes the current CUDA device's for CPU tensors."""
    backend = str(_dist().get_backend(group))
    if device.type == "cuda" and "nccl" in backend:
        return device
    if "gloo" in backend:
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())  # nccl only: its collectives need CUDA tensors


def fingerprint(tensors: Sequence[torch.Tensor]) -> list[int]:
    """Two exact integer sums of the tensors' bits (plain and position-weighted, wrapping): equal on ranks
    that hold equal numbers, and all but surely different where they do not.

    >>> fingerprint([torch.ones(2)]) == fingerprint([torch.ones(2, dtype=torch.float32)])
    True
    """
    parts = [torch.zeros(0, dtype=torch.float64)]
    for t in tensors:
        t = t.detach()
        if t.is_complex():
            t = torch.view_as_real(t.resolve_conj())
        parts.append(t.reshape(-1).to(device="cpu", dtype=torch.float64))
    bits = torch.cat(parts).view(torch.int64)
    weights = torch.arange(1, bits.numel() + 1, dtype=torch.int64)
    return [int(bits.sum()), int((bits * weights).sum())]


def agree(group, comm: torch.device, shared: Sequence[int], local: Sequence[int], name: str) -> list[list[int]]:
    """Every rank's ``local`` integers, after an all-gather that checks every rank sent the same ``shared``
    ones (structure and a parameter fingerprint): a rank that differs is refused on every rank alike, before
    a collective of mismatched sizes could abort the process."""
    dist = _dist()
    head = torch.tensor([*shared, *local], dtype=torch.int64, device=comm)
    heads = [torch.empty_like(head) for _ in range(dist.get_world_size(group))]
    dist.all_gather(heads, head, group=group)
    heads = [h.cpu() for h in heads]
    n = len(shared)
    for r, h in enumerate(heads):
        if not torch.equal(h[:n], heads[0][:n]):
            raise UnsupportedOperationError(
                f"{name}: rank {r} ran a step with other circuits or parameters than rank 0 (structure and "
                f"parameter fingerprint {h[:n].tolist()} against {heads[0][:n].tolist()}). Every rank must run the "
                "same circuits with the same parameters (a replicated model: same seed, same inputs); for "
                f"different data per rank use DistributedDataParallel and leave {name} off."
            )
    return [h[n:].tolist() for h in heads]


def all_reduce_sum(tensors: Sequence[torch.Tensor], group, comm: torch.device) -> list[torch.Tensor]:
    """The tensors summed over the ranks of ``group``, on every rank (each on its own device and dtype):
    one all-reduce per dtype, complex tensors as pairs of reals."""
    out: list = [None] * len(tensors)
    by_dtype: dict = {}
    for k, t in enumerate(tensors):
        by_dtype.setdefault(t.dtype, []).append(k)
    for dtype, ks in by_dtype.items():
        flat = [
            (torch.view_as_real(tensors[k].resolve_conj()) if dtype.is_complex else tensors[k]).reshape(-1)
            for k in ks
        ]
        buf = torch.cat(flat).to(comm).contiguous()
        _dist().all_reduce(buf, op=_dist().ReduceOp.SUM, group=group)
        start = 0
        for k in ks:
            t = tensors[k]
            n = t.numel() * (2 if dtype.is_complex else 1)
            part = buf[start : start + n].to(t.device)
            start += n
            out[k] = (torch.view_as_complex(part.reshape(*t.shape, 2)) if dtype.is_complex else part).reshape(t.shape)
    return out


# --- which rank runs which class ----------------------------------------------------------------


def _runs(c, params: torch.Tensor) -> int:
    """How many rows class ``c`` simulates: its distinct parameter rows (``shared.run_distinct``), or every
    row when it carries a broadcast axis."""
    rows = params.shape[0] * len(c.terms)
    if c.structure.batch_size is not None:
        return rows * c.structure.batch_size
    cols = params[:, c.table.to(params.device)].reshape(rows, -1)
    if cols.shape[1] == 0:
        return 1
    return int(torch.unique(cols.detach(), dim=0).shape[0])


def class_costs(classes: Sequence, params: torch.Tensor) -> list[int]:
    """An integer cost per class: gates x amplitudes x simulated rows (integers, so every rank agrees)."""
    return [len(c.structure.slots) * (1 << min(c.width, COST_MAX_WIRES)) * _runs(c, params) for c in classes]


def assign(costs: Sequence[int], world: int) -> list[int]:
    """The rank of each class: costliest first, each to the least loaded rank (ties: lower index, lower rank).

    >>> assign([5, 3, 3, 1], 2)
    [0, 1, 1, 0]
    """
    owner = [0] * len(costs)
    load = [0] * world
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        r = min(range(world), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += costs[i]
    return owner


# --- the spread step ----------------------------------------------------------------------------


RunClass = Callable[[object, torch.Tensor], torch.Tensor]
"""``run(c, params)``: class ``c``'s ``[rows, members, B']`` values from the ``[rows, P(, B)]`` parameters."""


class _Layout:
    """Who runs what, each class's shape in the result, and the collectives of one step."""

    def __init__(self, group, classes: Sequence, params: torch.Tensor):
        dist = _dist()
        self.group, self.classes = group, list(classes)
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.owner = assign(class_costs(self.classes, params), self.world)
        self.mine = [i for i, r in enumerate(self.owner) if r == self.rank]
        rows = params.shape[0]
        self.shapes = [(rows, len(c.terms), c.structure.batch_size or 1) for c in self.classes]
        self.batch = max(s[2] for s in self.shapes)
        self.offsets = [0]
        for s in self.shapes:
            self.offsets.append(self.offsets[-1] + s[1])
        self.dtype, self.device = params.dtype, params.device
        self.comm = comm_device(group, self.device)

    def run_local(self, run: RunClass, params: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for i in self.mine:
            part = run(self.classes[i], params)
            if tuple(part.shape) != self.shapes[i]:
                raise RuntimeError(f"cone class {i} gave values shaped {tuple(part.shape)}, not {self.shapes[i]}")
            out.append(part)
        return out

    def gather(self, local: Sequence[torch.Tensor], params: torch.Tensor) -> torch.Tensor:
        """``[rows, T, B]`` values of every class (class order), the same on every rank."""
        dist = _dist()
        size = sum(self.shapes[i][0] * self.shapes[i][1] * self.shapes[i][2] for i in self.mine)
        structure = [len(self.classes), self.offsets[-1], *params.shape[:1], self.batch]
        sizes = agree(self.group, self.comm, structure + fingerprint([params]), [size], "spread_classes")
        longest = max(int(h[0]) for h in sizes)
        payload = torch.zeros(longest, dtype=torch.float64, device=self.comm)
        if local:
            flat = torch.cat([p.detach().reshape(-1) for p in local]).to(device=self.comm, dtype=torch.float64)
            payload[: flat.numel()] = flat
        received = [torch.empty_like(payload) for _ in range(self.world)]
        dist.all_gather(received, payload, group=self.group)
        start = [0] * self.world
        parts = []
        for i, (r, shape) in enumerate(zip(self.owner, self.shapes)):
            n = shape[0] * shape[1] * shape[2]
            part = received[r][start[r] : start[r] + n].reshape(shape)
            start[r] += n
            parts.append(part.expand(shape[0], shape[1], self.batch))
        return torch.cat(parts, 1).to(device=self.device, dtype=self.dtype)

    def all_reduce(self, grad: torch.Tensor) -> torch.Tensor:
        return all_reduce_sum([grad], self.group, self.comm)[0]


class _Spread(torch.autograd.Function):
    """Local classes in, every class's values out; backward: local VJPs summed over the ranks."""

    @staticmethod
    def forward(ctx, params, layout: _Layout, run: RunClass):
        ctx.layout = layout
        ctx.leaf = params.detach().requires_grad_(True)
        with torch.enable_grad():  # the local classes' graph, on a leaf of its own (see the module note)
            ctx.local = layout.run_local(run, ctx.leaf)
        return layout.gather(ctx.local, params)

    @staticmethod
    def backward(ctx, dy):
        layout = ctx.layout
        if torch.is_grad_enabled():
            raise GradientError(
                "spread_classes differentiates once: a second derivative (create_graph=True, Hessians) of cone "
                "classes spread over ranks is not supported. Use a device with spread_classes=False for it."
            )
        pairs = []
        for i, out in zip(layout.mine, ctx.local):
            if out.requires_grad:
                lo, hi = layout.offsets[i], layout.offsets[i + 1]
                cot = dy[:, lo:hi]
                if out.shape[2] != cot.shape[2]:  # the class has no broadcast axis: its values were expanded
                    cot = cot.sum(2, keepdim=True)
                pairs.append((out, cot))
        grad = None
        if pairs:
            # retain_graph: a Jacobian is one backward per output element through the same forward
            (grad,) = torch.autograd.grad(
                [p[0] for p in pairs], [ctx.leaf], [p[1] for p in pairs], retain_graph=True, allow_unused=True
            )
        if grad is None:
            grad = torch.zeros_like(ctx.leaf)
        return layout.all_reduce(grad), None, None


def spread_terms(group, classes: Sequence, run: RunClass, params: torch.Tensor) -> torch.Tensor:
    """``[rows, T, B']`` values of every class's members (classes in order), each class run on one rank of
    ``group``; differentiable in ``params`` (gradients summed over the ranks)."""
    layout = _Layout(group, classes, params)
    if torch.is_grad_enabled() and params.requires_grad:
        return _Spread.apply(params, layout, run)
    return layout.gather(layout.run_local(run, params), params)


__all__ = ["spread_terms", "spread_group", "check_spread_option", "check_spread_options", "assign", "class_costs", "comm_device", "fingerprint",
           "agree", "all_reduce_sum"]

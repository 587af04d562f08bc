"""Programs that contract networks through a backend: the state of a structure (StateProgram) and closed\n<psi|O|psi> light-cone networks per observable term (ClosedProgram)."""

from __future__ import annotations


import torch
from pennylane.measurements import ExpectationMP, ProbabilityMP, VarianceMP

from .....errors import UnsupportedOperationError
from ....._variant import Variant
from ...._constants import literal
from ..._options import SimOptions
from ..._structure import TapeStructure
from ..._values import _expand_lead
from ...backends import get_backend
from ...readout.measure import StateReader, measurement_function
from .network import BATCH, Network, closed_network, diagonal_slots, ket_network
from .plan import ContractionPlan, cheaper_apart, plan_networks
from .slice_spread import contract_spread
from .together import together


class _Contraction:
    def __init__(self, network: Network, opts: SimOptions, what: str, plan: ContractionPlan | None = None):
        self.network = network
        if plan is None:
            plan = plan_networks([network], opts.optimizer, opts.plan_time, vary=BATCH)[0]
        self.plan = plan
        itemsize = opts.dtype.itemsize
        self.plan.check_memory(itemsize, opts.max_memory, what)
        self.backend = get_backend(opts.backend, opts.device)
        self.max_memory = opts.max_memory
        self.spread_slices = opts.spread_slices
        self.keep = True  # whether the backward may keep the forward's intermediates (ClosedProgram.admit)

    def contract(self, operands) -> torch.Tensor:
        if self.spread_slices is not False:  # the slices of sliced plans over torch.distributed ranks
            return contract_spread(self.spread_slices, self.plan, operands, self.backend, self.max_memory)
        return self.backend.contract(self.plan, operands, max_memory=self.max_memory, keep=self.keep)


class StateProgram:
    """Small circuits: contract the state once, read every measurement from it."""

    def __init__(self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape=None):
        network = ket_network(structure, stacked, stack_size, diagonal_slots(structure, tape))
        self.contraction = _Contraction(network, opts, "the circuit's state")

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(range(len(structure.slots)))
        c = self.contraction
        psi = c.contract([values.operand(o) for o in c.network.operands])
        psi = _expand_lead(psi, c.network.lead, lead_shape)
        reader = StateReader(psi, len(lead_shape), structure.sim_wires)
        return [reader.measure(mp) for mp in variant.tape.measurements]


class ClosedProgram:
    """Wide circuits: one closed network per observable term, each over its own light cone.

    ``only``: indices of the measurements this program measures (``run`` returns those only); None: all.
    ``networks``: networks of this structure, stack and tape already built, by term spec (an engine
    choice's, ``choice.network_cost``): taken instead of building them again.
    """

    def __init__(
        self, structure: TapeStructure, stacked: frozenset, stack_size: int, opts: SimOptions, tape, only=None, networks=None
    ):
        self.structure, self.stacked, self.stack_size, self.opts = structure, stacked, stack_size, opts
        self.only = None if only is None else frozenset(only)
        self.diagonal = diagonal_slots(structure, tape)  # gates that enter as hyperedges
        self._built = dict(networks or {})  # term spec -> its network (a split sentence's words asked twice)
        self._terms: dict = {}
        self._joint: dict = {}  # the words of a sentence -> their Together (None: one by one)
        self._last_sentence = None  # (the Pauli sentence last measured, its spec, words and word specs)
        # plan every term now, together (one planning budget), so the memory guard speaks before any work
        measured = [mp for m, mp in enumerate(tape.measurements) if self.only is None or m in self.only]
        specs = list(dict.fromkeys(spec for mp in measured for spec in _closed_terms(mp, structure)))
        self._split = {s for s in specs if s[0] == "paulisum" and self._cheaper_by_word(s)}
        specs = list(dict.fromkeys(s for mp in measured for s in _closed_terms(mp, structure, self._split)))
        nets = [self._network(spec) for spec in specs]
        plans = plan_networks(nets, opts.optimizer, opts.plan_time, vary=BATCH)
        for spec, net, plan in zip(specs, nets, plans):
            self._contraction(spec, net, plan)
        self._built = {}  # kept networks live on in the contractions; the judged others are let go

    def admit(self, budget) -> None:
        """Let each term's contraction keep its intermediates for the backward while they fit ``budget`` (a
        ``tree_grad.KeptBudget`` shared by one step's networks); the others recompute theirs."""
        itemsize = self.opts.dtype.itemsize
        for c in self._terms.values():
            c.keep = budget.admit(c.plan, itemsize)

    def _cheaper_by_word(self, spec) -> bool:
        """Whether a sentence's words, each over its own light cone, cost less than the one united network."""
        words = [("pauli", tuple(w for w, l in zip(spec[1], s) if l != "I"), s.replace("I", "")) for s in spec[2]]
        return cheaper_apart(self._network(spec), lambda: [self._network(w) for w in words], self.opts.optimizer)

    def _network(self, spec) -> Network:
        net = self._built.get(spec)
        if net is None:
            cap, wires, word = spec[:3]
            coeffs = spec[3] if len(spec) > 3 else ()
            net = closed_network(self.structure, self.stacked, self.stack_size, cap, wires, word, coeffs, self.diagonal)
            self._built[spec] = net
        return net

    def largest_intermediate(self, mp) -> int:
        """The largest intermediate (elements) of the networks that measure ``mp``, split sentences by word."""
        specs = set(_closed_terms(mp, self.structure, self._split))
        return max((c.plan.largest_intermediate for spec, c in self._terms.items() if spec in specs), default=0)

    def _contraction(self, spec, net: Network | None = None, plan: ContractionPlan | None = None) -> _Contraction:
        c = self._terms.get(spec)
        if c is None:
            cap, wires, word = spec[:3]
            net = self._network(spec) if net is None else net
            # (the stack: variants of one structure, such as a parameter-shift step's shifted circuits, are the
            # network's leading rows, which the user never asked for as a batch)
            rows = f" over {self.stack_size} stacked parameter sets (a parameter-shift step's shifted circuits " \
                "among them: diff_method='adjoint' runs one)" if self.stack_size > 1 else ""
            c = _Contraction(net, self.opts, f"<psi|{word or cap}|psi> on wires {list(wires)}{rows}", plan)
            self._terms[spec] = c
        return c

    def _value(self, values, spec, lead_shape, matrix=None) -> torch.Tensor:
        c = self._contraction(spec)
        joint = self._together(values, [spec])  # None for what ``Together`` does not take (probabilities, a matrix)
        if joint is not None:
            return _expand_lead(joint.contract(values)[0], c.network.lead, lead_shape)
        ops = [values.operand(o, matrix) for o in c.network.operands]
        return _expand_lead(c.contract(ops), c.network.lead, lead_shape)

    def _pauli_expval(self, values, ps, lead_shape) -> torch.Tensor:
        pos = {w: i for i, w in enumerate(self.structure.sim_wires)}
        if self._last_sentence is not None and self._last_sentence[0] is ps:  # a step measures the same one
            spec, words, specs = self._last_sentence[1:]
        else:
            spec = _sentence_spec(ps, pos)
            words = [word for word in ps if word]
            specs = [("pauli", tuple(pos[w] for w in word.keys()), "".join(word.values())) for word in words]
            if not any(isinstance(c, torch.Tensor) for c in ps.values()):  # (a tensor's grad flag may change)
                self._last_sentence = (ps, spec, words, specs)
        if spec is not None and spec not in self._split:  # several words: one network (the sentence as an MPO)
            return self._value(values, spec, lead_shape).real + _sentence_constant(ps)
        together = self._together(values, specs)
        if together is not None:
            return self._together_expval(values, together, ps, words, lead_shape)
        total = None
        for word, coeff in ps.items():
            if not word:
                value = torch.ones(lead_shape, dtype=values.real_dtype, device=values.device)
            else:
                wires = tuple(pos[w] for w in word.keys())
                value = self._value(values, ("pauli", wires, "".join(word.values())), lead_shape).real
            coeff = coeff.real if isinstance(coeff, complex) else coeff
            term = value * coeff
            total = term if total is None else total + term
        if total is None:
            total = torch.zeros(lead_shape, dtype=values.real_dtype, device=values.device)
        return total

    def _together(self, values, specs):
        """The ``Together`` of the words' networks (built at their first run), or None: also where the step's budget
        did not admit some network's intermediates (``admit``), since ``ManyTrees`` keeps them all for the
        backward where ``contract_tree`` recomputes them."""
        if not all(self._contraction(spec).keep for spec in specs):
            return None
        key = tuple(specs)
        if key not in self._joint:
            self._joint[key] = together([self._contraction(spec) for spec in specs], values)
        return self._joint[key]

    def _together_expval(self, values, joint, ps, words, lead_shape) -> torch.Tensor:
        """A sentence's value from its words' networks contracted together."""
        real = lambda c: c.real if isinstance(c, complex) else c  # noqa: E731
        coeffs = [real(ps[word]) for word in words]
        if any(isinstance(c, torch.Tensor) for c in coeffs):
            weights = torch.stack([torch.as_tensor(c, dtype=values.real_dtype, device=values.device) for c in coeffs])
        else:
            weights = literal(tuple(coeffs), values.device, values.real_dtype)  # made once per device, not per call
        total = (joint.contract(values).real * weights).sum() + _sentence_constant(ps)
        return total.expand(lead_shape) if lead_shape else total

    def _matrix_expval(self, values, matrix, wires, lead_shape) -> torch.Tensor:
        pos = tuple(self.structure.sim_wires.index(w) for w in wires)
        return self._value(values, ("matrix", pos, ""), lead_shape, matrix).real

    def _expval(self, values, obs, lead_shape) -> torch.Tensor:
        if obs.pauli_rep is not None:
            return self._pauli_expval(values, obs.pauli_rep, lead_shape)
        return self._matrix_expval(values, obs.matrix(wire_order=obs.wires), obs.wires, lead_shape)

    def run(self, values, variant: Variant, structure: TapeStructure, lead_shape) -> list[torch.Tensor]:
        values.prefetch(range(len(structure.slots)))  # one matrix builder per gate kind, not per gate
        out = []
        for m, mp in enumerate(variant.tape.measurements):
            if self.only is not None and m not in self.only:
                continue
            if isinstance(mp, ExpectationMP):
                out.append(self._expval(values, mp.obs, lead_shape))
            elif isinstance(mp, VarianceMP):
                obs = mp.obs
                mean = self._expval(values, obs, lead_shape)
                if obs.pauli_rep is not None:
                    square = self._pauli_expval(values, obs.pauli_rep @ obs.pauli_rep, lead_shape)
                else:
                    m = torch.as_tensor(obs.matrix(wire_order=obs.wires))
                    square = self._matrix_expval(values, m @ m, obs.wires, lead_shape)
                out.append(square - mean**2)
            elif isinstance(mp, ProbabilityMP) and mp.obs is None:
                pos = tuple(structure.sim_wires.index(w) for w in mp.wires)
                p = self._value(values, ("probs", pos, ""), lead_shape).real
                out.append(p.reshape(*lead_shape, 2 ** len(pos)))
            else:
                raise UnsupportedOperationError(
                    f"{type(mp).__name__} on a {len(structure.sim_wires)}-wire circuit would need the full "
                    "state vector, which wide circuits never build; measure expval, var or probs of a few "
                    "wires instead."
                )
        return out


PAULI_SUM_MIN_WORDS = 2
"""Pauli sentences with at least this many non-identity words are measured by one network with a term
index over all of them (their light cones united) instead of one network per word."""


def _sentence_constant(ps):
    """The identity word's coefficient (a tensor where it is one: a trainable coefficient keeps its gradient)."""
    real = lambda c: c.real if isinstance(c, complex) or (isinstance(c, torch.Tensor) and c.is_complex()) else c  # noqa: E731
    return sum((real(c) for w, c in ps.items() if not w), 0.0)


def _sentence_spec(ps, pos):
    """("paulisum", wires, words, coefficients) for a sentence of several words, else None."""
    words = [(w, c) for w, c in ps.items() if w]
    if len(words) < PAULI_SUM_MIN_WORDS or any(isinstance(c, torch.Tensor) and c.requires_grad for _, c in words):
        return None  # (trainable coefficients: the words one by one, each weighted by its coefficient tensor)
    wires = tuple(sorted({pos[w] for word, _ in words for w in word.keys()}))
    strings = []
    for word, _ in words:
        letters = {pos[w]: l for w, l in word.items()}
        strings.append("".join(letters.get(w, "I") for w in wires))
    real = lambda c: c.real if isinstance(c, complex) else c  # noqa: E731
    return ("paulisum", wires, tuple(strings), tuple(float(real(c)) for _, c in words))


def _closed_terms(mp, structure: TapeStructure, split=frozenset()):
    pos = {w: i for i, w in enumerate(structure.sim_wires)}
    if isinstance(mp, (ExpectationMP, VarianceMP)):
        ps = mp.obs.pauli_rep
        sentences = [ps] if ps is None or isinstance(mp, ExpectationMP) else [ps, ps @ ps]
        for s in sentences:
            if s is None:
                yield ("matrix", tuple(pos[w] for w in mp.obs.wires), "")
                continue
            spec = _sentence_spec(s, pos)
            if spec is not None and spec not in split:
                yield spec
                continue
            for word in s:
                if word:
                    yield ("pauli", tuple(pos[w] for w in word.keys()), "".join(word.values()))
    elif isinstance(mp, ProbabilityMP) and mp.obs is None:
        yield ("probs", tuple(pos[w] for w in mp.wires), "")
    else:
        measurement_function(mp)  # a clear error for unsupported kinds
        raise UnsupportedOperationError(
            f"{type(mp).__name__} on a {len(structure.sim_wires)}-wire circuit would need the full state "
            "vector, which wide circuits never build; measure expval, var or probs of a few wires instead."
        )

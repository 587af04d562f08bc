"""The whole-circuit alternative to light cones: measurements a closed network of the whole circuit
measures (ConeProgram's ``closed`` part).

Measurements that are not Pauli sentences always go there. A Pauli sentence with terms too wide for a
state vector goes there too when the network of the whole circuit (its sentence as one matrix-product
operator, light cones united) has small intermediates and costs less than its words apart: a CNOT ladder's
nested cones share all their work there (W3b: 0.28 s a step, against 12 s as 64 cone networks); a QAOA
Hamiltonian's do not (Q100 at p=3: every path touches some 50 indices), and its terms run by cone classes.
"""

from __future__ import annotations

from dataclasses import replace

from .....errors import ContractionTooLargeError, UnsupportedOperationError
from ..network.network import BATCH, closed_network, diagonal_slots
from ..network.pathfind import PathSettings, priced_paths
from ..network.plan import cheaper_apart
from ..network.problem import Problem, _numel
from ..network.programs import ClosedProgram, _closed_terms

WHOLE_NETWORK_MAX_ELEMENTS = 1 << 22
"""A measurement with terms too wide for a state vector is contracted as one closed network of the whole
circuit (the pre-cone path) when that network's largest intermediate stays within this many elements
(W3b, a 64-wire CNOT ladder with 64 Z terms: 0.28 s a step, against 12 s as 64 cone networks); else its
terms run by cone classes (Q100 at p=3: the whole network would touch 52 indices)."""


def whole_candidates(
    per_measurement, widths, state_max_wires, structure, stacked, stack_size, opts, tape, words=None, built=None
) -> list:
    """The Pauli-sentence measurements a closed network of the whole circuit may measure: those with terms
    too wide for a state vector (wider than ``state_max_wires``) that ``_refused`` does not settle at once.
    ``words``: the measured words (position -> letter) the term indices of ``per_measurement`` and
    ``widths`` (each word's light-cone width) refer to; the widest are judged first. With none (and no
    measurement that is not a Pauli sentence) nothing is built: a decision that depends on the circuit's
    structure alone (the light-cone program keeps it on disk, ``stored.py``). ``built``: a dict that receives
    the networks judged, by term spec (``closed_program`` takes them instead of building them again)."""
    found = [m for m, terms in per_measurement.items() if any(widths[t] > state_max_wires for t in terms)]
    width = {tuple(sorted(words[t].items())): widths[t] for ts in per_measurement.values() for t in ts} if words else {}
    return [m for m in found if not _refused(structure, stacked, stack_size, opts, tape, m, width, built)]


def closed_program(plain, candidates, structure, stacked, stack_size, opts, tape, built=None):
    """The ClosedProgram of the measurements a closed network of the whole circuit measures (None if
    none): those that are not Pauli sentences (``plain``), and those of ``candidates`` (see ``whole_candidates``)
    whose whole-circuit network has small intermediates (their sentence as one matrix-product operator,
    light cones united: a CNOT ladder's nested cones share all their work there). One planning budget for
    all. ``built``: networks already built, by term spec (``whole_candidates``'s)."""
    if not plain and not candidates:
        return None
    # judged by its largest intermediate, mostly to be refused (a QAOA Hamiltonian's 150 word networks): no
    # hyper tier for it, which the cone classes get (60 s of planning that Q100 p=4 threw away), and no
    # rescue search for a path that would not fit (a hopeless network, such as Q100 p=3's whole circuit
    # where every path touches some 50 indices, is refused after the shared budget, not searched 10 s more)
    judged = opts
    if candidates:
        judged = replace(opts, optimizer=replace(PathSettings.of(opts.optimizer), hyper=False, rescue=False))
    try:
        program = ClosedProgram(structure, stacked, stack_size, judged, tape, only=plain + candidates, networks=built)
    except ContractionTooLargeError:
        if not candidates:
            raise
        # some united light cones are too wide (a QAOA Hamiltonian): those measurements go by classes
        program = ClosedProgram(structure, stacked, stack_size, opts, tape, only=plain, networks=built) if plain else None
        candidates = []
    accepted = [m for m in candidates if _small(program, tape.measurements[m])]
    if not plain and not accepted:
        return None
    program.only = frozenset(plain + accepted)
    return program


def _refused(structure, stacked, stack_size, opts, tape, m: int, width=None, built=None) -> bool:
    """Whether measurement ``m`` is sure to be refused (``_small``) before its program is built: one of its
    words' networks and its united network (split into words or not, something is too wide) have an
    intermediate above ``WHOLE_NETWORK_MAX_ELEMENTS`` along their greedy (or stored) paths. Building and
    planning every word's network of a QAOA Hamiltonian to refuse it took 8 s of L8p3's first step and
    25 s of Q100 p=4's (load 2-3); here its words are judged widest light cone first (``width``: word key
    -> light-cone width), the first too wide settling it (with the united network). Judging only the 8
    widest missed Q100 p=4's (its widest cones are not its widest networks). Measurements this cannot
    settle go to the program as before (their word networks' greedy paths are remembered for it)."""
    try:
        specs = list(dict.fromkeys(_closed_terms(tape.measurements[m], structure)))
    except UnsupportedOperationError:
        return False
    diagonal = diagonal_slots(structure, tape)
    store = PathSettings.of(opts.optimizer).store
    width = width or {}

    built = {} if built is None else built

    def network(*spec):
        net = built.get(spec)
        if net is None:
            coeffs = spec[3] if len(spec) > 3 else ()
            net = built[spec] = closed_network(structure, stacked, stack_size, *spec[:3], coeffs, diagonal)
        return net

    def too_wide(*spec):
        net = network(*spec)
        (found,) = priced_paths([Problem.of(net.inputs, net.output, net.sizes, net.positions, BATCH)], store)
        largest = max(found.largest, _numel(net.output, net.sizes), *(_numel(ix, net.sizes) for ix in net.inputs))
        return largest > WHOLE_NETWORK_MAX_ELEMENTS

    for spec in specs:
        if spec[0] == "paulisum":
            wires, strings = spec[1], spec[2]
            words = [("pauli", tuple(w for w, l in zip(wires, s) if l != "I"), s.replace("I", "")) for s in strings]
            words.sort(key=lambda word: -width.get(tuple(sorted(zip(word[1], word[2]))), 0))
            if any(too_wide(*word) for word in words) and too_wide(*spec):
                return True
            # measured word by word, the whole circuit's networks are the words' light cones one by one,
            # which the cone classes run for less (isomorphic cones once, narrow ones as state vectors): an
            # 8x8 lattice QAOA p=3 whose word paths a long search brought under the size bound ran 100x
            # slower that way (16 s a step against 0.16 s) after planning all 98 words in vain
            if cheaper_apart(network(*spec), lambda: [network(*word) for word in words], opts.optimizer):
                return True
        elif spec[0] == "pauli" and too_wide(*spec):
            return True
    return False


def _small(program: ClosedProgram, mp) -> bool:
    return program.largest_intermediate(mp) <= WHOLE_NETWORK_MAX_ELEMENTS


__all__ = ["whole_candidates", "closed_program", "WHOLE_NETWORK_MAX_ELEMENTS"]

"""kahypar partitions for the hyper tier's step 4, with fewer initial partitioning runs than cotengra's profiles.

Step 4 of ``hyper.improve`` builds partitioned trees through cotengra's ``HyperOptimizer``; each trial bisects
the network recursively, ~100 kahypar calls on an 8x8 lattice QAOA p=4 cone of ~500 tensors. cotengra's kahypar
profiles (``*_sea20.ini``) start each call with 20 runs of kahypar's initial-partitioning pool: on graphs this
small (below kahypar's coarsening limit) that pool is most of the call (cProfile of 12 trials: 75% of the time in
``kahypar.partition``; turning the flow refinement off saved nothing). ``KAHYPAR_INITIAL_RUNS`` (4) runs make a
trial ~2.3x cheaper in CPU time (L8p4's costliest class, 64 trials a seed: 110 -> 50 s for seed 0, 101 -> 45 s
for seed 1); the trees are within the searches' run-to-run noise of those of 20 runs (docs/NETWORKS.md's
"Cold planning" section).

Registered as the cotengra method ``METHOD`` (the sampled parameters are kahypar's own: ``mode``, ``objective``
and the rest), on the profiles written once, by content, under qhybrid's cache directory (else a temporary
one): kahypar reads its settings only from a file.

>>> register()
'qhybrid-kahypar'
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

KAHYPAR_INITIAL_RUNS = 4
"""Runs of kahypar's initial-partitioning pool per call (cotengra's profiles: 20, which this value restores). With 4,
L8p4's trees came to 2^34.16-2^34.38 forward flops a step in three cold plannings, against 2^34.24 with 20
(docs/NETWORKS.md); fewer runs were not measured."""

METHOD = "qhybrid-kahypar"
"""The cotengra ``HyperOptimizer`` method name of these partitions."""

_PROFILES = ("cut_kKaHyPar_sea20.ini", "cut_rKaHyPar_sea20.ini", "km1_kKaHyPar_sea20.ini", "km1_rKaHyPar_sea20.ini")


def _profile_text(name: str, runs: int) -> str:
    """cotengra's profile ``name`` with ``runs`` initial partitioning runs."""
    from cotengra.pathfinders.path_kahypar import get_kahypar_profile_dir

    text = Path(get_kahypar_profile_dir(), name).read_text()
    lines = [f"i-runs={runs}" if line.startswith("i-runs=") else line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=None)
def profile_directory(runs: int) -> str:
    """A directory holding the four profiles (named as cotengra's) with ``runs`` initial partitioning runs,
    written once per content: under
    ``$QHYBRID_CACHE_DIR`` (or ``~/.cache/qhybrid``) in ``kahypar/<digest>``, else in a new temporary directory."""
    from .path_cache import default_directory, write_atomically

    texts = {name: _profile_text(name, runs) for name in _PROFILES}
    digest = hashlib.sha256(repr(sorted(texts.items())).encode()).hexdigest()[:16]
    for root in (default_directory().parent / "kahypar" / digest, None):
        try:
            directory = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="qhybrid-kahypar-"))
            directory.mkdir(parents=True, exist_ok=True)
            for name, text in texts.items():
                target = directory / name
                if not target.is_file() or target.read_text() != text:
                    write_atomically(target, text.encode())
            return str(directory)
        except OSError:
            continue
    raise OSError("no directory could hold the kahypar profiles (qhybrid's cache directory and the temporary one)")


def _membership(inputs, output, size_dict, mode="direct", objective="cut", **kwargs):
    """cotengra's kahypar bisection with this module's profile for ``mode`` and ``objective``."""
    from cotengra.pathfinders.path_kahypar import kahypar_subgraph_find_membership

    profile = os.path.join(profile_directory(KAHYPAR_INITIAL_RUNS), f"{objective}_{'k' if mode == 'direct' else 'r'}KaHyPar_sea20.ini")
    return kahypar_subgraph_find_membership(inputs, output, size_dict, mode=mode, objective=objective, profile=profile, **kwargs)


@functools.lru_cache(maxsize=None)
def register() -> str:
    """Register ``METHOD`` with cotengra (once per process; the same search space as its ``kahypar``) and return
    its name."""
    from cotengra.core import PartitionTreeBuilder
    from cotengra.hyperoptimizers.hyper import get_hyper_space, register_hyper_function

    space = get_hyper_space()["kahypar"]
    register_hyper_function(name=METHOD, ssa_func=PartitionTreeBuilder(_membership).trial_fn, space=dict(space))
    return METHOD


__all__ = ["register", "profile_directory", "METHOD", "KAHYPAR_INITIAL_RUNS"]

"""A script run in a fresh Python process (what a second process reads from the stores on disk): its last
stdout line, parsed as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_json(script: str, *args: str, hash_seed: str = "random", **env: str):
    """Run ``script`` with ``args`` (``sys.argv[1:]``) from the project root in a new interpreter, the project on
    ``PYTHONPATH`` (with ``tests/``, where the shared test helpers live) and ``PYTHONHASHSEED=hash_seed`` (plus
    ``env``); return its last line of output as JSON."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    environ = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": hash_seed, **env}
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                         env=environ, cwd=ROOT, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])

"""Launch a worker script as the ranks of a gloo group and collect what each saved (the spread tests).

A worker script calls ``serve(work)`` as its main: it joins a gloo group of ``WORLD`` ranks through a file
store, runs ``work(rank)`` and saves its dict (or the traceback it raised) to ``OUT/rank{RANK}.pt``. The test
calls ``run_ranks(script, world, tmp)`` to start the ranks as processes and load their results.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable

import torch

WORKER_TIMEOUT_S = 240
"""Every rank together (imports, planning, every case): 10-40 s on 2 busy cores."""


def run_ranks(script: str | Path, world: int, tmp: Path) -> list[dict]:
    """What each of ``world`` gloo ranks running ``script`` saved; a failure or a rank's error fails the test
    with every rank's output."""
    import pytest

    import qhybrid

    root = Path(qhybrid.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("QHYBRID_CACHE_DIR", str(tmp / "cache"))
    env.setdefault("OMP_NUM_THREADS", "1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), str(world), str(tmp / "store"), str(tmp)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(world)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=WORKER_TIMEOUT_S)[0].decode(errors="replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        logs = [p.communicate()[0].decode(errors="replace") for p in procs]
        pytest.fail(f"the gloo ranks did not finish in {WORKER_TIMEOUT_S} s:\n" + "\n".join(logs))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    saved = []
    for r, p in enumerate(procs):
        out = tmp / f"rank{r}.pt"
        assert p.returncode == 0 and out.exists(), f"rank {r} failed (exit {p.returncode}):\n" + "\n".join(logs)
        result = torch.load(out, weights_only=False)
        assert "error" not in result, f"rank {r} raised:\n{result.get('error')}"
        saved.append(result)
    return saved


def serve(work: Callable[[int], dict]) -> None:
    """A worker's main: ``RANK WORLD STORE OUT`` from the command line, ``work(rank)`` saved to OUT."""
    import torch.distributed as dist

    rank, world, store, out_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60)
    )
    try:
        result = work(rank)
    except Exception:  # noqa: BLE001 - handed to the test, which shows it
        result = {"error": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")

"""Contraction paths kept on disk, keyed by a network's structure, so a second process plans nothing.

A network's key is a hash of its index structure and extents only (indices relabelled in order of first
appearance, so two builds that number their indices differently share an entry); values never enter it.
The entry also holds that canonical structure itself, compared on reading: two structures whose keys
collided (or a file copied under another name) can never lend each other a path. An entry keeps the
path (tensor positions, independent of index numbering), whether it is final (planned within a budget,
or by the hyper tier), and the sliced indices (canonical labels, mapped back to the reader's numbering).

One small JSON file per network under the store's directory, written atomically (a temporary file then
``os.replace``). An entry that cannot be read, is not for this structure or whose path is not a valid
contraction of it is ignored (and overwritten by the next plan); a directory that cannot be written
only means paths are not kept.

>>> import tempfile
>>> store = PathStore(tempfile.mkdtemp())
>>> inputs, output, sizes = [(0, 1), (1, 2)], (0, 2), {0: 2, 1: 3, 2: 4}
>>> store.save(inputs, output, sizes, ((0, 1),), searched=True, sliced=(1,))
>>> store.load(inputs, output, sizes)
StoredPath(path=((0, 1),), searched=True, sliced=(1,))
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import NamedTuple, Sequence

CACHE_ENV = "QHYBRID_CACHE_DIR"
"""Environment variable naming qhybrid's cache directory (paths go in its ``paths`` folder)."""

FORMAT = 3
"""Entry format; entries of another format are ignored (2: the canonical structure and sliced indices kept;
3: the hyper tier ranks trees by flops and writes, ``problem.Found.cost``, so paths ranked by flops alone are
planned again)."""


class StoredPath(NamedTuple):
    """A path read from the store: linear path, whether final, sliced indices in the reader's numbering."""

    path: tuple[tuple[int, ...], ...]
    searched: bool
    sliced: tuple = ()


def default_directory() -> Path:
    """``$QHYBRID_CACHE_DIR/paths``, else ``$XDG_CACHE_HOME/qhybrid/paths``, else ``~/.cache/qhybrid/paths``."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser() / "paths"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "qhybrid" / "paths"


def canonical(inputs: Sequence[Sequence[int]], output: Sequence[int], sizes: dict) -> tuple[dict, dict]:
    """The network's structure with indices relabelled 0, 1, ... in order of first appearance (tensors in
    order, then the output), and that relabelling: equal for two numberings of one network, different for
    any two networks that differ in a tensor's indices (or their order), the output or an extent."""
    label: dict = {}
    for ix in (*inputs, output):
        for i in ix:
            label.setdefault(i, len(label))
    canon = {
        "inputs": [[label[i] for i in ix] for ix in inputs],
        "output": [label[i] for i in output],
        "sizes": [int(sizes[i]) for i in label],
    }
    return canon, label


def json_digest(plain) -> str:
    """SHA-256 (hex) of ``plain`` as compact JSON: the file name of a store's entry (paths, cones, schedules)."""
    return hashlib.sha256(json.dumps(plain, separators=(",", ":")).encode()).hexdigest()


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it and ``os.replace``: a reader sees the
    old entry or the new one, never a part (``OSError`` where the directory cannot be written)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:16]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def structure_key(inputs: Sequence[Sequence[int]], output: Sequence[int], sizes: dict) -> str:
    """A hash of the network's index structure and extents, independent of how indices are numbered."""
    return json_digest(canonical(inputs, output, sizes)[0])


def valid_path(path, n: int) -> bool:
    """Whether ``path`` (linear, opt_einsum style) contracts ``n`` tensors down to one."""
    if not isinstance(path, (list, tuple)):
        return False
    working = n
    for step in path:
        if not isinstance(step, (list, tuple)) or not step or not all(isinstance(p, int) for p in step):
            return False
        if len(set(step)) != len(step) or min(step) < 0 or max(step) >= working:
            return False
        working -= len(step) - 1
    return working == 1


class PathStore:
    """A directory of contraction paths, one file per network structure."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()

    def __repr__(self) -> str:
        return f"PathStore({str(self.directory)!r})"

    def _file(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, inputs, output, sizes, key: str | None = None) -> StoredPath | None:
        """The stored path, whether it is final and its sliced indices, or None (absent, unreadable, for
        another structure, not a valid contraction); ``key``: the structure key if already computed."""
        canon, label = canonical(inputs, output, sizes)
        key = key or json_digest(canon)
        try:
            entry = json.loads(self._file(key).read_text())
            if entry.get("format") != FORMAT or entry.get("structure") != key or entry.get("canonical") != canon:
                return None
            path = entry["path"]
            if not valid_path(path, len(inputs)):
                return None
            index = {c: i for i, c in label.items()}
            sliced = tuple(sorted(index[c] for c in entry.get("sliced", ())))
            summed = {i for ix in inputs for i in ix} - set(output)
            if len(set(sliced)) != len(sliced) or not summed.issuperset(sliced):
                # each slice is summed once, over an index the network sums: a name twice (one flipped bit of
                # [5, 7]) counted every slice twice, an output index broke the contraction
                return None
            return StoredPath(tuple(tuple(step) for step in path), bool(entry.get("searched", False)), sliced)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def save(self, inputs, output, sizes, path, searched: bool, key: str | None = None, sliced=()) -> None:
        """Write the entry atomically; an unwritable directory only means the path is not kept."""
        canon, label = canonical(inputs, output, sizes)
        key = key or json_digest(canon)
        entry = {
            "format": FORMAT, "structure": key, "canonical": canon, "searched": bool(searched),
            "path": [list(s) for s in path], "sliced": sorted(label[i] for i in sliced),
        }  # fmt: skip
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # dumps, not dump: json.dump encodes in pure Python (10x slower)
            write_atomically(self._file(key), json.dumps(entry, separators=(",", ":")).encode())
        except OSError:
            pass


__all__ = ["PathStore", "StoredPath", "default_directory", "structure_key", "canonical", "valid_path", "json_digest", "write_atomically", "CACHE_ENV"]

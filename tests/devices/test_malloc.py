"""``devices/_malloc.tune_malloc``: glibc's mmap and trim thresholds raised once, when a simulator device is made,
unless the process chose its own allocator settings or opted out."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qhybrid.devices import _malloc


class _FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return 1


@pytest.fixture
def fake(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(_malloc, "_glibc", lambda: libc)
    monkeypatch.setattr(_malloc, "_done", [])
    for k in (*_malloc._USER_SETTINGS, "QHYBRID_MALLOC_TUNING"):
        monkeypatch.delenv(k, raising=False)
    return libc


def test_raises_both_thresholds_once(fake):
    assert _malloc.tune_malloc() is True
    assert _malloc.tune_malloc() is True
    assert fake.calls == [(-3, _malloc.MMAP_THRESHOLD), (-1, _malloc.TRIM_THRESHOLD)]


@pytest.mark.parametrize("env", [("QHYBRID_MALLOC_TUNING", "0"), ("MALLOC_TRIM_THRESHOLD_", "1000"), ("LD_PRELOAD", "libjemalloc.so")])
def test_leaves_a_process_that_chose_its_own_settings_alone(fake, monkeypatch, env):
    monkeypatch.setenv(*env)
    assert _malloc.tune_malloc() is False
    assert fake.calls == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_device_tunes_glibc_in_a_fresh_process():
    code = (
        "import qhybrid; from qhybrid.devices import _malloc; assert _malloc._done == []; "
        "qhybrid.device('tensornet', wires=2); print(_malloc._done, _malloc._glibc() is not None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in __import__("os").environ.items() if k not in _malloc._USER_SETTINGS})
    done, is_glibc = out.stdout.split("]")
    assert done == "[True" if is_glibc.strip() == "True" else done == "[False"

"""Every Python block of README.md and docs/*.md runs as written, with its imports (Sybil's markdown parser).

The blocks of one page run in order in one namespace (a page may build an example over several blocks), one test
per page. A block that cannot run here (a GPU, several processes, minutes of work) is preceded by
``<!-- skip: next "the reason" -->``; each such block is reported as its own skipped test with that reason.
"""

from __future__ import annotations

from pathlib import Path
from unittest import SkipTest

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _examples(page: Path):
    return list(SYBIL.parse(page).examples())


def _skipped(page: Path) -> list[tuple[int, str]]:
    """(line, reason) of each block marked ``skip: next``."""
    out = []
    for example in _examples(page):
        parsed = example.parsed
        if isinstance(parsed, tuple) and len(parsed) == 2 and parsed[0] == "next":
            out.append((example.line, str(eval(parsed[1])) if parsed[1] else "skipped"))
    return out


def test_every_page_is_collected():
    names = [_name(p) for p in PAGES]
    assert "README.md" in names and "docs/MPS.md" in names and len(names) >= 10


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_blocks_run_as_written(page):
    for example in _examples(page):
        try:
            example.evaluate()
        except SkipTest:
            continue
        except Exception as exc:  # noqa: BLE001 - say which block, then show the block's own traceback
            raise AssertionError(f"{_name(page)}, the block at line {example.line}, failed: {exc!r}") from exc


SKIPPED = [(page, line, reason) for page in PAGES for line, reason in _skipped(page)]


@pytest.mark.parametrize("page, line, reason", SKIPPED, ids=[f"{_name(p)}:{line}" for p, line, _ in SKIPPED])
def test_marked_block_is_skipped_with_its_reason(page, line, reason):
    pytest.skip(f"{_name(page)}:{line}: {reason}")

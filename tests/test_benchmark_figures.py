"""BENCHMARKS.md's plots come from the committed result files: ``benchmarks.figures`` reads every family's file
and draws it (no timing), and every plot and result file BENCHMARKS.md names exists."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import figures

ROOT = Path(__file__).resolve().parents[1]


def test_every_family_is_drawn_from_its_result_file(tmp_path):
    for name, family in figures.FAMILIES.items():
        got = family(ROOT / "benchmarks" / "results")
        assert got is not None, f"{name}: its result file is missing"
        title, bars, failed = got
        assert bars and all(v is None or v > 0 for group in bars.values() for v in group.values())
        figures.draw(title, bars, failed, tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_benchmarks_page_names_files_that_exist():
    text = (ROOT / "BENCHMARKS.md").read_text()
    named = set(re.findall(r"benchmarks/(?:results|figures)/[\w.]+\.(?:json|md|png)", text))
    assert named and all((ROOT / path).exists() for path in named), [p for p in named if not (ROOT / p).exists()]

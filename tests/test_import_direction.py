"""The package's layering, read from the source: layers -> qnode -> interfaces -> gradients -> devices.

devices/ imports nothing from gradients/, interfaces/ or layers/; gradients/ nothing from interfaces/ or
layers/; interfaces/ nothing from layers/. Imports inside functions count too (a lazy import is still a
dependency)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "qhybrid"

FORBIDDEN = {
    "devices": ("gradients", "interfaces", "layers", "qnode"),
    "gradients": ("interfaces", "layers", "qnode"),
    "interfaces": ("layers",),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute qhybrid module) for every import of a qhybrid module in ``path``."""
    package = path.relative_to(ROOT.parent).with_suffix("").parts
    if package[-1] == "__init__":
        package = package[:-1]
    else:
        package = package[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ((node.module,) if node.module else ()))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [(node.lineno, n) for n in names if n.startswith("qhybrid")]
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_down_the_layers(layer):
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, target in _imports(path):
            if _layer(target) in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_checker_sees_relative_and_lazy_imports(tmp_path):
    """The reader resolves relative imports and finds imports inside functions (so the test can fail)."""
    src = ROOT / "devices" / "tensornet" / "_pl_derivatives.py"
    found = {t for _, t in _imports(src)}
    assert "qhybrid.devices._protocol" in found and "qhybrid.errors" in found
    fake = ROOT / "devices" / "_probe_for_test.py"
    fake.write_text("def f():\n    from ..gradients import jpc\n")
    try:
        assert ("qhybrid.gradients.jpc" in {t for _, t in _imports(fake)})
    finally:
        fake.unlink()


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    """One idea a module: a module past 400 lines holds more than one (split it along its ideas)."""
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"

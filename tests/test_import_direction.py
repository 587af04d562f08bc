"""The package's layering, read from the source: layers -> workflow -> interfaces -> gradients -> devices.

devices/ imports nothing from gradients/, interfaces/, workflow/ or layers/; gradients/ nothing from
interfaces/, workflow/ or layers/; interfaces/ nothing from workflow/ or layers/; workflow/ nothing from layers/; and no module imports, through any chain, a module that imports
it back (no circle, inside a package or across). Imports inside functions count too (a lazy import is
still a dependency)."""

import ast
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1] / "qhybrid"

FORBIDDEN = {
    "devices": ("gradients", "interfaces", "layers", "workflow"),
    "gradients": ("interfaces", "layers", "workflow"),
    "interfaces": ("layers", "workflow"),
    "workflow": ("layers",),
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


def _module_names(root: Path = ROOT) -> dict[str, Path]:
    names = {}
    for p in root.rglob("*.py"):
        parts = p.relative_to(root.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return names


def _module_edges(path: Path, modules: dict[str, Path], top: Path = ROOT.parent) -> set[str]:
    """The qhybrid modules ``path`` loads: ``from X import a`` loads ``X.a`` where that is a module, else ``X``
    (the parent packages Python runs first are not counted: they are no dependency of the importer's)."""
    package = path.relative_to(top).with_suffix("").parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ((node.module,) if node.module else ()))
            else:
                base = node.module or ""
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                if target in modules:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
    return out


def import_circles(root: Path = ROOT) -> list[list[str]]:
    """Every set of modules that import each other in a circle (strongly connected components, Tarjan)."""
    modules = _module_names(root)
    graph = {name: _module_edges(p, modules, root.parent) - {name} for name, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    """A module that imports another which imports it back (a base class in one, its subclasses chosen there
    too) runs half-initialised on import; register the parts, or move the choice to the caller."""
    circles = import_circles()
    assert not circles, "modules importing each other in a circle:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_sees_a_circle_inside_a_package(tmp_path):
    """A deliberately circular toy package (a base module choosing among its subclasses' modules) fails it.
    Written under ``tmp_path``: inside the package, the circle test running beside it would find it."""
    toy = tmp_path / "qhybrid" / "gradients" / "_toy_circle_for_test"
    toy.mkdir(parents=True)
    for package in (tmp_path / "qhybrid", toy.parent, toy):
        (package / "__init__.py").write_text("")
    (toy / "base.py").write_text("def pick():\n    from .impl import Impl\n    return Impl\n")
    (toy / "impl.py").write_text("from .base import pick\n\nclass Impl:\n    pass\n")
    circles = import_circles(tmp_path / "qhybrid")
    assert circles == [["qhybrid.gradients._toy_circle_for_test.base", "qhybrid.gradients._toy_circle_for_test.impl"]]


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
    src = ROOT / "devices" / "tensornet" / "plugin" / "derivatives.py"
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

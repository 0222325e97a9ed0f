"""The package's layout stays true: no import cycles (lazy imports inside functions
included) and no module importing another package's private module or private name.

Allowed: a module's own package's private modules (`from ._base import ...`) and the
private modules of the packages above it (`from .._results import RESULTS`: shared
helpers live where every side can import them downward)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "wendyjax"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("wendyjax",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _package(name: str) -> str:
    """The package a module lives in (a package's `__init__` is its own package)."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _imports(name: str) -> list[tuple[str, list[str], int]]:
    """Every import of module `name` as `(target module, imported names, line)`, relative
    imports resolved."""
    tree = ast.parse(MODULES[name].read_text())
    package = _package(name)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "wendyjax"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "wendyjax":
                continue
            names = [a.name for a in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            if submodules:
                out += [(m, [], node.lineno) for m in submodules]
                names = [n for n in names if f"{target}.{n}" not in MODULES]
            if names:
                out.append((target, names, node.lineno))
    return out


def _private_violations() -> list[str]:
    bad = []
    for name in MODULES:
        package = _package(name)
        for target, names, line in _imports(name):
            owner = _package(target)
            allowed = package == owner or package.startswith(owner + ".") or package == owner
            private_module = any(part.startswith("_") and part != "__init__" for part in target.split(".")[1:])
            if private_module and not allowed:
                bad.append(f"{name}:{line} imports the private module {target}")
            own = package == target or package.startswith(target + ".")
            private_names = [n for n in names if n.startswith("_") and n != "__version__"]
            if private_names and not own and owner != package:
                bad.append(f"{name}:{line} imports the private name(s) {', '.join(private_names)} from {target}")
    return bad


def _cycles() -> list[list[str]]:
    graph = {name: sorted({t for t, _, _ in _imports(name) if t in MODULES and t != name}) for name in MODULES}
    # a package's __init__ that re-exports its modules is not a dependency of those modules
    # when they import a sibling: edges into a package's own __init__ from inside it are real
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    return cycles


def test_the_layout_parser_sees_the_package():
    assert {"wendyjax", "wendyjax.estimators._base", "wendyjax.studies._engine"} <= set(MODULES)
    targets = {t for t, _, _ in _imports("wendyjax.estimators._wendy")}
    assert {"wendyjax._results", "wendyjax.estimators._base", "wendyjax.weak"} <= targets


def test_no_import_cycles():
    cycles = _cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_imports_across_packages():
    bad = _private_violations()
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ..estimators._fit import _bounds", "private module"),
        ("from ..estimators import _bounds", "private name"),
    ],
)
def test_the_private_import_check_can_fail(tmp_path, monkeypatch, source, expected):
    """The check flags a cross-package private import (a module planted in `studies`)."""
    fake = tmp_path / "_fake.py"
    fake.write_text(source + "\n")
    monkeypatch.setitem(MODULES, "wendyjax.studies._fake", fake)
    monkeypatch.setitem(MODULES, "wendyjax.estimators._fit", fake)
    assert any(expected in line for line in _private_violations() if "studies._fake" in line)


def test_the_cycle_check_can_fail(tmp_path, monkeypatch):
    """Two planted modules importing each other are reported."""
    a, b = tmp_path / "_a.py", tmp_path / "_b.py"
    a.write_text("from ._b import x\n")
    b.write_text("def f():\n    from ._a import y\n")
    monkeypatch.setitem(MODULES, "wendyjax.weak._a", a)
    monkeypatch.setitem(MODULES, "wendyjax.weak._b", b)
    assert any({"wendyjax.weak._a", "wendyjax.weak._b"} <= set(c) for c in _cycles())


def test_every_jitted_entry_point_is_cpu_safe():
    """The package compiles its programs through `_compile.cpu_safe_jit` (the scheduler that
    cannot deadlock vmapped LAPACK calls on CPU), never with a bare `eqx.filter_jit`/`jax.jit`:
    import no longer changes XLA_FLAGS, so a bare jit would run under the default scheduler."""
    bare = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        if name != "wendyjax._compile"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("filter_jit", "jit")
        and isinstance(node.value, ast.Name)
        and node.value.id in ("eqx", "jax")
    ]
    assert not bare, "bare jit in: " + ", ".join(bare)

"""The generated packages' imports go one way: no runtime or rendered module imports, even
lazily inside a function or for type checking only, one that imports it back (issue 28 §9:
the remote client, its profiles and their shared options used to import each other)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GENERATED = Path(__file__).resolve().parent.parent / "generated"
PACKAGES = sorted(p.parent for p in GENERATED.glob("**/__init__.py") if not (p.parent.parent / "__init__.py").exists())


def _module_name(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(package: Path) -> dict[str, set[str]]:
    """Module (dotted, relative to the package; "" the package itself) -> the package's
    modules it imports, wherever the import statement stands."""
    modules = {_module_name(package, p): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if name else []
        if path.name != "__init__.py":
            here = here[:-1]  # the package the module sits in
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
            target = [*base, *(node.module.split(".") if node.module else [])]
            candidates = [".".join(target)] if node.module else []
            candidates += [".".join([*target, alias.name]) for alias in node.names]
            found.update(c for c in candidates if c in modules and c != name)
        graph[name] = found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (its modules in order, the first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    # an import inside a function is an edge too (the remote client's old circle was one)
    lazy = imports_of_source({"x.py": "def f():\n    from .y import g\n", "y.py": "from .x import f\n"})
    assert find_cycle(lazy) == ["x", "y", "x"]


def imports_of_source(files: dict[str, str]) -> dict[str, set[str]]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp) / "pkg"
        package.mkdir()
        (package / "__init__.py").write_text("")
        for name, text in files.items():
            (package / name).write_text(text)
        return imports_of(package)


def test_there_are_packages_to_check() -> None:
    assert len(PACKAGES) >= 6, PACKAGES


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(GENERATED)))
def test_no_import_cycles_in_a_generated_package(package: Path) -> None:
    graph = imports_of(package)
    assert "connection" in graph and len(graph) > 10
    cycle = find_cycle({m: t - {""} for m, t in graph.items()})  # the package's __init__ re-exports
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_remote_client_reads_one_way() -> None:
    graph = imports_of(GENERATED / "client")
    assert "remote_options" in graph["remote_ws"] and "remote_options" in graph["remote_http"]
    assert {"remote_ws", "remote_http"} <= graph["remote_client"]
    for profile in ("remote_ws", "remote_http", "remote_options", "remote_cookies"):
        assert "remote_client" not in graph[profile], profile

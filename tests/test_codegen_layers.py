"""codegen/ imports go one way: no module imports (even for type checking only) one that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

CODEGEN = Path(__file__).resolve().parent.parent / "codegen"


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in CODEGEN.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    found.add(node.module.split(".")[0])
                else:  # from . import x
                    found.update(alias.name for alias in node.names)
        graph[path.stem] = found & {p.stem for p in CODEGEN.glob("*.py")}
    return graph


def test_no_import_cycles_in_codegen() -> None:
    graph = _imports()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycle = stack[stack.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_ir_builders_are_layered() -> None:
    """Shape readers at the bottom, the union builder above them, the type builder above that."""
    graph = _imports()
    assert not graph["shapes"] & {"build_types", "build_unions", "build_defaults", "build", "build_methods"}
    assert "build_types" not in graph["build_unions"]
    assert "build_types" not in graph["build_defaults"]
    assert {"build_unions", "shapes"} <= graph["build_types"]

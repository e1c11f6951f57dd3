"""Stage 1b (whole schema) — checks that look at all types at once.

- type names that give no Python name or the same one;
- `$ref` cycles through aliases (`A -> B -> A` with no object or array in between);
- meta.json methods that no type describes.

validate.py runs them after its per-node walk; `Report` collects what every check finds.
"""

from __future__ import annotations

from .errors import Problem
from .load import LoadedSchema
from .naming import RESERVED_TYPE_NAMES, is_identifier, pascal, words
from .shapes import ptr_escape

_SUFFIXES = ("Request", "Notification")


class Report:
    """The schema under check and the problems found so far (shared by every check)."""

    def __init__(self, schema: LoadedSchema) -> None:
        self.s = schema
        self.file = schema.schema_file
        self.problems: list[Problem] = []

    def problem(self, what: str, pointer: str, fix: str = "") -> None:
        self.problems.append(Problem(what, self.file, pointer, fix))


def python_type_name(name: str) -> str:
    """The Python name of a `$defs` entry (the IR's rule, restated so it can be checked first)."""
    py = name if is_identifier(name) else pascal(name)
    if not is_identifier(py):
        py = "T" + py
    return py + "_" if py in RESERVED_TYPE_NAMES else py


def check_type_names(report: Report) -> None:
    """Type names that give no Python name, or the same one."""
    seen: dict[str, str] = {}
    for name in report.s.defs:
        pointer = f"/$defs/{ptr_escape(name)}"
        if not words(name):
            report.problem(
                f"type name {name!r} has no letters or digits to make a Python name from",
                pointer,
                "rename the type (and the $refs to it)",
            )
            continue
        py = python_type_name(name)
        if py in seen:
            report.problem(
                f"types {seen[py]!r} and {name!r} both map to the Python name {py!r}",
                pointer,
                "rename one of them in the schema",
            )
            continue
        seen[py] = name


def check_alias_cycles(report: Report, alias_edges: dict[str, list[tuple[str, str]]]) -> None:
    """A type that is only a reference to itself, directly or through other references."""
    reported: set[frozenset[str]] = set()
    for start in report.s.defs:
        path = _cycle_from(alias_edges, start)
        if path is None or frozenset(path) in reported:
            continue
        reported.add(frozenset(path))
        chain = " -> ".join([*path, path[0]])
        report.problem(
            f"$ref cycle through type aliases: {chain}; the type is defined only as itself",
            f"/$defs/{ptr_escape(path[0])}",
            "make one type in the cycle an object or array, or refer to a different type",
        )


def _cycle_from(alias_edges: dict[str, list[tuple[str, str]]], start: str) -> list[str] | None:
    """The cycle through `start` along alias edges, as a list of names, if there is one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    visited: set[str] = set()
    while stack:
        name, path = stack.pop()
        for target, _ in alias_edges.get(name, []):
            if target == start:
                return path
            if target not in visited:
                visited.add(target)
                stack.append((target, [*path, target]))
    return None


def check_methods(report: Report) -> None:
    """meta.json methods no type describes (no x-method, no type named after them)."""
    tagged = {node["x-method"] for node in report.s.defs.values() if isinstance(node.get("x-method"), str)}
    candidates = [
        {_word(w) for w in words(name[: -len(suffix)])}
        for name in report.s.defs
        for suffix in _SUFFIXES
        if name.endswith(suffix)
    ]
    meta = str(report.s.files.meta)
    for side, entries in report.s.methods.items():
        for key, wire in entries:
            if wire in tagged:
                continue
            want = {_word(w) for w in words(pascal(wire.replace("/", "_")))}
            if any(want & have for have in candidates):
                continue  # the IR matches it by name (or says why it cannot)
            report.problems.append(
                Problem(
                    f'method {wire!r} has no params type: no type has "x-method": {wire!r}'
                    " and no *Request/*Notification type is named after it",
                    meta,
                    f"/{side}Methods/{ptr_escape(key)}",
                    f'add its types to the schema (with "x-method": "{wire}"), or remove it from meta.json',
                )
            )


def _word(word: str) -> str:
    return word.lower().removesuffix("s")

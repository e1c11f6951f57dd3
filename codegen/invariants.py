"""Stage 2c — invariants of the finished IR, checked before anything is rendered or written.

- every method meta.json lists appears in the method table exactly once, handled by the side
  (or sides) meta.json names;
- every request has a result type (a null result counts) and a notification has none;
- every type the templates will refer to (method params/results, fields, union variants,
  alias targets, typed defaults) is a definition of the package.

A failure here is a defect of the generator, not of the schema; it is reported like bad input
(exit 2, with the JSON pointer of what it concerns) so that no broken package is written.
"""

from __future__ import annotations

from collections import Counter

from .errors import CodegenError, Problem
from .ir import (
    AliasDef,
    Default,
    DefaultList,
    DefaultMap,
    DefaultObject,
    Definition,
    ListOf,
    MapOf,
    Method,
    Named,
    ObjectDef,
    TypeExpr,
    UnionDef,
)
from .load import LoadedSchema
from .shapes import ptr_escape


def check_invariants(schema: LoadedSchema, definitions: tuple[Definition, ...], methods: tuple[Method, ...]) -> None:
    problems = _method_table(schema, methods) + _references(schema, definitions, methods)
    if problems:
        raise CodegenError(problems)


def _method_table(schema: LoadedSchema, methods: tuple[Method, ...]) -> list[Problem]:
    meta = str(schema.files.meta)
    problems: list[Problem] = []
    counts = Counter(m.wire for m in methods)
    table = {m.wire: m for m in methods}
    for side, entries in schema.methods.items():
        for key, wire in entries:
            pointer = f"/{side}Methods/{ptr_escape(key)}"
            found = counts[wire]
            if found != 1:
                problems.append(Problem(f"internal error: method {wire!r} is in METHODS {found} times", meta, pointer))
                continue
            handled = table[wire].handled_by
            if side in ("agent", "client") and handled not in (side, "both"):
                problems.append(
                    Problem(
                        f"internal error: method {wire!r} is listed for the {side} but handled by the {handled}",
                        meta,
                        pointer,
                    )
                )
    for m in methods:
        if (m.kind == "request") != (m.result is not None):
            what = "has no result type" if m.kind == "request" else "has a result type"
            problems.append(Problem(f"internal error: {m.kind} {m.wire!r} {what}", meta, ""))
    return problems


def _references(
    schema: LoadedSchema, definitions: tuple[Definition, ...], methods: tuple[Method, ...]
) -> list[Problem]:
    names = {d.name for d in definitions}
    problems: list[Problem] = []

    def need(name: str | None, pointer: str, what: str) -> None:
        if name is not None and name not in names:
            problems.append(
                Problem(
                    f"internal error: {what} refers to type {name!r}, which is not generated",
                    schema.schema_file,
                    pointer,
                )
            )

    for m in methods:
        for name in (m.params, m.result, m.notification_params):
            need(name, "", f"method {m.wire!r}")
    for d in definitions:
        for name in _named_in(d):
            need(name, d.pointer, d.name)
    return problems


def _named_in(d: Definition) -> list[str]:
    found: list[str] = []

    def walk(t: TypeExpr) -> None:
        if isinstance(t, Named):
            found.append(t.name)
        elif isinstance(t, ListOf):
            walk(t.item)
        elif isinstance(t, MapOf):
            walk(t.value)

    def default(v: Default | None) -> None:
        if isinstance(v, DefaultObject):
            found.append(v.cls)
            for _, arg in v.args:
                default(arg)
        elif isinstance(v, DefaultList):
            for item in v.items:
                default(item)
        elif isinstance(v, DefaultMap):
            for _, item in v.items:
                default(item)

    if isinstance(d, ObjectDef):
        for f in d.fields:
            walk(f.type)
            default(f.default)
            default(f.on_error)
    elif isinstance(d, UnionDef):
        for v in d.variants:
            walk(v.type)
    elif isinstance(d, AliasDef):
        walk(d.target)
    return found

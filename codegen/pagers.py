"""Pagers: a proxy method that follows a paged list method's cursors (issue 27 §8).

A called request is paged when its params object has an optional `cursor` and its result
object has an optional `nextCursor` and exactly one required array of objects (the items):
`session/list` -> `AgentProxy.list_sessions(cwd=...)`, an async iterator over every
`SessionInfo`, page after page. Decided here, from the schema; the proxy template prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import ListOf, Method, Named, ObjectDef, Package

CURSOR, NEXT_CURSOR = "cursor", "nextCursor"  # the spec's pagination fields (docs: session-list)


@dataclass(frozen=True)
class Pager:
    """One paged method's iterator on the proxy."""

    name: str
    """The proxy method's name (`list_sessions`: `list_` and the items field)."""
    method: Method
    """The paged request (`session/list`)."""
    params: str
    items: str
    """The result's items field (Python name)."""
    item_type: str
    cursor: str
    next_cursor: str
    filters: tuple[str, ...]
    """The params fields passed through as keywords (every field but the cursor)."""


def find_pagers(package: Package) -> tuple[Pager, ...]:
    """The pagers of the methods a client calls, in method order (the client side of paging;
    an agent's proxy has none)."""
    if package.role != "client":
        return ()
    defs = {d.name: d for d in package.definitions}
    out: list[Pager] = []
    for m in package.called():
        params, result = defs.get(m.params or ""), defs.get(m.result or "")
        if m.kind != "request" or not isinstance(params, ObjectDef) or not isinstance(result, ObjectDef):
            continue
        cursor = next((f for f in params.fields if f.wire == CURSOR and not f.required), None)
        after = next((f for f in result.fields if f.wire == NEXT_CURSOR and not f.required), None)
        items = [
            f for f in result.fields if f.required and isinstance(f.type, ListOf) and isinstance(f.type.item, Named)
        ]
        # Keywords with a schema default would need it rendered: no paged method has one.
        plain = all(f.default is None and not f.required for f in params.fields)
        if cursor is None or after is None or len(items) != 1 or not plain:
            continue
        item = items[0]
        assert isinstance(item.type, ListOf) and isinstance(item.type.item, Named)
        name = f"list_{item.py}"
        if name in {c.handler for c in package.called()} or name in {f.py for f in params.fields}:
            continue  # would shadow a proxy method or a keyword
        filters = tuple(f.py for f in params.fields if f is not cursor)
        out.append(Pager(name, m, params.name, item.py, item.type.item.name, cursor.py, after.py, filters))
    return tuple(out)

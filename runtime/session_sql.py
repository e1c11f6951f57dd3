"""What the SQL session stores (`SqliteStore`, `PostgresStore`) share: one row shape, one paging
scheme, one way to keep entries (a row per save: its entries' JSON, a line each, `seq` the index
of its first entry). Not part of the store protocol; a store of your own need not use it.

`mark` is the driver's placeholder (`?`, `%s`); `fetch(sql, args)` runs a query, gives its rows.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from .session_store import (
    Page,
    RecordedBatch,
    RecordedEntry,
    SessionRecord,
    StoreError,
    make_cursor,
    parse_cursor,
)

__all__ = [
    "RECORD_COLUMNS",
    "REPLAY_ROWS",
    "Fetch",
    "dumps",
    "entries_text",
    "list_sql",
    "record_from_row",
    "replay_sql",
]

Fetch = Callable[[str, list[Any]], Awaitable[Sequence[Sequence[Any]]]]

RECORD_COLUMNS: Final = "owner, session_id, cwd, created_at, updated_at, title, state, entries"
"""The columns of `acp_sessions` that `record_from_row` reads, in this order."""

REPLAY_ROWS: Final = 32
"""Rows of `acp_entries` per replay read (a row holds one save's entries): bounded memory for
any conversation length."""

_encode_entry = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# NaN and Infinity are refused: a replayed entry's text goes to the wire as it is stored
_decode_entry = json.JSONDecoder(parse_constant=_not_json).decode


def dumps(value: object) -> str:
    """Compact JSON text (one encoder for every call: `json.dumps` with options makes a new one)."""
    return _encode_entry(value)


def entries_text(entries: Sequence[Mapping[str, Any]]) -> str:
    """One save's entries as the text of one `acp_entries` row: their JSON, one line each. A
    `RecordedBatch` or `RecordedEntry` gives its own bytes (the ones sent); any other entry is
    encoded here."""
    if isinstance(entries, RecordedBatch):
        return entries.text()
    lines: list[bytes] = []
    for entry in entries:
        data = entry.json if isinstance(entry, RecordedEntry) else dumps(dict(entry)).encode()
        if b"\n" in data:  # JSON holds a newline only as whitespace (never inside a string)
            data = data.replace(b"\n", b" ")
        lines.append(data)
    return b"\n".join(lines).decode("utf-8")


def record_from_row(row: Sequence[Any]) -> SessionRecord:
    """A `SessionRecord` from a row of `RECORD_COLUMNS` (state stored as JSON text)."""
    return SessionRecord(
        owner=row[0],
        session_id=row[1],
        cwd=row[2],
        created_at=row[3],
        updated_at=row[4],
        title=row[5],
        state=json.loads(row[6]),
        entries=row[7],
    )


async def list_sql(
    fetch: Fetch, mark: str, owner: str, cwd: str | None, after: str | None, limit: int
) -> Page:
    """One `SessionStore.list` page over `acp_sessions`, keyset paged on its indexes."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    key = parse_cursor(after)
    where, args = [f"owner = {mark}"], [owner]
    if cwd is not None:
        where.append(f"cwd = {mark}")
        args.append(cwd)
    if key is not None:
        # the first term lets the index seek; the second orders ties by id
        where.append(f"updated_at <= {mark} AND (updated_at < {mark} OR session_id > {mark})")
        args += [key[0], key[0], key[1]]
    sql = (
        f"SELECT {RECORD_COLUMNS} FROM acp_sessions WHERE {' AND '.join(where)}"
        f" ORDER BY updated_at DESC, session_id LIMIT {mark}"
    )
    rows = await fetch(sql, [*args, limit + 1])  # one more row: whether a next page exists
    records = [record_from_row(row) for row in rows[:limit]]
    return Page(records, make_cursor(records[-1]) if len(rows) > limit else None)


async def replay_sql(fetch: Fetch, mark: str, session_id: str) -> AsyncIterator[Mapping[str, Any]]:
    """The session's entries, oldest first: `acp_entries` rows (one save's entries each, a JSON
    text a line; `seq` the index of the row's first entry), `REPLAY_ROWS` rows a read."""
    sql = (
        f"SELECT seq, body FROM acp_entries WHERE session_id = {mark} AND seq > {mark}"
        f" ORDER BY seq LIMIT {mark}"
    )
    seq = -1
    while True:
        rows = await fetch(sql, [session_id, seq, REPLAY_ROWS])
        for row in rows:
            for line in row[1].split("\n"):
                try:
                    entry = RecordedEntry(_decode_entry(line))
                except ValueError as exc:
                    raise StoreError(
                        f"session {session_id!r}: a stored entry (row {row[0]}) is not JSON "
                        f"({exc}): the store is damaged; restore it from a backup"
                    ) from exc
                entry.json = line.encode()  # parsed, so proven JSON: replayed as it was sent
                yield entry
        if len(rows) < REPLAY_ROWS:
            return
        seq = rows[-1][0]

"""`SqliteStore`: sessions in one SQLite file (stdlib `sqlite3`), the embedded default.

- Several processes on one host may share the file (`uvicorn --workers N`): WAL journal, a
  busy timeout, and every write one `BEGIN IMMEDIATE` transaction.
- A kill -9 loses at most the write in flight: a transaction is in the file whole or not at all
  (`synchronous=NORMAL` under WAL keeps every commit across a process crash; a power cut may
  undo the last commits, never corrupt the file).
- Blocking calls run in a worker thread, one at a time per store, never on the event loop.
- The file carries its own version (`acp_store_meta`); a file of another version, another
  program's database, or a file that is not SQLite is refused (`StoreVersionError`) before
  anything is written to it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from .session_sql import (
    RECORD_COLUMNS,
    dumps,
    entries_text,
    list_sql,
    record_from_row,
    replay_sql,
)
from .session_store import (
    DEFAULT_CLAIM_TTL,
    Page,
    SessionExists,
    SessionRecord,
    StoreUnavailable,
    StoreVersionError,
    holder_is_dead,
)

__all__ = ["SCHEMA_VERSION", "STORE_KIND", "SqliteStore"]

STORE_KIND: Final = "acp-codegen session store"
SCHEMA_VERSION: Final = 1
_T = TypeVar("_T")

_SCHEMA: Final = (
    "CREATE TABLE acp_store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE acp_sessions (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " cwd TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, title TEXT,"
    " state TEXT NOT NULL,"
    " entries INTEGER NOT NULL DEFAULT 0, claim_holder TEXT, claim_until REAL)",
    # a row per save: its entries' JSON, a line each; seq: the index of its first entry
    "CREATE TABLE acp_entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
    # list pages: newest first within an owner (and within an owner's cwd), keyset paged
    "CREATE INDEX acp_sessions_by_owner ON acp_sessions (owner, updated_at DESC, session_id)",
    "CREATE INDEX acp_sessions_by_cwd ON acp_sessions (owner, cwd, updated_at DESC, session_id)",
)


class SqliteStore:
    """Sessions in the SQLite file at `path` (created with its tables when absent or empty).

    `StoreVersionError` when the file is another version's, another program's or not SQLite;
    `StoreUnavailable` when it cannot be opened or written (read-only, disk full, locked)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._conn = self._open(busy_timeout)

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open the session store {self.path!r}: {exc}; check that its directory "
                "exists and is writable"
            ) from exc
        try:
            self._check_or_create(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_or_create(self, conn: sqlite3.Connection) -> None:
        try:
            # A read first: nothing is written to a file before it is known to be ours.
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            raise StoreVersionError(
                f"{self.path!r} is not a SQLite database ({exc}): corrupt, or another kind of "
                "file. It was left as it is; point the store at a new path, or restore the file"
            ) from exc
        if tables:
            self._check_version(conn, tables)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if not tables:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # Another process may have created them since our read.
                    again = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
                    if again:
                        conn.execute("ROLLBACK")
                        self._check_version(conn, again)
                        return
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.executemany(
                        "INSERT INTO acp_store_meta VALUES (?, ?)",
                        [("store", STORE_KIND), ("version", str(SCHEMA_VERSION))],
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.DatabaseError as exc:
            raise _unavailable(self.path, exc) from exc

    def _check_version(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        if "acp_store_meta" not in tables:
            raise StoreVersionError(
                f"{self.path!r} is another program's SQLite database (tables: "
                f"{', '.join(sorted(tables)[:5])}), not a session store. It was left as it is; "
                "give the store a path of its own"
            )
        meta = dict(conn.execute("SELECT key, value FROM acp_store_meta").fetchall())
        if meta.get("store") != STORE_KIND or meta.get("version") != str(SCHEMA_VERSION):
            raise StoreVersionError(
                f"{self.path!r} holds a session store of kind {meta.get('store')!r} version "
                f"{meta.get('version')!r}; this one reads version {SCHEMA_VERSION} only. It was "
                "left as it is; open it with the release that wrote it, or use a new path"
            )

    async def _call(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            conn = self._conn
            try:
                return fn(conn)
            except BaseException as exc:
                if conn.in_transaction:  # all or nothing: a failed write leaves no trace
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                if isinstance(exc, sqlite3.DatabaseError):
                    raise _unavailable(self.path, exc) from exc
                raise

    @staticmethod
    def _write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        conn.execute("BEGIN IMMEDIATE")
        result = fn(conn)
        conn.execute("COMMIT")
        return result

    async def create(self, record: SessionRecord) -> None:
        def run(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO acp_sessions (session_id, owner, cwd, created_at, updated_at,"
                    " title, state, entries) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                    (
                        record.session_id,
                        record.owner,
                        record.cwd,
                        record.created_at,
                        record.updated_at,
                        record.title,
                        dumps(dict(record.state)),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise SessionExists(f"session {record.session_id!r} is already stored") from exc

        await self._call(run)

    async def get(self, owner: str, session_id: str) -> SessionRecord | None:
        return await self._call(lambda conn: _get(conn, owner, session_id))

    async def save(
        self,
        owner: str,
        session_id: str,
        *,
        updated_at: str,
        title: str | None,
        state: Mapping[str, Any],
        entries: Sequence[Mapping[str, Any]] = (),
    ) -> SessionRecord | None:
        # encoded before the lock is taken; one row for the whole batch (a row per entry costs
        # more than the rest of recording together)
        body = entries_text(entries) if entries else None
        count, state_text = len(entries), dumps(dict(state))

        def run(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(
                "SELECT cwd, created_at, entries FROM acp_sessions"
                " WHERE session_id = ? AND owner = ?",
                (session_id, owner),
            ).fetchone()
            if row is None:
                return None
            cwd, created_at, start = row
            if body is not None:
                conn.execute("INSERT INTO acp_entries VALUES (?, ?, ?)", (session_id, start, body))
            conn.execute(
                "UPDATE acp_sessions SET updated_at = ?, title = ?, state = ?, entries = ?"
                " WHERE session_id = ?",
                (updated_at, title, state_text, start + count, session_id),
            )
            return SessionRecord(
                owner, session_id, cwd, created_at, updated_at, title, dict(state), start + count
            )

        return await self._call(lambda conn: self._write(conn, run))

    # (above `list`: in the class body after it, `list[...]` would name the method)
    async def _fetch(self, sql: str, args: list[Any]) -> list[Any]:
        return await self._call(lambda conn: conn.execute(sql, args).fetchall())

    async def replay(self, owner: str, session_id: str) -> AsyncIterator[Mapping[str, Any]]:
        if await self.get(owner, session_id) is None:
            return
        async for entry in replay_sql(self._fetch, "?", session_id):
            yield entry

    async def list(
        self, owner: str, *, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> Page:
        return await list_sql(self._fetch, "?", owner, cwd, after, limit)

    async def delete(self, owner: str, session_id: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM acp_sessions WHERE session_id = ? AND owner = ?", (session_id, owner)
            ).rowcount
            if gone:
                conn.execute("DELETE FROM acp_entries WHERE session_id = ?", (session_id,))
            return bool(gone)

        return await self._call(lambda conn: self._write(conn, run))

    async def claim(
        self, owner: str, session_id: str, holder: str, ttl: float = DEFAULT_CLAIM_TTL
    ) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT claim_holder, claim_until FROM acp_sessions"
                " WHERE session_id = ? AND owner = ?",
                (session_id, owner),
            ).fetchone()
            if row is None:
                return False
            now = time.time()  # wall clock: claims are compared across processes
            current, until = row
            if current not in (None, holder) and until > now and not holder_is_dead(current):
                return False
            conn.execute(
                "UPDATE acp_sessions SET claim_holder = ?, claim_until = ? WHERE session_id = ?",
                (holder, now + ttl, session_id),
            )
            return True

        return await self._call(lambda conn: self._write(conn, run))

    async def release(self, owner: str, session_id: str, holder: str) -> None:
        await self._call(
            lambda conn: conn.execute(
                "UPDATE acp_sessions SET claim_holder = NULL, claim_until = NULL"
                " WHERE session_id = ? AND owner = ? AND claim_holder = ?",
                (session_id, owner, holder),
            )
        )

    async def aclose(self) -> None:
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            self._conn.close()


def _get(conn: sqlite3.Connection, owner: str, session_id: str) -> SessionRecord | None:
    row = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM acp_sessions WHERE session_id = ? AND owner = ?",
        (session_id, owner),
    ).fetchone()
    return None if row is None else record_from_row(row)


def _unavailable(path: str, exc: sqlite3.DatabaseError) -> StoreUnavailable:
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        hint = "the file (or its directory) is not writable by this process; fix its permissions"
    elif "full" in text:
        hint = "the disk is full; free some space"
    elif "locked" in text or "busy" in text:
        hint = "another process held the file past the busy timeout; retry"
    elif "malformed" in text or "not a database" in text:
        hint = "the file is damaged; restore it from a backup"
    else:
        hint = "check the file and its disk"
    return StoreUnavailable(f"session store {path!r}: {text}: {hint}; nothing stored was lost")

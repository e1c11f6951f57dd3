"""`PostgresStore`: sessions in a PostgreSQL database, shared by agents on several hosts.

The driver is psycopg 3 (`pip install 'psycopg[binary]'`, or this package's `postgres`
extra), imported only when a `PostgresStore` is opened. psycopg over asyncpg: it is the
PostgreSQL project's own maintained adapter line, speaks libpq (so every `postgresql://` URL,
`PG*` variable, `.pgpass` and Unix-socket form works as in `psql`), and has a native asyncio
connection with typed errors for "connection lost" we turn into `StoreUnavailable`.

Each store keeps one connection, used one call at a time, and opens a new one on the call
after the old one broke (server restarted, network cut): the failed call gets
`StoreUnavailable`, nothing stored is lost, and the store recovers when the server is back.
Claims use the server's clock, so hosts with skewed clocks agree on when a claim expires.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import ModuleType
from typing import Any, Final, Protocol, TypeVar

from .session_sql import (
    RECORD_COLUMNS,
    dumps,
    entries_text,
    list_sql,
    record_from_row,
    replay_sql,
)
from .session_sqlite import SCHEMA_VERSION, STORE_KIND
from .session_store import (
    DEFAULT_CLAIM_TTL,
    Page,
    SessionExists,
    SessionRecord,
    StoreError,
    StoreUnavailable,
    StoreVersionError,
    holder_is_dead,
)

__all__ = ["INSTALL_HINT", "PostgresStore"]

INSTALL_HINT: Final = (
    "PostgresStore needs the psycopg 3 driver: pip install 'psycopg[binary]' "
    "(or install acp-codegen's `postgres` extra)"
)
_T = TypeVar("_T")
_TABLES: Final = ("acp_store_meta", "acp_sessions", "acp_entries")
_SCHEMA: Final = (
    "CREATE TABLE acp_store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # COLLATE "C": pages ordered by bytes, as in SQLite, whatever the database's locale
    'CREATE TABLE acp_sessions (session_id TEXT COLLATE "C" PRIMARY KEY,'
    " owner TEXT NOT NULL, cwd TEXT NOT NULL, created_at TEXT NOT NULL,"
    ' updated_at TEXT COLLATE "C" NOT NULL, title TEXT,'
    " state TEXT NOT NULL, entries INTEGER NOT NULL DEFAULT 0, claim_holder TEXT,"
    " claim_until TIMESTAMPTZ)",
    # entries as text, not jsonb: replayed byte for byte as they were recorded; a row per
    # save (its entries' JSON, a line each), seq the index of its first entry
    "CREATE TABLE acp_entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " body TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    "CREATE INDEX acp_sessions_by_owner ON acp_sessions (owner, updated_at DESC, session_id)",
    "CREATE INDEX acp_sessions_by_cwd ON acp_sessions (owner, cwd, updated_at DESC, session_id)",
)


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    async def fetchone(self) -> tuple[Any, ...] | None: ...
    async def fetchall(self) -> list[tuple[Any, ...]]: ...
    async def executemany(self, query: str, params_seq: Sequence[Sequence[Any]]) -> None: ...


class _Connection(Protocol):
    """The part of `psycopg.AsyncConnection` this store uses (the driver is optional, so it
    is typed here rather than imported)."""

    async def execute(self, query: str, params: Sequence[Any] | None = None) -> _Cursor: ...
    def cursor(self) -> AbstractAsyncContextManager[_Cursor]: ...
    def transaction(self) -> AbstractAsyncContextManager[Any]: ...
    async def close(self) -> None: ...


def _driver() -> ModuleType:
    try:
        return importlib.import_module("psycopg")
    except ImportError as exc:
        raise StoreError(INSTALL_HINT) from exc


class PostgresStore:
    """Sessions in the PostgreSQL database at `url` (a libpq URL or `key=value` string).
    Open with `await PostgresStore.open(url)`; its tables are created on first use."""

    def __init__(self, url: str, *, connect_timeout: float = 5.0) -> None:
        self.url = url
        self._pg = _driver()
        self._timeout = connect_timeout
        self._conn: _Connection | None = None
        self._lock = asyncio.Lock()
        # connection-level failures: the call gets StoreUnavailable, the next one reconnects
        self._lost: tuple[type[BaseException], ...] = (
            self._pg.OperationalError,
            self._pg.InterfaceError,
        )

    @classmethod
    async def open(cls, url: str, *, connect_timeout: float = 5.0) -> PostgresStore:
        store = cls(url, connect_timeout=connect_timeout)
        await store._call(store._check_or_create)
        return store

    async def _connect(self) -> _Connection:
        if self._conn is None:
            conn: _Connection = await self._pg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
            self._conn = conn
        return self._conn

    async def _call(self, fn: Callable[[_Connection], Awaitable[_T]]) -> _T:
        async with self._lock:
            try:
                return await fn(await self._connect())
            except self._lost as exc:
                broken, self._conn = self._conn, None
                if broken is not None:
                    try:
                        await broken.close()
                    except Exception:  # already gone: closing is best effort
                        pass
                why = " ".join(str(exc).split()) or type(exc).__name__
                raise StoreUnavailable(
                    f"PostgreSQL session store unreachable ({why}); "
                    "nothing stored was lost, retry once the server is back"
                ) from exc
            except self._pg.Error as exc:
                raise StoreUnavailable(f"PostgreSQL session store: {exc}") from exc

    async def _check_or_create(self, conn: _Connection) -> None:
        async with conn.transaction():
            # one creator at a time across processes and hosts
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('acp_store_meta'))")
            cur = await conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_name = ANY(%s)",
                [list(_TABLES)],
            )
            present = {row[0] for row in await cur.fetchall()}
            if not present:
                for statement in _SCHEMA:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO acp_store_meta VALUES ('store', %s), ('version', %s)",
                    [STORE_KIND, str(SCHEMA_VERSION)],
                )
                return
            if "acp_store_meta" not in present:
                raise StoreVersionError(
                    f"the database has tables named {', '.join(sorted(present))} that are not a "
                    "session store's. They were left as they are; use another database or schema"
                )
            cur = await conn.execute("SELECT key, value FROM acp_store_meta")
            meta = {row[0]: row[1] for row in await cur.fetchall()}
            if meta.get("store") != STORE_KIND or meta.get("version") != str(SCHEMA_VERSION):
                raise StoreVersionError(
                    f"the database holds a session store of kind {meta.get('store')!r} version "
                    f"{meta.get('version')!r}; this one reads version {SCHEMA_VERSION} only. It "
                    "was left as it is; use the release that wrote it, or another database"
                )

    async def create(self, record: SessionRecord) -> None:
        async def run(conn: _Connection) -> None:
            try:
                await conn.execute(
                    "INSERT INTO acp_sessions (session_id, owner, cwd, created_at, updated_at,"
                    " title, state, entries) VALUES (%s, %s, %s, %s, %s, %s, %s, 0)",
                    [
                        record.session_id,
                        record.owner,
                        record.cwd,
                        record.created_at,
                        record.updated_at,
                        record.title,
                        dumps(dict(record.state)),
                    ],
                )
            except self._pg.errors.UniqueViolation as exc:
                raise SessionExists(f"session {record.session_id!r} is already stored") from exc

        await self._call(run)

    async def get(self, owner: str, session_id: str) -> SessionRecord | None:
        return await self._call(lambda conn: self._get(conn, owner, session_id))

    @staticmethod
    async def _get(conn: _Connection, owner: str, session_id: str) -> SessionRecord | None:
        cur = await conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM acp_sessions WHERE session_id = %s AND owner = %s",
            [session_id, owner],
        )
        row = await cur.fetchone()
        return None if row is None else record_from_row(row)

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
        body = entries_text(entries) if entries else None
        state_text = dumps(dict(state))

        async def run(conn: _Connection) -> SessionRecord | None:
            # one statement, so one round trip and atomic without a transaction block: the
            # session's row updated, and the batch's row inserted (when there is one)
            cur = await conn.execute(
                f"WITH s AS (UPDATE acp_sessions SET updated_at = %s, title = %s, state = %s,"
                f" entries = entries + %s WHERE session_id = %s AND owner = %s"
                f" RETURNING {RECORD_COLUMNS}),"
                f" i AS (INSERT INTO acp_entries SELECT session_id, entries - %s, %s::text"
                f" FROM s WHERE %s)"
                f" SELECT * FROM s",
                [updated_at, title, state_text, len(entries), session_id, owner,
                 len(entries), body, body is not None],
            )  # fmt: skip
            row = await cur.fetchone()
            return None if row is None else record_from_row(row)

        return await self._call(run)

    # (above `list`: in the class body after it, `list[...]` would name the method)
    async def _fetch(self, sql: str, args: list[Any]) -> list[tuple[Any, ...]]:
        async def run(conn: _Connection) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, args)
            return await cur.fetchall()

        return await self._call(run)

    async def replay(self, owner: str, session_id: str) -> AsyncIterator[Mapping[str, Any]]:
        if await self.get(owner, session_id) is None:
            return
        async for entry in replay_sql(self._fetch, "%s", session_id):
            yield entry

    async def list(
        self, owner: str, *, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> Page:
        return await list_sql(self._fetch, "%s", owner, cwd, after, limit)

    async def delete(self, owner: str, session_id: str) -> bool:
        async def run(conn: _Connection) -> bool:
            async with conn.transaction():
                cur = await conn.execute(
                    "DELETE FROM acp_sessions WHERE session_id = %s AND owner = %s",
                    [session_id, owner],
                )
                if cur.rowcount:
                    await conn.execute(
                        "DELETE FROM acp_entries WHERE session_id = %s", [session_id]
                    )
                return bool(cur.rowcount)

        return await self._call(run)

    async def claim(
        self, owner: str, session_id: str, holder: str, ttl: float = DEFAULT_CLAIM_TTL
    ) -> bool:
        take = (
            "UPDATE acp_sessions SET claim_holder = %s,"
            " claim_until = clock_timestamp() + %s * interval '1 second'"
            " WHERE session_id = %s AND owner = %s AND "
        )

        async def run(conn: _Connection) -> bool:
            # one round trip when the claim is free, expired or ours (each statement atomic)
            cur = await conn.execute(
                take + "(claim_holder IS NULL OR claim_holder = %s"
                " OR claim_until <= clock_timestamp()) RETURNING 1",
                [holder, ttl, session_id, owner, holder],
            )
            if await cur.fetchone() is not None:
                return True
            cur = await conn.execute(
                "SELECT claim_holder FROM acp_sessions WHERE session_id = %s AND owner = %s",
                [session_id, owner],
            )
            row = await cur.fetchone()
            if row is None or row[0] is None or not holder_is_dead(row[0]):
                return False  # absent, or another live holder's (a free claim was taken above)
            # a dead process's on this host: taken over, unless someone else was quicker
            cur = await conn.execute(
                take + "claim_holder = %s RETURNING 1", [holder, ttl, session_id, owner, row[0]]
            )
            return await cur.fetchone() is not None

        return await self._call(run)

    async def release(self, owner: str, session_id: str, holder: str) -> None:
        async def run(conn: _Connection) -> None:
            await conn.execute(
                "UPDATE acp_sessions SET claim_holder = NULL, claim_until = NULL"
                " WHERE session_id = %s AND owner = %s AND claim_holder = %s",
                [session_id, owner, holder],
            )

        await self._call(run)

    async def aclose(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

"""`open_store(url)`: a session store from a URL, as `--store` takes it.

- `memory`: `MemoryStore`, gone when the process exits;
- `sqlite:PATH` (also `sqlite:///PATH`): `SqliteStore`, one file, several processes on a host;
- `postgresql://...` (or `postgres://...`): `PostgresStore`, several hosts (needs psycopg).
"""

from __future__ import annotations

import asyncio

from .session_store import MemoryStore, SessionStore, StoreError

__all__ = ["STORE_URLS", "open_store"]

STORE_URLS = "memory, sqlite:PATH or postgresql://USER@HOST/DB"


async def open_store(url: str) -> SessionStore:
    """The store `url` names, opened (its tables checked or created). `StoreError` with what
    to write instead for a URL of no known kind; the store's own errors when it cannot open."""
    if url == "memory":
        return MemoryStore()
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:")
        if path.startswith("//"):  # sqlite:///abs/path or sqlite://rel (SQLAlchemy style)
            path = path[2:]
        if not path:
            raise StoreError(
                f"store URL {url!r} names no file: write sqlite:PATH, e.g. sqlite:sessions.db"
            )
        from .session_sqlite import SqliteStore

        return await asyncio.to_thread(SqliteStore, path)
    if url.startswith(("postgresql://", "postgres://")):
        from .session_postgres import PostgresStore

        return await PostgresStore.open(url)
    raise StoreError(f"unknown session store URL {url!r}: use {STORE_URLS}")

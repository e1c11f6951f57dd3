"""Session stores: where an agent's session layer keeps its sessions, behind one protocol.

A store knows nothing of the schema: it keeps wire JSON (what the generated `to_dict()` gives)
and a few columns the layer filters and orders by. Every call is scoped by an `owner`, the
`Principal.id` of the connection (see `principal`): a session of another owner is exactly as
absent as one that never existed. Bring your own store (Redis, DynamoDB, ...) by implementing
`SessionStore`; `testing.check_store(store)` runs the protocol's conformance checks against it.

Bundled: `MemoryStore` (here), `SqliteStore` (`session_sqlite`, the embedded default) and
`PostgresStore` (`session_postgres`, optional `psycopg` driver, for several hosts).

Errors a store raises are `StoreError`s with a message that says what failed and how to fix
it; the layer turns them into JSON-RPC errors for the one request they affect.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol, overload, runtime_checkable

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "MemoryStore",
    "Page",
    "RecordedBatch",
    "RecordedEntry",
    "SessionBusy",
    "SessionExists",
    "SessionRecord",
    "SessionStore",
    "StoreError",
    "StoreUnavailable",
    "StoreVersionError",
    "holder_id",
    "holder_is_dead",
]

DEFAULT_CLAIM_TTL: Final = 30.0
"""Seconds a turn's claim on its session lasts unless renewed (the layer renews running turns)."""


class StoreError(Exception):
    """A store could not do what was asked; the message says what and how to fix it."""


class StoreUnavailable(StoreError):
    """The backend cannot be reached or written just now (database down, disk full, file not
    writable). Nothing stored is lost; the same call may succeed later."""


class StoreVersionError(StoreError):
    """The file or database belongs to another version of this store, or to something else
    entirely. It was left exactly as it is."""


class SessionExists(StoreError):
    """`create` was given a session id that is already stored (for any owner)."""


class SessionBusy(StoreError):
    """Another turn (in this process or another) holds the session's claim."""


class RecordedEntry(dict[str, Any]):
    """A conversation entry as the layer recorded it: the update's wire JSON (this dict), and in
    `json` the exact bytes sent for it (compact UTF-8 JSON). A store that keeps text may write
    those bytes instead of encoding the entry again; to any other store it is a plain dict."""

    __slots__ = ("json",)
    json: bytes


class RecordedBatch(Sequence[Mapping[str, Any]]):
    """The entries of one `save` as the layer recorded them: a sequence of the updates' wire
    JSON (dicts), and `text()`, the exact bytes sent for them as JSON lines. A store that keeps
    text may write `text()` rather than encode each entry again; to any other store it is a
    plain sequence of dicts."""

    __slots__ = ("_data", "_entries")

    def __init__(self, entries: list[dict[str, Any]], data: list[bytes]) -> None:
        if len(entries) != len(data):
            raise ValueError(f"{len(entries)} entries but {len(data)} encodings")
        self._entries, self._data = entries, data

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        return self._entries[index]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self._entries)

    def text(self) -> str:
        """The entries' JSON (compact: no newline inside), a line each."""
        return b"\n".join(self._data).decode("utf-8")


@dataclass(frozen=True)
class SessionRecord:
    """One stored session: the columns a store filters and orders by, and the layer's state."""

    owner: str
    session_id: str
    cwd: str
    created_at: str
    """RFC 3339 UTC with a `Z` (`2026-12-02T10:06:19.123456Z`): sorts as text."""
    updated_at: str
    title: str | None = None
    state: Mapping[str, Any] = field(default_factory=lambda: {})
    """A JSON object the layer owns (mode, config option values, MCP servers, ...); a store
    keeps it verbatim and never looks inside."""
    entries: int = 0
    """How many conversation entries are stored for the session."""


@dataclass(frozen=True)
class Page:
    """One page of `SessionStore.list`: newest `updated_at` first, then by `session_id`."""

    sessions: Sequence[SessionRecord]
    next_cursor: str | None
    """Opaque; pass it back as `after` for the next page. None on the last page."""


@runtime_checkable
class SessionStore(Protocol):
    """What the session layer needs of a store. Every method is a coroutine and may raise
    `StoreUnavailable`; none of them may hold a lock across an `await` of the caller's."""

    async def create(self, record: SessionRecord) -> None:
        """Store a new session (with no entries). `SessionExists` if its id is taken."""
        ...

    async def get(self, owner: str, session_id: str) -> SessionRecord | None:
        """The session, or None when it is absent or belongs to another owner."""
        ...

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
        """Atomically append `entries` (conversation updates, wire JSON, in order) and set the
        columns; all or nothing. Returns the new record, or None when the session is absent
        (or another owner's), in which case nothing was written."""
        ...

    def replay(self, owner: str, session_id: str) -> AsyncIterator[Mapping[str, Any]]:
        """Every stored entry of the session, oldest first, read in bounded batches (never the
        whole conversation in memory at once). Empty when the session is absent."""
        ...

    async def list(
        self, owner: str, *, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> Page:
        """The owner's sessions (only those with exactly this `cwd` when given), a page of at
        most `limit` after the cursor `after`. `ValueError` for a cursor this store never gave."""
        ...

    async def delete(self, owner: str, session_id: str) -> bool:
        """Remove the session and its entries; False when it was absent (or another owner's)."""
        ...

    async def claim(
        self, owner: str, session_id: str, holder: str, ttl: float = DEFAULT_CLAIM_TTL
    ) -> bool:
        """Take (or, by the same `holder`, renew) the session's turn claim for `ttl` seconds.
        False when another holder's claim is live: unexpired, and not a dead process on this
        host (`holder_is_dead`), so a killed agent's claim never blocks its restart."""
        ...

    async def release(self, owner: str, session_id: str, holder: str) -> None:
        """Drop `holder`'s claim, if it still has it."""
        ...

    async def aclose(self) -> None:
        """Release connections and files. The store is not used after this."""
        ...


_HOST: Final = socket.gethostname()


def holder_id() -> str:
    """A claim holder name unique to this call: `host:pid:random`."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex}"


def holder_is_dead(holder: str) -> bool:
    """True when `holder` (from `holder_id`) names a process on this host that has ended."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


class MemoryStore:
    """Sessions in this process's memory: gone when it exits. For tests and throwaway agents."""

    def __init__(self) -> None:
        self._records: dict[str, SessionRecord] = {}
        self._entries: dict[str, list[Mapping[str, Any]]] = {}
        self._claims: dict[str, tuple[str, float]] = {}

    def _mine(self, owner: str, session_id: str) -> SessionRecord | None:
        record = self._records.get(session_id)
        return record if record is not None and record.owner == owner else None

    async def create(self, record: SessionRecord) -> None:
        if record.session_id in self._records:
            raise SessionExists(f"session {record.session_id!r} is already stored")
        self._records[record.session_id] = replace(record, entries=0)
        self._entries[record.session_id] = []

    async def get(self, owner: str, session_id: str) -> SessionRecord | None:
        return self._mine(owner, session_id)

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
        record = self._mine(owner, session_id)
        if record is None:
            return None
        stored = self._entries[session_id]
        stored.extend(entries)
        record = replace(
            record, updated_at=updated_at, title=title, state=dict(state), entries=len(stored)
        )
        self._records[session_id] = record
        return record

    async def replay(self, owner: str, session_id: str) -> AsyncIterator[Mapping[str, Any]]:
        if self._mine(owner, session_id) is None:
            return
        for entry in list(self._entries[session_id]):
            yield entry

    async def list(
        self, owner: str, *, cwd: str | None = None, after: str | None = None, limit: int = 50
    ) -> Page:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        key = parse_cursor(after)
        mine = [
            r for r in self._records.values() if r.owner == owner and (cwd is None or r.cwd == cwd)
        ]
        # newest first; ties by id ascending: key (updated desc, id asc)
        mine.sort(key=lambda r: r.session_id)
        mine.sort(key=lambda r: r.updated_at, reverse=True)
        if key is not None:
            mine = [
                r
                for r in mine
                if (r.updated_at < key[0]) or (r.updated_at == key[0] and r.session_id > key[1])
            ]
        page = mine[:limit]
        more = len(mine) > limit
        return Page(page, make_cursor(page[-1]) if more and page else None)

    async def delete(self, owner: str, session_id: str) -> bool:
        if self._mine(owner, session_id) is None:
            return False
        del self._records[session_id]
        del self._entries[session_id]
        self._claims.pop(session_id, None)
        return True

    async def claim(
        self, owner: str, session_id: str, holder: str, ttl: float = DEFAULT_CLAIM_TTL
    ) -> bool:
        if self._mine(owner, session_id) is None:
            return False
        now = asyncio.get_running_loop().time()
        current = self._claims.get(session_id)
        if (
            current is not None
            and current[0] != holder
            and current[1] > now
            and not holder_is_dead(current[0])
        ):
            return False
        self._claims[session_id] = (holder, now + ttl)
        return True

    async def release(self, owner: str, session_id: str, holder: str) -> None:
        current = self._claims.get(session_id)
        if (
            current is not None
            and current[0] == holder
            and self._mine(owner, session_id) is not None
        ):
            del self._claims[session_id]

    async def aclose(self) -> None:
        return None


def parse_cursor(after: str | None) -> tuple[str, str] | None:
    """The (updated_at, session_id) a list cursor names; `ValueError` for one no store gave."""
    if after is None:
        return None
    updated, sep, sid = after.partition("|")
    if not sep or not updated or not sid:
        raise ValueError(f"not a cursor of this store: {after!r}")
    return updated, sid


def make_cursor(record: SessionRecord) -> str:
    """The cursor of the page that follows `record` (the last of its page)."""
    return f"{record.updated_at}|{record.session_id}"

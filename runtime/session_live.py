"""The session layer's per-session parts: `LiveSession` (a session as a prompt turn sees it)
and `Recorder` (group commit of a turn's conversation entries), over any `Host` (the layer's
`SessionCore`). Also `Features` (what the schema has of sessions) and the layer's errors.

Recording: entries are buffered and written in batches (one `store.save` per batch of up to
`batch` entries or `delay` seconds); the layer flushes the buffer before every answer, so a
kill -9 loses at most the entries of the turn in flight. On a store failure the entries stay
buffered, in order, and the next flush retries them. Each entry is encoded once: the bytes
sent to the client are the ones recorded (`RecordedEntry.json`), and a replay sends them again.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .dispatch import RequestError
from .jsonline import dumps
from .session_store import RecordedBatch, SessionRecord, StoreError

__all__ = [
    "Features",
    "Host",
    "Json",
    "LiveSession",
    "Recorder",
    "Send",
    "SendEncoded",
    "encode",
    "not_found",
    "now",
    "store_failed",
]

log = logging.getLogger(__name__)

Json = dict[str, Any]
Send = Callable[[str, Json], Awaitable[None]]
"""Sends one `session/update` (the session id and the update's wire JSON) to the client."""
SendEncoded = Callable[[bytes], Awaitable[None]]
"""Sends one `session/update` whose params are already encoded (`LiveSession.params`)."""


def encode(update: Mapping[str, Any]) -> bytes:
    """An update's compact JSON, as the connection encodes a message (TypeError or ValueError
    when it is not JSON)."""
    # less the line's newline (compact JSON has no other)
    return dumps(update if isinstance(update, dict) else dict(update))[:-1]


def now() -> str:
    """The current time as RFC 3339 UTC with microseconds and a `Z` (sorts as text)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Features:
    """What the schema being generated has of sessions (decided in codegen.build_sessions)."""

    served: frozenset[str]
    """The wire methods the layer answers (`session/load`, ...)."""
    response_fields: Mapping[str, frozenset[str]]
    """Wire method -> the wire fields its result type has (`modes`, `configOptions`, ...)."""
    update_tags: frozenset[str]
    """The `sessionUpdate` tags the schema has (`current_mode_update`, ...)."""
    session_capabilities_field: str
    """The capabilities' session field (v1 `sessionCapabilities`, v2 `session`), or empty."""
    session_capabilities: frozenset[str]
    """Its keys that say a session method is served (`list`, `delete`, ...)."""
    info_fields: frozenset[str]
    """The fields of a `session/list` entry (`title`, `updatedAt`, ...)."""
    initialize_fields: frozenset[str]
    """The fields of the initialize result (`authMethods`, `agentInfo`, ...)."""


def not_found(session_id: str) -> RequestError:
    # Another owner's session is answered exactly as an unknown one.
    return RequestError(-32002, "Resource not found", {"sessionId": session_id})


def store_failed(exc: StoreError) -> RequestError:
    return RequestError.internal_error({"message": f"session store: {exc}"})


class Host(Protocol):
    """What a session and its recorder need of the layer (`SessionCore`)."""

    batch: int
    delay: float
    send: Send
    send_encoded: SendEncoded

    async def save(self, session: LiveSession, entries: Sequence[Mapping[str, Any]]) -> None: ...

    async def info_update(self, session: LiveSession) -> None: ...


class Recorder:
    """Group commit of one turn's entries: buffered, saved in batches, flushed on demand."""

    def __init__(self, core: Host, session: LiveSession) -> None:
        self.core, self.session = core, session
        self.buffer: list[Json] = []
        self.data: list[bytes] = []  # the encoding of each buffered entry
        self.lock = asyncio.Lock()
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.error: StoreError | None = None

    def add(self, entry: Json, data: bytes | None = None) -> None:
        """Buffer `entry` (wire JSON); `data` its encoding when it was sent (recorded as is)."""
        self.buffer.append(entry)
        self.data.append(encode(entry) if data is None else data)
        if len(self.buffer) >= self.core.batch:
            self._kick()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.core.delay, self._kick)

    def _kick(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._background())

    async def _background(self) -> None:
        try:
            await self.flush()
        except StoreError as exc:  # kept in the buffer; the turn's end retries and reports
            self.error = exc
            log.warning("session %s: recording deferred: %s", self.session.id, exc)

    async def flush(self) -> None:
        """Write the buffer (and the session's state) in one `save`; on failure the entries stay
        buffered, in order, and the `StoreError` is raised."""
        async with self.lock:
            batch, data = self.buffer, self.data
            self.buffer, self.data = [], []
            try:
                await self.core.save(self.session, RecordedBatch(batch, data) if batch else ())
            except BaseException:
                self.buffer[:0], self.data[:0] = batch, data
                raise
            self.error = None

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class LiveSession:
    """A session as a prompt turn sees it: its id, cwd, mode, config values and the author's own
    JSON `data` (kept with the session), and `send_wire` for conversation entries."""

    def __init__(self, core: Host, record: SessionRecord) -> None:
        self.core = core
        self.id = record.session_id
        self.cwd = record.cwd
        self.owner = record.owner
        self.title = record.title
        self.updated_at = record.updated_at
        state = dict(record.state)
        self.mode: str | None = state.get("mode")
        self.config: dict[str, Any] = dict(state.get("config") or {})
        self.mcp_servers: list[Any] = list(state.get("mcpServers") or [])
        self.data: dict[str, Any] = dict(state.get("data") or {})
        self.cancelled = False
        self.recorder: Recorder | None = None
        # the params of this session's `session/update` up to the update itself
        self.head = b'{"sessionId":' + json.dumps(self.id).encode() + b',"update":'

    def params(self, update: bytes) -> bytes:
        """The encoded params of a `session/update` of this session carrying `update` (JSON)."""
        return self.head + update + b"}"

    def state(self) -> Json:
        return {
            "mode": self.mode,
            "config": self.config,
            "mcpServers": self.mcp_servers,
            "data": self.data,
        }

    async def send_wire(self, update: Json) -> None:
        """Record `update` (a conversation entry, wire JSON) and send it; nothing after a cancel."""
        if self.cancelled:
            return
        data = dumps(update)[:-1]  # encode(), inline: this runs for every chunk of a turn
        if self.recorder is not None:
            self.recorder.add(update, data)
        await self.core.send_encoded(self.head + data + b"}")

    async def set_title(self, title: str) -> None:
        """Name the session: kept, listed, and told to the client (`session_info_update`)."""
        self.title = title
        if self.recorder is not None:
            await self.recorder.flush()
        else:
            await self.core.save(self, [])
        await self.core.info_update(self)

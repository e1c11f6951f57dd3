"""One remote connection's plumbing: the agent's `Connection` served over in-memory queues
instead of stdio, with bounded buffers both ways (part of `remote`).

The agent runs on the same JSON-RPC runtime as over stdio: its reader is an `Inbox` of whole
messages from the transport, its writer an `Outbox` that hands each message it writes to
the transport's `Channel`s. Both are bounded in bytes: a client sending faster than the agent
reads waits on `Inbox.put` (the transport stops reading its socket), and an agent writing
faster than the client reads waits in `drain()` (its handler pauses), so a slow reader never
grows the server's memory beyond about `send_buffer` bytes per connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from collections.abc import Callable
from typing import Any

from .agent import Agent, ClientProxy
from .connection import Connection, ConnectionClosed
from .dispatch import Dispatcher
from .methods import AGENT_HANDLES
from .types import DecodeContext

_log = logging.getLogger(__name__)


class Inbox:
    """Client->agent messages, one per `read()`, each ending in a newline (the connection's
    `Reader`). `put` waits while more than `limit` bytes are unread (but always takes one)."""

    def __init__(self, limit: int) -> None:
        self._items: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self._eof = False
        self._readable = asyncio.Event()
        self._room = asyncio.Event()

    async def put(self, data: bytes) -> bool:
        """Queue one message; False if the connection is over (the message is dropped)."""
        while self._size and self._size + len(data) > self._limit and not self._eof:
            self._room.clear()
            await self._room.wait()
        if self._eof:
            return False
        self._items.append(data)
        self._size += len(data)
        self._readable.set()
        return True

    def close(self) -> None:
        """EOF for the agent: it reads what is queued, then b""."""
        self._eof = True
        self._readable.set()
        self._room.set()

    async def read(self, n: int = -1) -> bytes:
        while not self._items:
            if self._eof:
                return b""
            self._readable.clear()
            await self._readable.wait()
        data = self._items.popleft()
        self._size -= len(data)
        self._room.set()
        return data


class Channel:
    """Agent->client messages for one consumer (a WebSocket, or one SSE stream)."""

    __slots__ = ("items", "ready", "stop")

    def __init__(self) -> None:
        self.items: collections.deque[bytes] = collections.deque()
        self.ready = asyncio.Event()
        self.stop: asyncio.Event | None = None  # set to end the SSE stream reading this

    def push(self, line: bytes) -> None:
        self.items.append(line)
        self.ready.set()


class Outbox:
    """The agent connection's `Writer`: `write` gets one whole message (the connection writes
    each in one call) and routes it to a channel; `drain` waits while more than `limit` bytes
    are routed but not yet sent."""

    def __init__(self, route: Callable[[bytes], None], limit: int) -> None:
        self._route = route
        self._limit = limit
        self.size = 0
        self.closed = False
        self._room = asyncio.Event()

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("the remote connection is closed")
        self.size += len(data)
        self._route(data)

    def sent(self, data: bytes) -> None:
        """A consumer sent `data` (taken from a channel) to the client."""
        self.size -= len(data)
        if self.size <= self._limit:
            self._room.set()

    async def drain(self) -> None:
        while self.size > self._limit and not self.closed:
            self._room.clear()
            await self._room.wait()

    def close(self) -> None:
        self.closed = True
        self._room.set()


class Link:
    """One remote connection: its id, its agent (from the factory) served by a `Connection`
    over an `Inbox`/`Outbox` pair, and the activity clock the idle timeout reads."""

    def __init__(
        self,
        agent: Agent,
        route: Callable[[bytes], None],
        *,
        ctx: DecodeContext | None,
        max_message_size: int,
        send_buffer: int,
        shutdown_grace: float,
    ) -> None:
        self.id = str(uuid.uuid4())
        self.agent = agent
        self.inbox = Inbox(max(send_buffer, 1))
        self.outbox = Outbox(route, send_buffer)
        self.connection = Connection(
            Dispatcher(agent, AGENT_HANDLES, ctx),
            self.inbox,
            self.outbox,
            max_message_size=max_message_size,
            shutdown_grace=shutdown_grace,
        )
        agent.on_connect(ClientProxy(self.connection, ctx))
        loop = asyncio.get_running_loop()
        self.last_activity = loop.time()
        self.closed = asyncio.Event()  # set once the link is being torn down
        self.task: asyncio.Task[None] = loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            await self.connection.run()
        except Exception:  # a bug in the runtime: logged, the connection is over
            _log.exception("remote connection %s failed", self.id)
        finally:
            self.outbox.close()
            self.closed.set()

    def touch(self) -> None:
        self.last_activity = asyncio.get_running_loop().time()

    async def deliver(self, data: bytes) -> bool:
        """One client->agent message (no newline inside: see `frame`)."""
        self.touch()
        return await self.inbox.put(data)

    def idle_for(self, now: float) -> float:
        """Seconds with no traffic and nothing in flight (0 while busy); a connection whose
        queued output is stuck behind a client that stopped reading counts as idle."""
        stats = self.connection.stats()
        if self.outbox.size == 0 and (stats["inflight"] or stats["pending"]):
            return 0.0
        return now - self.last_activity

    async def close(self) -> None:
        """End the connection: EOF for the agent, whose handlers still running are cancelled
        (after `shutdown_grace`); returns once its tasks are done."""
        self.closed.set()
        self.inbox.close()
        await asyncio.shield(self.task)


def frame(data: bytes) -> bytes:
    """A received message as one line: a raw newline in JSON text can only be whitespace
    (inside strings it must be escaped), so replacing it keeps the message intact."""
    if b"\n" in data:
        data = data.replace(b"\n", b" ")
    return data + b"\n"


def error_body(msg_id: Any, code: int, message: str, detail: str) -> dict[str, Any]:
    """A JSON-RPC error response for a transport-level refusal."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "error": {"code": code, "message": message, "data": {"details": detail}},
    }


__all__ = ["Channel", "ConnectionClosed", "Inbox", "Link", "Outbox", "error_body", "frame"]
